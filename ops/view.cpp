// View ops share storage with their input; backward maps the gradient back to the input's shape.
#include "ops/view.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/gather_scatter.h"
#include "ops/reduce.h"

namespace minidl {

namespace {

Shape infer_shape(Shape shape, int64_t numel, const char* op, const Shape& from) {
  int64_t known = 1, infer = -1;
  bool overflow = false, has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      MINIDL_CHECK(infer < 0, op, ": only one dimension can be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      MINIDL_CHECK(shape[i] >= 0, op, ": invalid shape ", shape);
      has_zero |= shape[i] == 0;
      overflow |= __builtin_mul_overflow(known, shape[i], &known);
    }
  }
  // A product past int64 matches no tensor (and computing it plainly would be undefined behaviour);
  // a zero dimension makes it 0 whatever the others are.
  MINIDL_CHECK(!overflow || has_zero, op, ": shape ", shape, " has more elements than an int64 can count");
  if (has_zero) known = 0;
  if (infer >= 0) {
    MINIDL_CHECK(known > 0 && numel % known == 0, op, ": shape ", shape, " is invalid for input of shape ", from);
    shape[infer] = numel / known;
  }
  MINIDL_CHECK(shape_numel(shape) == numel, op, ": shape ", shape, " is invalid for input of shape ", from, " (",
               numel, " elements)");
  return shape;
}

// Strides for viewing `x` as `shape` without a copy, or empty if its layout does not allow it:
// each group of input dims merged or split must be contiguous within itself.
std::optional<Strides> view_strides(const Tensor& x, const Shape& shape) {
  if (x.is_contiguous()) return contiguous_strides(shape);
  // General case (e.g. a transposed tensor's dims that stay separate): match dims in chunks.
  const Shape& old_shape = x.shape();
  const Strides& old_strides = x.strides();
  Strides strides(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return strides;
}

Tensor make_view_op(const char* name, const Tensor& x, Shape shape, Strides strides, int64_t offset) {
  Tensor out = Tensor::make_view(x, std::move(shape), std::move(strides), offset);
  if (autograd::needs_recording({x})) {
    Shape in_shape = x.shape();
    autograd::record(name, out, {x}, [in_shape](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{reshape(g, in_shape)};
    }, true);
  }
  return out;
}

}  // namespace

Tensor view(const Tensor& x, Shape shape) {
  shape = infer_shape(std::move(shape), x.numel(), "view", x.shape());
  auto strides = view_strides(x, shape);
  MINIDL_CHECK(strides.has_value(), "view: shape ", shape, " is not compatible with the input's size ", x.shape(),
               " and strides; use reshape() (which copies) or contiguous() first");
  return make_view_op("view", x, std::move(shape), std::move(*strides), x.offset());
}

Tensor reshape(const Tensor& x, Shape shape) {
  shape = infer_shape(std::move(shape), x.numel(), "reshape", x.shape());
  if (auto strides = view_strides(x, shape)) return make_view_op("reshape", x, std::move(shape), std::move(*strides), x.offset());
  return view(x.contiguous(), std::move(shape));
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = wrap_dim(start_dim, x.dim(), "flatten");
  end_dim = wrap_dim(end_dim, x.dim(), "flatten");
  MINIDL_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " must not come after end_dim ", end_dim);
  Shape shape(x.shape().begin(), x.shape().begin() + start_dim);
  int64_t merged = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) merged *= x.shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + end_dim + 1, x.shape().end());
  return reshape(x, shape);
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  dim = wrap_dim(dim, x.dim(), "unflatten");
  MINIDL_CHECK(!sizes.empty(), "unflatten: expected sizes of at least one dim, got []");
  int64_t known = 1, inferred = 0;
  for (int64_t s : sizes) {
    MINIDL_CHECK(s >= 0 || s == -1, "unflatten: sizes may hold -1 once and non-negative sizes, got ", sizes);
    if (s == -1) ++inferred;
    else known *= s;
  }
  const int64_t size = x.shape()[dim];
  MINIDL_CHECK(inferred <= 1, "unflatten: only one of sizes ", sizes, " may be -1");
  MINIDL_CHECK(inferred ? (known > 0 && size % known == 0) : known == size, "unflatten: sizes ", sizes,
               " do not multiply to dim ", dim, "'s size ", size, " of shape ", x.shape());
  Shape shape(x.shape().begin(), x.shape().begin() + dim);
  for (int64_t s : sizes) shape.push_back(s == -1 ? size / known : s);
  shape.insert(shape.end(), x.shape().begin() + dim + 1, x.shape().end());
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim(), "squeeze");
  if (x.dim() == 0 || x.shape()[dim] != 1) return x;
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape.erase(shape.begin() + dim);
  strides.erase(strides.begin() + dim);
  return make_view_op("squeeze", x, std::move(shape), std::move(strides), x.offset());
}

