#pragma once
// unique and unique_consecutive, as torch.unique / torch.unique_consecutive. Not differentiable
// (as PyTorch's); composed of sort, comparisons, cumsum, masked_select and scatter, so they run
// wherever those run. The number of distinct values sets the result's size: it is read on the host
// (masked_select / nonzero: a device sync on CUDA).
#include <cstdint>
#include <optional>
#include <tuple>

#include "core/tensor.h"

namespace minidl {

/// (values, inverse, counts): the distinct values of x in ascending order (also when sorted is
/// false, where PyTorch leaves the order unspecified); with return_inverse the int64 index into
/// values of each element of x (x's shape); with return_counts the int64 number of times each value
/// occurs. A result not asked for is an empty int64 tensor of shape [0], as libtorch's _unique2
/// returns. Without dim x is flattened (NaNs count as distinct from each other); with dim the
/// distinct slices along dim, in lexicographic order (values keep x's other dims; inverse and counts
/// are 1-D over dim). The dim form sorts once per element of a slice (stable sorts, last element first).
///   auto [u, inverse, counts] = unique(labels, true, true, true);
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted = true, bool return_inverse = false,
                                          bool return_counts = false, std::optional<int64_t> dim = std::nullopt);
/// libtorch's unique_dim: unique(x, sorted, return_inverse, return_counts, dim).
std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& x, int64_t dim, bool sorted = true,
                                              bool return_inverse = false, bool return_counts = false);
/// Collapses runs of equal consecutive elements (or slices along dim) to one, keeping their order:
/// (values, inverse, counts) as unique's, the empty [0] tensors where not asked for.
///   unique_consecutive(Tensor::from_vector<int64_t>({1, 1, 2, 1}))  // values {1, 2, 1}
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse = false,
                                                      bool return_counts = false,
                                                      std::optional<int64_t> dim = std::nullopt);

}  // namespace minidl
