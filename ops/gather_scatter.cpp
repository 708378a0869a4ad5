// Shapes: gather's output has index's shape; scatter's and index_add's have x's. A 0-d x, index or
// src counts as 1-d of size 1, as in PyTorch. Backward: gather's gradient is scatter_add of g into
// zeros; scatter's is g with the written positions zeroed for x and g gathered at index for src
// (zero-padded to src's shape where index is smaller); scatter_add's is g for x and the gather for
// src; index_add's is g for x and alpha * index_select(g) for source.
#include "ops/gather_scatter.h"

#include <string>

#include "core/type_promotion.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace detail {

Tensor checked_index(const Tensor& index, int64_t size, Device device, const char* op, int64_t dim,
                     bool wrap_negative) {
  NoGradGuard no_grad;
  MINIDL_CHECK(is_integral(index.dtype()), op, ": tensors used as indices must be long, int, byte or bool tensors, got ",
               index.dtype());
  Tensor idx = index.to(kInt64).to(device);
  if (idx.numel() == 0) return idx;
  Tensor flat = idx.reshape({idx.numel()});
  Tensor hi = max(flat, 0).values, lo = neg(max(neg(flat), 0).values);
  // One host read of both bounds: a device sync on CUDA, so that a bad index is an error here and
  // never reaches a kernel.
  const std::vector<int64_t> range = stack({lo, hi}).to_vector<int64_t>();
  const int64_t low = wrap_negative ? -size : 0;
  MINIDL_CHECK(range[0] >= low && range[1] < size, op, ": index ", range[1] >= size ? range[1] : range[0],
               " is out of bounds for dimension ", dim, " with size ", size);
  if (wrap_negative && range[0] < 0) idx = where(lt(idx, Scalar(0)), idx + Scalar(size), idx);
  return idx;
}

void check_inplace_recordable(const char* op, const Tensor& x) {
  MINIDL_CHECK(!(grad_mode_enabled() && x.requires_grad() && x.is_leaf()), op,
               ": a leaf Variable that requires grad is being used in an in-place operation; do it under NoGradGuard "
               "(as torch.no_grad()), or use the out-of-place op");
}

void record_inplace(const char* op, Tensor& x, const std::vector<Tensor>& others, const std::vector<Tensor>& saved,
                    autograd::BackwardFn backward) {
  TensorImpl& impl = x.impl();
  // x's history up to the write, as an input of the new entry: a handle of its own that carries the
  // old tape id (the entry it names stays alive, since x, its output, does).
  Tensor before;
  if (impl.requires_grad) {
    auto alias = std::make_shared<TensorImpl>();
    alias->storage = impl.storage;
    alias->offset = impl.offset;
    alias->shape = impl.shape;
    alias->strides = impl.strides;
    alias->dtype = impl.dtype;
    alias->requires_grad = true;
    alias->node = impl.node;
    before = Tensor(std::move(alias));
  }
  std::vector<Tensor> inputs{before};
  inputs.insert(inputs.end(), others.begin(), others.end());
  const uint64_t node = impl.node;
  const bool requires_grad = impl.requires_grad;
  impl.node = 0;
  impl.requires_grad = false;
  try {
    autograd::record(op, x, inputs, saved, std::move(backward));
  } catch (...) {
    impl.node = node;
    impl.requires_grad = requires_grad;
    if (before.defined()) before.impl().node = 0;  // it never owned that entry
    throw;
  }
}

Tensor checked_scatter_geometry(const char* op, const Tensor& x, int64_t& dim, const Tensor& index, const Tensor* src) {
  MINIDL_CHECK(index.dtype() == kInt64, op, ": expected an int64 index, got ", index.dtype());
  MINIDL_CHECK(index.dim() == x.dim(), op, ": index must have as many dims as the input: index has shape ",
               index.shape(), ", input ", x.shape());
  if (src) MINIDL_CHECK(src->dim() == x.dim(), op, ": src must have as many dims as the input: src has shape ",
                        src->shape(), ", input ", x.shape());
  dim = wrap_dim(dim, x.dim(), op);
  for (int64_t d = 0; d < x.dim(); ++d) {
    MINIDL_CHECK(d == dim || index.size(d) <= x.size(d), op, ": index of shape ", index.shape(),
                 " is larger than the input of shape ", x.shape(), " in dimension ", d, " (only dim ", dim,
                 " may differ)");
    if (src) MINIDL_CHECK(index.size(d) <= src->size(d), op, ": index of shape ", index.shape(),
                          " is larger than src of shape ", src->shape(), " in dimension ", d);
  }
  return checked_index(index, x.size(dim), x.device(), op, dim, false);
}

}  // namespace detail