Tensor squeeze(const Tensor& x) {
  Shape shape;
  Strides strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (x.shape()[d] == 1) continue;
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  if (shape.size() == x.shape().size()) return x;
  return make_view_op("squeeze", x, std::move(shape), std::move(strides), x.offset());
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  Strides strides = x.strides();
  int64_t stride = dim < x.dim() ? x.strides()[dim] * x.shape()[dim] : 1;
  shape.insert(shape.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return make_view_op("unsqueeze", x, std::move(shape), std::move(strides), x.offset());
}

Tensor movedim(const Tensor& x, const std::vector<int64_t>& source, const std::vector<int64_t>& destination) {
  MINIDL_CHECK(source.size() == destination.size(), "movedim: source and destination name ", source.size(),
               " and ", destination.size(), " dims; expected as many");
  const int64_t rank = x.dim();
  std::vector<int64_t> order(static_cast<size_t>(rank), -1);
  std::vector<bool> moved(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < source.size(); ++i) {
    const int64_t from = wrap_dim(source[i], rank, "movedim"), to = wrap_dim(destination[i], rank, "movedim");
    MINIDL_CHECK(!moved[from], "movedim: dim ", from, " repeats in source ", Shape(source));
    MINIDL_CHECK(order[to] == -1, "movedim: dim ", to, " repeats in destination ", Shape(destination));
    moved[from] = true;
    order[to] = from;
  }
  // The dims not moved fill the free positions in their order.
  int64_t next = 0;
  for (int64_t& o : order) {
    if (o != -1) continue;
    while (moved[next]) ++next;
    o = next++;
  }
  return permute(x, order);
}

Tensor movedim(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, std::vector<int64_t>{source}, std::vector<int64_t>{destination});
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  MINIDL_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute: expected ", x.dim(), " dims for shape ",
               x.shape(), ", got ", Shape(dims));
  std::vector<int64_t> wrapped(dims.size());
  std::vector<bool> seen(dims.size(), false);
  Shape shape(dims.size());
  Strides strides(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], x.dim(), "permute");
    MINIDL_CHECK(!seen[d], "permute: dimension ", d, " repeats in ", Shape(dims));
    seen[d] = true;
    wrapped[i] = d;
    shape[i] = x.shape()[d];
    strides[i] = x.strides()[d];
  }
  Tensor out = Tensor::make_view(x, std::move(shape), std::move(strides), x.offset());
  if (autograd::needs_recording({x})) {
    std::vector<int64_t> inverse(wrapped.size());
    for (size_t i = 0; i < wrapped.size(); ++i) inverse[wrapped[i]] = static_cast<int64_t>(i);
    autograd::record("permute", out, {x}, [inverse](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{permute(g, inverse)};
    }, true);
  }
  return out;
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  std::vector<int64_t> dims(static_cast<size_t>(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(dim0, x.dim(), "transpose")], dims[wrap_dim(dim1, x.dim(), "transpose")]);
  return permute(x, dims);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  MINIDL_CHECK(shape.size() >= x.shape().size(), "expand: cannot expand shape ", x.shape(), " to ", shape);
  size_t lead = shape.size() - x.shape().size();
  Strides strides(shape.size(), 0);
  for (size_t i = 0; i < x.shape().size(); ++i) {
    int64_t have = x.shape()[i], want = shape[lead + i];
    MINIDL_CHECK(have == want || have == 1, "expand: cannot expand shape ", x.shape(), " to ", shape);
    strides[lead + i] = have == want ? x.strides()[i] : 0;
  }
  if (shape == x.shape()) return x;
  Tensor out = Tensor::make_view(x, shape, std::move(strides), x.offset());
  if (autograd::needs_recording({x})) {
    Shape in_shape = x.shape();
    autograd::record("expand", out, {x}, [in_shape](const Tensor& g, const std::vector<bool>&) {
      return std::vector<Tensor>{sum_to_shape(g, in_shape)};
    }, true);
  }
  return out;
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), "unfold");
  const int64_t length = x.dim() == 0 ? 1 : x.size(d), stride = x.dim() == 0 ? 1 : x.stride(d);
  MINIDL_CHECK(size >= 0 && size <= length, "unfold: expected 0 <= size <= ", length, " (dimension ", d, "), got ",
               size);
  MINIDL_CHECK(step > 0, "unfold: expected step > 0, got ", step);
  const int64_t windows = (length - size) / step + 1;
  Shape shape = x.shape();
  Strides strides = x.strides();
  if (x.dim() > 0) {
    shape[static_cast<size_t>(d)] = windows;
    strides[static_cast<size_t>(d)] = stride * step;
  }
  shape.push_back(size);
  strides.push_back(stride);
  Tensor out = Tensor::make_view(x, std::move(shape), std::move(strides), x.offset());
  if (autograd::needs_recording({x})) {
    autograd::record("unfold", out, {x}, [in_shape = x.shape(), d, size, step, windows](const Tensor& g,
                                                                                         const std::vector<bool>&) {
      // Window w's element j came from w * step + j: the windows' gradients added back there.
      if (in_shape.empty()) return std::vector<Tensor>{reshape(g, in_shape)};
      std::vector<int64_t> positions;
      for (int64_t w = 0; w < windows; ++w)
        for (int64_t j = 0; j < size; ++j) positions.push_back(w * step + j);
      const Tensor index = Tensor::from_vector<int64_t>(positions).to(g.device());
      Shape merged = in_shape;
      merged[static_cast<size_t>(d)] = windows * size;
      const Tensor flat = reshape(movedim(g, -1, d + 1), merged);
      return std::vector<Tensor>{index_add(zeros(in_shape, g.dtype(), g.device()), d, index, flat)};
    }, true);
  }
  return out;
}

}  // namespace minidl
