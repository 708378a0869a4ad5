// Indexing in three steps. (1) Basic indices become views with the differentiable view ops
// (narrow + squeeze, slice, unsqueeze); a bool mask becomes one index tensor per dim it covers (the
// columns of nonzero). (2) The advanced index tensors are checked, wrapped and broadcast to one
// shape B, and the view is permuted so that their dims [A1..Ak] come first: P = [A1..Ak, R...].
// (3) The k dims of P become one dim of stride 1 whose index is each position's offset
// sum_j i_j * stride_j: a view of P's memory [extent, R...]. Gathering along that dim (the gather
// kernel, any strides) reads P[i_1..i_k, r] for every (b, r) with no copy of x, and scattering into
// the same kind of view of a gradient or of x writes them back; the result [B, R...] is then
// permuted where the advanced dims were adjacent, to stand at their place.
#include "ops/indexing.h"

#include <algorithm>

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/select.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

using indexing::TensorIndex;

namespace {

bool is_mask(const Tensor& t) { return t.dtype() == kBool || t.dtype() == kUInt8; }

// x after its basic indices, and the advanced index tensors with the dims of `view` they index.
struct Plan {
  Tensor view;
  std::vector<int64_t> dims;         // increasing
  std::vector<int64_t> source_dims;  // x's dim for each, for errors
  std::vector<Tensor> raw;           // as given (integers of any width) or mask columns
};

Plan apply_basic(const Tensor& x, const std::vector<TensorIndex>& indices, const char* op) {
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& i : indices) {
    if (i.is_integer() || i.is_slice()) ++consumed;
    if (i.is_ellipsis()) ++ellipses;
    if (i.is_tensor()) {
      MINIDL_CHECK(i.tensor().defined(), op, ": an index tensor is undefined");
      consumed += is_mask(i.tensor()) ? i.tensor().dim() : 1;
    }
  }
  MINIDL_CHECK(ellipses <= 1, op, ": an index can only have a single ellipsis (...)");
  MINIDL_CHECK(consumed <= x.dim(), op, ": too many indices for a tensor of dimension ", x.dim(), " (", consumed,
               " dims indexed)");
  Plan p;
  p.view = x;
  int64_t d = 0, xd = 0;  // the next dim of the view, and of x
  auto add_advanced = [&](int64_t dim, int64_t source_dim, Tensor t) {
    p.dims.push_back(dim);
    p.source_dims.push_back(source_dim);
    p.raw.push_back(std::move(t));
  };
  for (size_t n = 0; n < indices.size(); ++n) {
    const TensorIndex& i = indices[n];
    switch (i.kind()) {
      case TensorIndex::Kind::None:
        p.view = unsqueeze(p.view, d++);
        break;
      case TensorIndex::Kind::Ellipsis:
        d += x.dim() - consumed;
        xd += x.dim() - consumed;
        break;
      case TensorIndex::Kind::Integer: {
        const int64_t size = p.view.size(d);
        int64_t v = i.integer();
        MINIDL_CHECK(v >= -size && v < size, op, ": index ", v, " is out of bounds for dimension ", xd, " with size ",
                     size);
        if (v < 0) v += size;
        p.view = squeeze(narrow(p.view, d, v, 1), d);
        ++xd;
        break;
      }
      case TensorIndex::Kind::Slice: {
        const indexing::Slice& s = i.slice();
        MINIDL_CHECK(s.step() > 0, op, ": slice step must be positive, got ", s.step());
        p.view = slice(p.view, d++, s.start(), s.stop(), s.step());
        ++xd;
        break;
      }
      case TensorIndex::Kind::Boolean:
        // A new dim of size 1, indexed by [0] (true) or by nothing (false), as PyTorch does.
        p.view = unsqueeze(p.view, d);
        add_advanced(d++, xd, i.boolean() ? zeros({1}, kInt64, x.device()) : Tensor::empty({0}, kInt64, x.device()));
        break;
      case TensorIndex::Kind::Tensor: {
        const Tensor& t = i.tensor();
        if (!is_mask(t)) {
          MINIDL_CHECK(is_integral(t.dtype()), op,
                       ": tensors used as indices must be long, int, byte or bool tensors, got ", t.dtype());
          add_advanced(d++, xd++, t);
          break;
        }
        if (t.dim() == 0) {  // a 0-d mask acts as a bool
          p.view = unsqueeze(p.view, d);
          add_advanced(d++, xd, narrow(nonzero(t.reshape({1}).to(x.device())), 1, 0, 1).reshape({-1}));
          break;
        }
        const Shape covered(p.view.shape().begin() + d, p.view.shape().begin() + d + t.dim());
        MINIDL_CHECK(covered == t.shape(), op, ": the shape of the mask ", t.shape(), " at index ", n,
                     " does not match the shape of the indexed tensor ", covered, " at dims ", xd, "..",
                     xd + t.dim() - 1);
        const Tensor positions = nonzero(t.to(x.device()));  // [count, mask dims]
        for (int64_t j = 0; j < t.dim(); ++j)
          add_advanced(d + j, xd + j, narrow(positions, 1, j, 1).reshape({positions.size(0)}));
        d += t.dim();
        xd += t.dim();
        break;
      }
    }
  }
  return p;
}

