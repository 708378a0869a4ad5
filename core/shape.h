#pragma once
// Shapes, strides and the rules that relate them (row-major strides, broadcasting, dim wrapping).
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <utility>
#include <vector>

#include "core/error.h"

namespace minidl {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

/// Number of elements of a shape; 1 for a scalar (empty shape).
int64_t shape_numel(const Shape& shape);
/// Row-major strides, in elements.
Strides contiguous_strides(const Shape& shape);

/// How a 4-D [N, C, H, W] tensor lies in memory, as PyTorch's torch.memory_format: Contiguous is
/// row-major (NCHW); ChannelsLast keeps the shape but stores NHWC (strides [H*W*C, 1, W*C, C]), the
/// layout of cuDNN's tensor-core convolutions.
enum class MemoryFormat { Contiguous, ChannelsLast };
/// The strides of `format` for `shape`; ChannelsLast needs a 4-D shape.
Strides format_strides(const Shape& shape, MemoryFormat format);
/// Whether `strides` lay `shape` out as `format` (dimensions of size 1 may have any stride, as in
/// is_contiguous; so a tensor of one channel is both NCHW and NHWC).
bool has_format(const Shape& shape, const Strides& strides, MemoryFormat format);
/// NumPy broadcasting of two shapes; throws naming `op` and both shapes when they don't broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// True when `from` broadcasts to exactly `to` (no dimension of `to` grows).
bool broadcasts_to(const Shape& from, const Shape& to);
/// Turns a possibly negative dim into 0..rank-1, with a clear error naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);

/// A list of sizes or dims as libtorch's IntArrayRef takes it: a braced list, a Shape, or ONE
/// integer (a 1-element list). It owns its values and converts to `const Shape&`.
///   zeros({2, 3});  zeros(5);  zeros(x.sizes());  x.sum(1);  x.sum({0, 1});
class IntArrayRef {
 public:
  IntArrayRef() = default;
  IntArrayRef(int64_t value) : values_{value} {}  // NOLINT: implicit on purpose, as x.sum(1)
  IntArrayRef(std::initializer_list<int64_t> values) : values_(values) {}
  IntArrayRef(const Shape& values) : values_(values) {}  // NOLINT
  IntArrayRef(Shape&& values) : values_(std::move(values)) {}  // NOLINT

  operator const Shape&() const { return values_; }  // NOLINT
  const Shape& vec() const { return values_; }
  size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }
  const int64_t* data() const { return values_.data(); }
  int64_t operator[](size_t i) const { return values_[i]; }
  Shape::const_iterator begin() const { return values_.begin(); }
  Shape::const_iterator end() const { return values_.end(); }
  friend bool operator==(const IntArrayRef& a, const IntArrayRef& b) { return a.values_ == b.values_; }

 private:
  Shape values_;
};

inline std::ostream& operator<<(std::ostream& os, const IntArrayRef& a) { return os << a.vec(); }


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
