#pragma once
// Shapes, strides and the rules that relate them (row-major strides, broadcasting, dim wrapping).
#include <cstdint>
#include <ostream>
#include <vector>

#include "core/error.h"

namespace minidl {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

/// Number of elements of a shape; 1 for a scalar (empty shape).
int64_t shape_numel(const Shape& shape);
/// Row-major strides, in elements.
Strides contiguous_strides(const Shape& shape);
/// NumPy broadcasting of two shapes; throws naming `op` and both shapes when they don't broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// True when `from` broadcasts to exactly `to` (no dimension of `to` grows).
bool broadcasts_to(const Shape& from, const Shape& to);
/// Turns a possibly negative dim into 0..rank-1, with a clear error naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);


}  // namespace minidl

namespace minidl {

/// A (height, width) pair that also accepts one number for both, like PyTorch's ExpandingArray<2>.
///   conv2d(x, w, b, /*stride=*/2, /*padding=*/{1, 0});
struct Size2 {
  int64_t h, w;
  Size2(int64_t both) : h(both), w(both) {}  // NOLINT: implicit on purpose
  Size2(int64_t h, int64_t w) : h(h), w(w) {}
  friend bool operator==(const Size2&, const Size2&) = default;
};

}  // namespace minidl