// The advanced indices checked, wrapped, broadcast to `shape`, and the view permuted so that their
// dims come first; `front` says whether the result's dims go first or at the first advanced dim.
struct Resolved {
  std::vector<Tensor> index;
  Shape shape;
  Tensor permuted;  // P = [A1..Ak, R...]
  size_t k = 0;
  int64_t place = 0;  // where B's dims go in the result
};

Resolved resolve(const Plan& p, const char* op) {
  Resolved r;
  r.k = p.dims.size();
  {
    NoGradGuard no_grad;
    for (size_t j = 0; j < r.k; ++j) {
      r.index.push_back(detail::checked_index(p.raw[j], p.view.size(p.dims[j]), p.view.device(), op,
                                              p.source_dims[j], true));
      r.shape = j == 0 ? r.index[j].shape() : broadcast_shapes(r.shape, r.index[j].shape(), op);
    }
    for (Tensor& t : r.index) t = expand(t, r.shape);
  }
  bool adjacent = true;
  for (size_t j = 1; j < r.k; ++j) adjacent = adjacent && p.dims[j] == p.dims[j - 1] + 1;
  r.place = r.k > 0 && adjacent ? p.dims[0] : 0;
  std::vector<int64_t> order(p.dims.begin(), p.dims.end());
  for (int64_t d = 0; d < p.view.dim(); ++d)
    if (std::find(p.dims.begin(), p.dims.end(), d) == p.dims.end()) order.push_back(d);
  bool identity = true;
  for (size_t j = 0; j < order.size(); ++j) identity = identity && order[j] == static_cast<int64_t>(j);
  r.permuted = identity ? p.view : permute(p.view, order);
  return r;
}

Shape rest_shape(const Tensor& t, size_t k) { return Shape(t.shape().begin() + static_cast<int64_t>(k), t.shape().end()); }

// [K] + R: the gathered rows.
Shape rows_shape(const Shape& b, const Shape& rest) {
  Shape s{shape_numel(b)};
  s.insert(s.end(), rest.begin(), rest.end());
  return s;
}

// The offset of each broadcast position within t's first k dims, as an index of rows_view(t, k)
// expanded over the other dims: int64 [K] + R.
Tensor row_index(const std::vector<Tensor>& index, const Shape& b, const Tensor& t, size_t k) {
  NoGradGuard no_grad;
  Tensor offsets = zeros(b, kInt64, t.device());
  for (size_t j = 0; j < k; ++j) offsets = offsets + index[j] * Scalar(t.strides()[j]);
  const Shape rest = rest_shape(t, k);
  Shape column{shape_numel(b)};
  column.resize(rest.size() + 1, 1);
  return expand(offsets.reshape(column), rows_shape(b, rest));
}

// t's first k dims as one dim of stride 1 that covers them: [extent] + R, on t's memory.
Tensor rows_view(const Tensor& t, size_t k) {
  int64_t extent = 1;
  for (size_t j = 0; j < k; ++j) extent += (t.shape()[j] - 1) * t.strides()[j];
  Shape shape{extent};
  Strides strides{1};
  shape.insert(shape.end(), t.shape().begin() + static_cast<int64_t>(k), t.shape().end());
  strides.insert(strides.end(), t.strides().begin() + static_cast<int64_t>(k), t.strides().end());
  return Tensor::make_view(t, shape, strides, t.offset());
}

