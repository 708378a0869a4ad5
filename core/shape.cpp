#include "core/shape.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace minidl {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t s : shape) overflow |= __builtin_mul_overflow(n, s, &n);
  // A zero anywhere makes the count 0, whatever the other dimensions multiply to.
  if (overflow && std::find(shape.begin(), shape.end(), 0) == shape.end())
    MINIDL_FAIL("shape ", shape, " has more elements than an int64 can count");
  return n;
}

Strides contiguous_strides(const Shape& shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // Only a shape with a zero dimension can overflow here (any other was counted by shape_numel
    // before its tensor exists); it holds no elements, so its strides address nothing, and
    // saturating keeps them defined instead of wrapping.
    if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride))
      stride = std::numeric_limits<int64_t>::max();
  }
  return strides;
}

Strides format_strides(const Shape& shape, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return contiguous_strides(shape);
  MINIDL_CHECK(shape.size() == 4, "channels-last memory format: expected a 4-D [N, C, H, W] shape, got ", shape);
  // NHWC's row-major strides, put back in NCHW order.
  const Strides nhwc = contiguous_strides({shape[0], shape[2], shape[3], shape[1]});
  return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
}

bool has_format(const Shape& shape, const Strides& strides, MemoryFormat format) {
  if (format == MemoryFormat::ChannelsLast && shape.size() != 4) return false;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return true;  // no element out of place
  const Strides expected = format_strides(shape, format);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && strides[i] != expected[i]) return false;
  return true;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    MINIDL_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b,
                 " cannot be broadcast together (dimension ", i, " is ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 1; i <= from.size(); ++i) {
    const int64_t f = from[from.size() - i];
    if (f != 1 && f != to[to.size() - i]) return false;
  }
  return true;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  MINIDL_CHECK(dim >= lo && dim <= hi, op, ": dimension out of range (expected to be in [", lo, ", ", hi,
               "], got ", dim, ")");
  return dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim;
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) {
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  return os << ']';
}

}  // namespace minidl
