// Shapes: narrow keeps x's shape but `length` along dim, with x's strides and an offset of
// start * stride[dim]; slice likewise with ceil((end - start) / step) elements and the stride
// multiplied by step; cat's output has the sum of the inputs' sizes along dim. Backward: narrow's
// and slice's gradient is zeros with g copied into the same window; cat's gradient for each input
// is the narrow of g at that input's place; split's gradient is its parts' gradients, each in its
// window of one tensor (zeros where a part got none).
#include "ops/slice.h"

#include <algorithm>
#include <string>

#include "core/autograd.h"
#include "core/type_promotion.h"
#include "ops/creation.h"
#include "ops/kernels.h"
#include "ops/view.h"

namespace minidl {

namespace {

// The narrow view without recording it.
Tensor window(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  Shape shape = x.shape();
  shape[dim] = length;
  return Tensor::make_view(x, shape, x.strides(), x.offset() + start * x.strides()[dim]);
}

}  // namespace

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  MINIDL_CHECK(x.dim() > 0, "narrow: expected a tensor with at least one dimension, got a scalar");
  dim = wrap_dim(dim, x.dim(), "narrow");
  MINIDL_CHECK(start >= 0 && length >= 0 && start + length <= x.size(dim), "narrow: [", start, ", ", start + length,
               ") is outside dimension ", dim, " of shape ", x.shape(), " (size ", x.size(dim), ")");
  Tensor out = window(x, dim, start, length);
  if (autograd::needs_recording({x})) {
    autograd::record("narrow", out, {x}, [in_shape = x.shape(), dim, start, length](const Tensor& g,
                                                                                    const std::vector<bool>&) {
      Tensor grad = zeros(in_shape, g.dtype(), g.device());
      Tensor place = window(grad, dim, start, length);
      kernels_for(g.device()).copy(g, place);
      return std::vector<Tensor>{grad};
    });
  }
  return out;
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  MINIDL_CHECK(x.dim() > 0, "slice: expected a tensor with at least one dimension, got a scalar");
  dim = wrap_dim(dim, x.dim(), "slice");
  MINIDL_CHECK(step > 0, "slice: expected step > 0, got ", step);
  const int64_t size = x.size(dim);
  auto position = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t lo = start ? position(*start) : 0, hi = end ? position(*end) : size;
  const int64_t length = hi > lo ? (hi - lo + step - 1) / step : 0;
  // Every step-th element of a window: the window's view with the stride along dim multiplied.
  auto strided_window = [dim, lo, length, step](const Tensor& t) {
    Shape shape = t.shape();
    Strides strides = t.strides();
    shape[dim] = length;
    strides[dim] *= step;
    return Tensor::make_view(t, shape, strides, t.offset() + lo * t.strides()[dim]);
  };
  Tensor out = strided_window(x);
  if (autograd::needs_recording({x})) {
    autograd::record("slice", out, {x}, [in_shape = x.shape(), strided_window](const Tensor& g, const std::vector<bool>&) {
      Tensor grad = zeros(in_shape, g.dtype(), g.device());
      Tensor place = strided_window(grad);
      kernels_for(g.device()).copy(g, place);
      return std::vector<Tensor>{grad};
    });
  }
  return out;
}

Tensor cat(const std::vector<Tensor>& inputs, int64_t dim) {
  MINIDL_CHECK(!inputs.empty(), "cat: expected at least one tensor");
  for (size_t i = 0; i < inputs.size(); ++i) MINIDL_CHECK(inputs[i].defined(), "cat: tensor ", i, " is undefined");
  // Mixed dtypes meet in their result type, by recorded casts (gradients return in each one's dtype).
  const DType dtype = result_type(inputs);
  std::vector<Tensor> tensors;
  tensors.reserve(inputs.size());
  for (const Tensor& t : inputs) tensors.push_back(t.to(dtype));
  const Tensor& first = tensors[0];
  MINIDL_CHECK(first.defined() && first.dim() > 0, "cat: expected tensors with at least one dimension");
  dim = wrap_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    MINIDL_CHECK(t.device() == first.device(), "cat: tensor ", i, " is on ", t.device(), ", but tensor 0 is on ",
                 first.device());
    bool agrees = t.dim() == first.dim();
    for (int64_t d = 0; agrees && d < t.dim(); ++d) agrees = d == dim || t.size(d) == first.size(d);
    MINIDL_CHECK(agrees, "cat: tensor ", i, " has shape ", t.shape(), ", which differs from tensor 0's ",
                 first.shape(), " in a dimension other than ", dim);
    shape[dim] += t.size(dim);
  }
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    starts.push_back(at);
    Tensor place = window(out, dim, at, t.size(dim));
    kernels_for(out.device()).copy(t, place);
    at += t.size(dim);
  }
  bool record = false;
  for (const Tensor& t : tensors) record = record || autograd::needs_recording({t});
  if (record) {
    std::vector<int64_t> lengths;
    for (const Tensor& t : tensors) lengths.push_back(t.size(dim));
    autograd::record("cat", out, tensors, [dim, starts, lengths](const Tensor& g, const std::vector<bool>& needs) {
      std::vector<Tensor> grads(needs.size());
      for (size_t i = 0; i < needs.size(); ++i)
        if (needs[i]) grads[i] = window(g, dim, starts[i], lengths[i]);
      return grads;
    }, true);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  MINIDL_CHECK(!tensors.empty() && tensors[0].defined(), "stack: expected at least one tensor");
  for (size_t i = 1; i < tensors.size(); ++i)
    MINIDL_CHECK(tensors[i].defined() && tensors[i].shape() == tensors[0].shape(), "stack: tensor ", i,
                 " has shape ", tensors[i].defined() ? tensors[i].shape() : Shape{}, ", tensor 0 has ",
                 tensors[0].shape(), " (stack needs one shape)");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) expanded.push_back(unsqueeze(t, dim));
  return cat(expanded, dim);
}