// The permutation that puts B's dims (the first nb of [B, R...]) at `place`, and its inverse.
std::vector<int64_t> placement(size_t nb, size_t total, int64_t place, bool inverse) {
  std::vector<int64_t> perm;
  const auto p = static_cast<size_t>(place);
  for (size_t j = 0; j < p; ++j) perm.push_back(static_cast<int64_t>(nb + j));
  for (size_t j = 0; j < nb; ++j) perm.push_back(static_cast<int64_t>(j));
  for (size_t j = nb + p; j < total; ++j) perm.push_back(static_cast<int64_t>(j));
  if (!inverse) return perm;
  std::vector<int64_t> inv(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) inv[static_cast<size_t>(perm[j])] = static_cast<int64_t>(j);
  return inv;
}

Tensor& put(Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& value_in, bool accumulate,
            const char* op) {
  MINIDL_CHECK(value_in.dtype() == x.dtype(), op, ": expected a value of the destination's dtype ", x.dtype(),
               ", got ", value_in.dtype());
  MINIDL_CHECK(value_in.device() == x.device() || value_in.dim() == 0, op, ": the value is on ", value_in.device(),
               ", the destination on ", x.device());
  detail::check_inplace_recordable(op, x);
  const Tensor value = value_in.to(x.device());
  {
    NoGradGuard no_grad;
    const Plan p = apply_basic(x, indices, op);
    const Resolved r = resolve(p, op);
    const Shape rest = rest_shape(r.permuted, r.k);
    Shape result = r.shape;
    result.insert(result.end(), rest.begin(), rest.end());
    const std::vector<int64_t> perm = placement(r.shape.size(), result.size(), r.place, false);
    Shape target;
    for (int64_t d : perm) target.push_back(result[static_cast<size_t>(d)]);
    MINIDL_CHECK(broadcasts_to(value.shape(), target), op, ": shape mismatch: a value of shape ",
                 value.shape(), " cannot be broadcast to the indexing result of shape ", target);
    const Shape rows = rows_shape(r.shape, rest);
    if (shape_numel(rows) > 0) {
      Tensor source = permute(expand(value, target), placement(r.shape.size(), result.size(), r.place, true));
      source = source.reshape(rows);
      Tensor dst = rows_view(r.permuted, r.k);
      kernels_for(x.device()).scatter(source, 0, row_index(r.index, r.shape, r.permuted, r.k), dst, accumulate);
    }
  }
  x.bump_version();
  if (autograd::needs_recording({x, value})) {
    std::vector<Tensor> saved;
    for (const TensorIndex& i : indices)
      if (i.is_tensor()) saved.push_back(i.tensor());
    detail::record_inplace("IndexPutBackward0", x, {value}, saved,
                           [indices, accumulate, value_shape = value.shape()](const Tensor& g,
                                                                              const std::vector<bool>& needs) {
                             NoGradGuard no_grad;
                             std::vector<Tensor> grads(2);
                             if (needs[0] && accumulate) grads[0] = g;
                             if (needs[0] && !accumulate) {
                               Tensor gx = Tensor::empty(g.shape(), g.dtype(), g.device());
                               kernels_for(g.device()).copy(g, gx);
                               put(gx, indices, zeros({}, g.dtype(), g.device()), false, "index_put_");
                               grads[0] = gx;
                             }
                             if (needs[1]) grads[1] = sum_to_shape(index(g, indices), value_shape);
                             return grads;
                           });
  }
  return x;
}

std::vector<TensorIndex> from_optional(const std::vector<std::optional<Tensor>>& indices) {
  std::vector<TensorIndex> out;
  for (const std::optional<Tensor>& t : indices) {
    if (t) out.emplace_back(*t);
    else out.emplace_back(indexing::Slice());
  }
  return out;
}

}  // namespace