namespace {

Tensor as_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }


// The gradients of out = scatter(x, dim, index, src) (scatter_add when `add`) for x and src.
autograd::BackwardFn scatter_backward(int64_t dim, Tensor index, Shape src_shape, bool add) {
  return [dim, index, src_shape, add](const Tensor& g, const std::vector<bool>& needs) {
    Kernels& k = kernels_for(g.device());
    std::vector<Tensor> grads(needs.size());
    if (needs[0] && add) grads[0] = g;
    if (needs[0] && !add) {
      Tensor gx = Tensor::empty(g.shape(), g.dtype(), g.device());
      k.copy(g, gx);
      k.scatter(expand(zeros({}, g.dtype(), g.device()), index.shape()), dim, index, gx, false);
      grads[0] = gx;
    }
    if (needs.size() > 1 && needs[1]) {
      Tensor picked = Tensor::empty(index.shape(), g.dtype(), g.device());
      k.gather(g, dim, index, picked);
      if (picked.shape() == src_shape) {
        grads[1] = picked;
      } else {
        Tensor gs = zeros(src_shape, g.dtype(), g.device());
        Tensor window = Tensor::make_view(gs, index.shape(), gs.strides(), 0);
        k.copy(picked, window);
        grads[1] = gs;
      }
    }
    return grads;
  };
}

Tensor scatter_out_of_place(const char* op, const char* node, const Tensor& x_in, int64_t dim, const Tensor& index_in,
                            const Tensor& src_in, bool add, bool src_is_value) {
  check_same_device(op, {x_in, index_in, src_in});
  MINIDL_CHECK(src_in.dtype() == x_in.dtype(), op, ": expected src of the input's dtype ", x_in.dtype(), ", got ",
               src_in.dtype());
  const Tensor x = as_1d(x_in), index0 = as_1d(index_in);
  const Tensor src = src_is_value ? expand(src_in, index0.shape()) : as_1d(src_in);
  const Tensor index = detail::checked_scatter_geometry(op, x, dim, index0, &src);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Kernels& k = kernels_for(x.device());
  k.copy(x, out);
  k.scatter(src, dim, index, out, add);
  const bool src_grad = !src_is_value && autograd::needs_recording({src});
  if (autograd::needs_recording({x}) || src_grad) {
    std::vector<Tensor> inputs{x};
    if (!src_is_value) inputs.push_back(src);
    autograd::record(node, out, inputs, {index}, scatter_backward(dim, index, src.shape(), add));
  }
  return x_in.dim() == 0 ? out.reshape({}) : out;
}

Tensor& scatter_in_place(const char* op, Tensor& x_in, int64_t dim, const Tensor& index_in, const Tensor& src_in,
                         bool add, bool src_is_value) {
  check_same_device(op, {x_in, index_in, src_in});
  MINIDL_CHECK(src_in.dtype() == x_in.dtype(), op, ": expected src of the input's dtype ", x_in.dtype(), ", got ",
               src_in.dtype());
  detail::check_inplace_recordable(op, x_in);
  Tensor x = x_in.dim() == 0 ? Tensor::make_view(x_in, {1}, {1}, x_in.offset()) : x_in;
  const Tensor index0 = as_1d(index_in);
  const Tensor src = src_is_value ? expand(src_in, index0.shape()) : as_1d(src_in);
  const Tensor index = detail::checked_scatter_geometry(op, x, dim, index0, &src);
  kernels_for(x.device()).scatter(src, dim, index, x, add);
  x_in.bump_version();
  const bool src_grad = !src_is_value && autograd::needs_recording({src});
  if (autograd::needs_recording({x_in}) || src_grad) {
    std::vector<Tensor> others;
    if (!src_is_value) others.push_back(src);
    Shape src_shape = src.shape();
    autograd::BackwardFn inner = scatter_backward(dim, index, src_shape, add);
    const bool scalar = x_in.dim() == 0;
    // x_in's gradient arrives in x_in's shape; the backward works on the 1-d view for a 0-d x.
    detail::record_inplace(op, x_in, others, {index}, [inner, scalar](const Tensor& g, const std::vector<bool>& needs) {
      std::vector<Tensor> grads = inner(scalar ? g.reshape({1}) : g, needs);
      if (scalar && grads[0].defined()) grads[0] = grads[0].reshape({});
      return grads;
    });
  }
  return x_in;
}

