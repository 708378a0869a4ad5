#pragma once
// Rearranging elements: repeat, flip, roll, the triangles tril / triu, one_hot and repeat_interleave,
// with PyTorch's names, arguments and results. Each is differentiable where PyTorch's is.
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// x tiled `repeats[d]` times along each dimension, as x.repeat(repeats): repeats has at least
/// x.dim() entries, extra leading ones add dimensions. The gradient sums over the copies.
///   repeat(Tensor::from_vector<float>({1, 2}), {2, 2})  // [[1, 2, 1, 2], [1, 2, 1, 2]]
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
/// x with the order of elements reversed along each of `dims` (a copy).   flip(x, {0, 1})
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
/// x shifted circularly by shifts[i] along dims[i] (elements leaving one end come back at the
/// other), as torch.roll; with no dims, x is flattened, rolled by shifts[0] and reshaped back.
///   roll(Tensor::from_vector<float>({1, 2, 3, 4}), {1})  // [4, 1, 2, 3]
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {});
/// The lower triangle of the last two dimensions (elements with col - row <= diagonal), zeros
/// above it; diagonal > 0 keeps diagonals above the main one.   tril(ones({3, 3}))
Tensor tril(const Tensor& x, int64_t diagonal = 0);
/// The upper triangle of the last two dimensions (col - row >= diagonal), zeros below it.
///   Tensor causal_mask = triu(ones({T, T}), 1).to(kBool);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
/// int64 class indices [*] -> int64 [*, num_classes] with a one at each index; num_classes = -1
/// infers max(x) + 1 (reading x on the host). Values outside [0, num_classes) are an error.
///   one_hot(Tensor::from_vector<int64_t>({0, 2}), 3)  // [[1, 0, 0], [0, 0, 1]]
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);
/// Each element repeated `repeats` times in place along `dim` (x flattened when no dim), as
/// torch.repeat_interleave.   repeat_interleave(Tensor::from_vector<float>({1, 2}), 2)  // [1, 1, 2, 2]
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);

/// x rotated by 90 degrees k times in the plane of dims (from the first towards the second), as
/// torch.rot90: k = 1 is flip(dims[1]) then a transpose.   rot90(image, 1, {-2, -1})
Tensor rot90(const Tensor& x, int64_t k = 1, const std::vector<int64_t>& dims = {0, 1});
/// flip along dim 0; along dim 1 (x has at least 2 dims).
Tensor flipud(const Tensor& x);
Tensor fliplr(const Tensor& x);

}  // namespace minidl