Tensor index(const Tensor& x, const std::vector<TensorIndex>& indices) {
  const Plan p = apply_basic(x, indices, "index");
  if (p.dims.empty()) return p.view;
  const Resolved r = resolve(p, "index");
  const Tensor& permuted = r.permuted;
  const Shape rest = rest_shape(permuted, r.k);
  Shape result = r.shape;
  result.insert(result.end(), rest.begin(), rest.end());
  Tensor out = Tensor::empty(result, x.dtype(), x.device());
  const Shape rows = rows_shape(r.shape, rest);
  if (out.numel() > 0) {
    Tensor out_rows = Tensor::make_view(out, rows, contiguous_strides(rows), 0);
    kernels_for(x.device()).gather(rows_view(permuted, r.k), 0, row_index(r.index, r.shape, permuted, r.k), out_rows);
  }
  if (autograd::needs_recording({permuted})) {
    autograd::record("IndexBackward0", out, {permuted}, r.index,
                     [idx = r.index, b = r.shape, k = r.k, shape = permuted.shape(), rows](
                         const Tensor& g, const std::vector<bool>&) {
                       NoGradGuard no_grad;
                       Tensor grad = zeros(shape, g.dtype(), g.device());
                       if (g.numel() > 0) {
                         Tensor dst = rows_view(grad, k);
                         kernels_for(g.device()).scatter(g.reshape(rows), 0, row_index(idx, b, grad, k), dst, true);
                       }
                       return std::vector<Tensor>{grad};
                     });
  }
  if (r.place == 0) return out;
  return permute(out, placement(r.shape.size(), result.size(), r.place, false));
}

Tensor index(const Tensor& x, std::initializer_list<TensorIndex> indices) {
  return index(x, std::vector<TensorIndex>(indices));
}

Tensor& index_put_(Tensor& x, const std::vector<TensorIndex>& indices, const Tensor& value) {
  return put(x, indices, value, false, "index_put_");
}
Tensor& index_put_(Tensor& x, std::initializer_list<TensorIndex> indices, const Tensor& value) {
  return put(x, std::vector<TensorIndex>(indices), value, false, "index_put_");
}
Tensor& index_put_(Tensor& x, const std::vector<TensorIndex>& indices, const Scalar& value) {
  return put(x, indices, scalar_tensor(value, x.dtype(), x.device()), false, "index_put_");
}
Tensor& index_put_(Tensor& x, std::initializer_list<TensorIndex> indices, const Scalar& value) {
  return put(x, std::vector<TensorIndex>(indices), scalar_tensor(value, x.dtype(), x.device()), false, "index_put_");
}
Tensor& index_put_(Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                   bool accumulate) {
  return put(x, from_optional(indices), values, accumulate, "index_put_");
}

Tensor index_put(const Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                 bool accumulate) {
  Tensor out = x.clone();
  return put(out, from_optional(indices), values, accumulate, "index_put");
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_same_device("masked_select", {x, mask});
  MINIDL_CHECK(mask.dtype() == kBool, "masked_select: expected a bool mask, got ", mask.dtype());
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  return index(expand(x, shape), {expand(mask, shape)});
}

Tensor nonzero(const Tensor& x) {
  Tensor c;
  {
    NoGradGuard no_grad;
    c = x.contiguous();
  }
  return kernels_for(x.device()).nonzero(c);
}

Tensor argwhere(const Tensor& x) { return nonzero(x); }

std::vector<Tensor> where(const Tensor& condition) {
  MINIDL_CHECK(condition.defined(), "where: expected a defined condition");
  return unbind(nonzero(condition.dim() == 0 ? condition.reshape({1}) : condition), 1);
}

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const { return minidl::index(*this, indices); }
Tensor Tensor::index(const std::vector<TensorIndex>& indices) const { return minidl::index(*this, indices); }
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& value) const {
  return minidl::index_put_(const_cast<Tensor&>(*this), indices, value);
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& value) const {
  return minidl::index_put_(const_cast<Tensor&>(*this), indices, value);
}
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Scalar& value) const {
  return minidl::index_put_(const_cast<Tensor&>(*this), indices, value);
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Scalar& value) const {
  return minidl::index_put_(const_cast<Tensor&>(*this), indices, value);
}
Tensor Tensor::index_put(const std::vector<std::optional<Tensor>>& indices, const Tensor& values, bool accumulate) const {
  return minidl::index_put(*this, indices, values, accumulate);
}

}  // namespace minidl