Tensor value_tensor(const Scalar& value, const Tensor& x) { return scalar_tensor(value, x.dtype(), x.device()); }

}  // namespace

Tensor gather(const Tensor& x_in, int64_t dim, const Tensor& index_in, bool /*sparse_grad*/) {
  check_same_device("gather", {x_in, index_in});
  const Tensor x = as_1d(x_in), index0 = as_1d(index_in);
  const Tensor index = detail::checked_scatter_geometry("gather", x, dim, index0, nullptr);
  Tensor out = Tensor::empty(index.shape(), x.dtype(), x.device());
  kernels_for(x.device()).gather(x, dim, index, out);
  if (autograd::needs_recording({x})) {
    autograd::record("GatherBackward0", out, {x}, {index}, [dim, index, shape = x.shape()](const Tensor& g,
                                                                                           const std::vector<bool>&) {
      Tensor grad = zeros(shape, g.dtype(), g.device());
      kernels_for(g.device()).scatter(g, dim, index, grad, true);
      return std::vector<Tensor>{grad};
    });
  }
  return index_in.dim() == 0 ? out.reshape({}) : out;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_out_of_place("scatter", "ScatterBackward0", x, dim, index, src, false, false);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter_out_of_place("scatter", "ScatterBackward1", x, dim, index, value_tensor(value, x), false, true);
}

Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_in_place("scatter_", x, dim, index, src, false, false);
}

Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return scatter_in_place("scatter_", x, dim, index, value_tensor(value, x), false, true);
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_out_of_place("scatter_add", "ScatterAddBackward0", x, dim, index, src, true, false);
}

Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_in_place("scatter_add_", x, dim, index, src, true, false);
}

Tensor index_add(const Tensor& x_in, int64_t dim, const Tensor& index, const Tensor& source_in, const Scalar& alpha) {
  check_same_device("index_add", {x_in, index, source_in});
  MINIDL_CHECK(index.dim() <= 1, "index_add: expected a 1-D index, got shape ", index.shape());
  MINIDL_CHECK(is_floating(x_in.dtype()), "index_add: expected a floating input (float32 or float64), got ",
               x_in.dtype());
  MINIDL_CHECK(source_in.dtype() == x_in.dtype(), "index_add: expected source of the input's dtype ", x_in.dtype(),
               ", got ", source_in.dtype());
  const Tensor x = as_1d(x_in), source = as_1d(source_in);
  dim = wrap_dim(dim, x.dim(), "index_add");
  Shape expected = x.shape();
  expected[static_cast<size_t>(dim)] = index.numel();
  MINIDL_CHECK(source.shape() == expected, "index_add: expected source of shape ", expected, " (the input's ",
               x.shape(), " with the index's ", index.numel(), " elements at dim ", dim, "), got ", source.shape());
  const Tensor idx = detail::checked_index(index.reshape({index.numel()}), x.size(dim), x.device(), "index_add",
                                           dim, false);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  Kernels& k = kernels_for(x.device());
  k.copy(x, out);
  {
    NoGradGuard no_grad;
    const Tensor scaled = alpha.to_double() == 1.0 ? source.contiguous() : (source * alpha).contiguous();
    k.index_add(scaled, dim, idx, out);
  }
  if (autograd::needs_recording({x, source})) {
    autograd::record("IndexAddBackward0", out, {x, source}, {idx},
                     [dim, idx, alpha](const Tensor& g, const std::vector<bool>& needs) {
                       std::vector<Tensor> grads(2);
                       if (needs[0]) grads[0] = g;
                       if (needs[1]) {
                         NoGradGuard no_grad;
                         Tensor picked = index_select(g, dim, idx);
                         grads[1] = alpha.to_double() == 1.0 ? picked : picked * alpha;
                       }
                       return grads;
                     });
  }
  return x_in.dim() == 0 ? out.reshape({}) : out;
}

}  // namespace minidl
