// pad. Shapes: x [..., d_k, ..., d_last] -> each padded dim d grows by its left + right pads.
// Each dimension is padded in turn, from the last. Constant mode joins blocks of `value` to x (or
// narrows it, for a negative pad) with cat; the other modes are one index_select per dimension,
// with the index of the source element of every output position (mirrored, clamped or wrapped).
// Both are exact compositions: cat's backward slices, and index_select's adds back every copy of
// an element (the reflected and replicated edges), so the gradient needs nothing of its own, on
// any device.
#include "ops/pad.h"

#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/slice.h"

namespace minidl {

namespace {

enum class Mode { Constant, Reflect, Replicate, Circular };

Mode parse_mode(const std::string& mode) {
  if (mode == "constant") return Mode::Constant;
  if (mode == "reflect") return Mode::Reflect;
  if (mode == "replicate") return Mode::Replicate;
  if (mode == "circular") return Mode::Circular;
  MINIDL_FAIL("pad: unknown mode \"", mode, "\"; expected \"constant\", \"reflect\", \"replicate\" or \"circular\"");
}

// The source position along a dimension of `size` for output position i - left.
int64_t source(Mode mode, int64_t i, int64_t size) {
  switch (mode) {
    case Mode::Reflect: return i < 0 ? -i : (i >= size ? 2 * (size - 1) - i : i);
    case Mode::Replicate: return i < 0 ? 0 : (i >= size ? size - 1 : i);
    default: return ((i % size) + size) % size;  // Circular
  }
}

Tensor pad_constant(const Tensor& x, int64_t d, int64_t left, int64_t right, double value) {
  Tensor out = x;
  // Negative pads crop first, as narrow views.
  const int64_t size = x.size(d);
  const int64_t crop_left = left < 0 ? -left : 0, crop_right = right < 0 ? -right : 0;
  if (crop_left || crop_right) out = narrow(out, d, crop_left, size - crop_left - crop_right);
  std::vector<Tensor> parts;
  auto block = [&](int64_t n) {
    Shape shape = out.shape();
    shape[static_cast<size_t>(d)] = n;
    return full(shape, value, x.dtype(), x.device());
  };
  if (left > 0) parts.push_back(block(left));
  parts.push_back(out);
  if (right > 0) parts.push_back(block(right));
  return parts.size() == 1 ? out : cat(parts, d);
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const std::string& mode_name, double value) {
  MINIDL_CHECK(x.defined(), "pad: x is undefined");
  const Mode mode = parse_mode(mode_name);
  const int64_t dims = static_cast<int64_t>(pad.size()) / 2;
  MINIDL_CHECK(pad.size() % 2 == 0, "pad: expected an even number of pads ({left, right, top, bottom, ...}), got ",
               pad.size());
  MINIDL_CHECK(dims <= x.dim(), "pad: ", pad.size(), " pads cover ", dims, " dimensions, but x of shape ", x.shape(),
               " has ", x.dim());
  if (mode != Mode::Constant) {
    MINIDL_CHECK(dims >= 1 && dims <= 3 && (x.dim() == dims + 1 || x.dim() == dims + 2), "pad: mode \"", mode_name,
                 "\" pads the last 1, 2 or 3 dimensions of a tensor with one or two more (batch and channels): ",
                 pad.size(), " pads take a ", dims + 1, "-D or ", dims + 2, "-D x, got shape ", x.shape());
    MINIDL_CHECK(value == 0, "pad: a fill value is for mode \"constant\" only, got ", value, " with \"", mode_name, "\"");
  }
  Tensor out = x;
  for (int64_t k = 0; k < dims; ++k) {
    const int64_t d = x.dim() - 1 - k;
    const int64_t left = pad[static_cast<size_t>(2 * k)], right = pad[static_cast<size_t>(2 * k + 1)];
    const int64_t size = x.size(d);
    MINIDL_CHECK(size + left + right >= 0, "pad: dimension ", d, " of size ", size, " padded by (", left, ", ", right,
                 ") would have a negative size ", size + left + right);
    if (mode == Mode::Constant) {
      out = pad_constant(out, d, left, right, value);
      continue;
    }
    MINIDL_CHECK(left >= 0 && right >= 0, "pad: mode \"", mode_name, "\" expects pads >= 0, got (", left, ", ", right,
                 ") for dimension ", d);
    if (mode == Mode::Reflect)
      MINIDL_CHECK(left < size && right < size, "pad: reflect padding must be smaller than the dimension it pads: (",
                   left, ", ", right, ") for dimension ", d, " of size ", size, " (shape ", x.shape(), ")");
    if (mode == Mode::Replicate)
      MINIDL_CHECK(size > 0, "pad: replicate padding needs a non-empty dimension, got dimension ", d, " of size 0");
    if (mode == Mode::Circular)
      MINIDL_CHECK(left <= size && right <= size, "pad: circular padding may wrap around at most once: (", left, ", ",
                   right, ") for dimension ", d, " of size ", size, " (shape ", x.shape(), ")");
    if (left == 0 && right == 0) continue;
    std::vector<int64_t> index(static_cast<size_t>(size + left + right));
    for (int64_t i = 0; i < static_cast<int64_t>(index.size()); ++i)
      index[static_cast<size_t>(i)] = source(mode, i - left, size);
    out = index_select(out, d, Tensor::from_vector<int64_t>(index).to(x.device()));
  }
  // Padding always returns a new tensor, never x itself.
  return out.is_same(x) ? x.clone() : out;
}

Tensor pad(const Tensor& x, const PadOptions& options) { return pad(x, options.pad(), options.mode(), options.value()); }

}  // namespace minidl