namespace {

// The parts' gradients as one tensor of x's shape where they already lie side by side in one
// storage, each at its part's place in a contiguous layout (the fused attention writes q, k and v's
// gradients so, ops/attention.cpp); undefined otherwise.
Tensor adjacent_whole(const std::vector<Tensor>& grads, const Shape& in_shape, int64_t dim, int64_t split_size) {
  const Strides strides = contiguous_strides(in_shape);
  const Tensor& first = grads[0];
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    const int64_t start = static_cast<int64_t>(i) * split_size;
    Shape part = in_shape;
    part[dim] = std::min(split_size, in_shape[dim] - start);
    if (!g.defined() || g.impl().storage != first.impl().storage || g.dtype() != first.dtype() || g.shape() != part ||
        g.strides() != strides || g.offset() != first.offset() + start * strides[dim])
      return Tensor();
  }
  return Tensor::make_view(first, in_shape, strides, first.offset());
}

}  // namespace

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  MINIDL_CHECK(x.dim() > 0, "split: expected a tensor with at least one dimension, got a scalar");
  MINIDL_CHECK(split_size > 0, "split: expected split_size > 0, got ", split_size);
  dim = wrap_dim(dim, x.dim(), "split");
  std::vector<Tensor> parts;  // part i starts at i * split_size
  for (int64_t start = 0; start < x.size(dim); start += split_size)
    parts.push_back(window(x, dim, start, std::min(split_size, x.size(dim) - start)));
  if (autograd::needs_recording({x}) && !parts.empty()) {
    // One entry for all the parts, whose backward writes each part's gradient into its window of one
    // tensor: a narrow per part would make a zero tensor of x's size for each and add them up (in
    // nanoGPT's attention, q, k, v = c_attn(x).split(C): 3 fills, 3 copies and 2 additions of
    // [B, T, 3C] where 3 copies do).
    std::vector<Tensor*> outputs;
    for (Tensor& part : parts) outputs.push_back(&part);
    autograd::record_multi("split", outputs, {x}, {},
                           [in_shape = x.shape(), dim, split_size](const std::vector<Tensor>& grads,
                                                                   const std::vector<bool>&) {
                             auto first = std::find_if(grads.begin(), grads.end(),
                                                       [](const Tensor& g) { return g.defined(); });
                             if (first == grads.end()) return std::vector<Tensor>{Tensor()};
                             if (Tensor whole = adjacent_whole(grads, in_shape, dim, split_size); whole.defined())
                               return std::vector<Tensor>{whole};
                             const bool all = std::all_of(grads.begin(), grads.end(),
                                                          [](const Tensor& g) { return g.defined(); });
                             Tensor grad = all ? Tensor::empty(in_shape, first->dtype(), first->device())
                                               : zeros(in_shape, first->dtype(), first->device());
                             Kernels& kernels = kernels_for(grad.device());
                             for (size_t i = 0; i < grads.size(); ++i) {
                               if (!grads[i].defined()) continue;
                               Tensor place = window(grad, dim, static_cast<int64_t>(i) * split_size,
                                                     grads[i].size(dim));
                               kernels.copy(grads[i], place);
                             }
                             return std::vector<Tensor>{grad};
                           });
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  MINIDL_CHECK(chunks > 0, "chunk: expected chunks > 0, got ", chunks);
  MINIDL_CHECK(x.dim() > 0, "chunk: expected a tensor with at least one dimension, got a scalar");
  const int64_t size = x.size(wrap_dim(dim, x.dim(), "chunk"));
  return split(x, std::max<int64_t>(1, (size + chunks - 1) / chunks), dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  return split_with_sizes(x, split_sizes, dim);
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  MINIDL_CHECK(x.dim() > 0, "split_with_sizes: expected a tensor with at least one dimension, got a scalar");
  dim = wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t size : split_sizes) {
    MINIDL_CHECK(size >= 0, "split_with_sizes: expected sizes >= 0, got ", size);
    total += size;
  }
  MINIDL_CHECK(total == x.size(dim), "split_with_sizes: expected sizes that add up to ", x.size(dim),
               " (dimension ", dim, " of shape ", x.shape(), "), got ", total);
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t size : split_sizes) {
    parts.push_back(narrow(x, dim, start, size));
    start += size;
  }
  return parts;
}

std::vector<Tensor> tensor_split(const Tensor& x, int64_t sections, int64_t dim) {
  MINIDL_CHECK(x.dim() > 0, "tensor_split: expected a tensor with at least one dimension, got a scalar");
  MINIDL_CHECK(sections > 0, "tensor_split: expected sections > 0, got ", sections);
  const int64_t size = x.size(wrap_dim(dim, x.dim(), "tensor_split"));
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < sections; ++i) sizes.push_back(size / sections + (i < size % sections ? 1 : 0));
  return split_with_sizes(x, sizes, dim);
}

std::vector<Tensor> tensor_split(const Tensor& x, const std::vector<int64_t>& indices, int64_t dim) {
  MINIDL_CHECK(x.dim() > 0, "tensor_split: expected a tensor with at least one dimension, got a scalar");
  dim = wrap_dim(dim, x.dim(), "tensor_split");
  const int64_t size = x.size(dim);
  auto position = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  // Part k is x[indices[k-1]:indices[k]] as a Python slice: decreasing indices give an empty part,
  // and the next part starts at the smaller index again.
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t index : indices) {
    const int64_t end = position(index);
    parts.push_back(narrow(x, dim, start, std::max<int64_t>(0, end - start)));
    start = end;
  }
  parts.push_back(narrow(x, dim, start, size - start));
  return parts;
}

}  // namespace minidl
