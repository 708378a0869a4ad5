// searchsorted as counting: for a sequence sorted ascending, the left insertion point of v is the
// number of elements s < v, the right one the number with s <= v; a NaN v goes past every element
// (where PyTorch's binary search sends it). NaN boundaries (sorted last) compare false, so they count
// as larger than every value, as NumPy's; PyTorch's answer there depends on its probes. Shapes: the
// sequence is seen as [B, N] and the values as [B, M] (B = 1 for a 1-D sequence), compared as
// [B, chunk, N] and summed over N. bincount and histc are a scatter_add of ones (or weights).
#include "ops/search.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/logical.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace {

constexpr int64_t kComparisonsPerChunk = int64_t{1} << 24;

bool resolve_right(bool right, const std::optional<std::string>& side, const char* op) {
  if (!side) return right;
  MINIDL_CHECK(*side == "left" || *side == "right", op, ": expected side \"left\" or \"right\", got \"", *side, "\"");
  MINIDL_CHECK(!(right && *side == "left"), op, ": side \"left\" contradicts right=true; pass one of them");
  return *side == "right";
}

}  // namespace

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32, bool right,
                    const std::optional<std::string>& side, const std::optional<Tensor>& sorter) {
  const char* op = "searchsorted";
  right = resolve_right(right, side, op);
  const Tensor& seq_in = sorted_sequence;
  MINIDL_CHECK(seq_in.dim() >= 1, op, ": expected sorted_sequence with at least 1 dimension, got a 0-d tensor");
  MINIDL_CHECK(seq_in.device() == values.device(), op, ": expected sorted_sequence and values on one device, got ",
               seq_in.device(), " and ", values.device());
  if (seq_in.dim() > 1) {
    bool leading_match = values.dim() == seq_in.dim();
    for (int64_t d = 0; leading_match && d + 1 < seq_in.dim(); ++d) leading_match = values.size(d) == seq_in.size(d);
    MINIDL_CHECK(leading_match, op, ": expected a 1-D sorted_sequence, or values whose leading dimensions match "
                 "those of sorted_sequence (all but the last), got sorted_sequence of shape ", seq_in.shape(),
                 " and values of shape ", values.shape());
  }
  NoGradGuard no_grad;
  Tensor seq = seq_in.detach();
  if (sorter) {
    MINIDL_CHECK(sorter->dtype() == kInt64, op, ": expected an int64 sorter, got ", sorter->dtype());
    MINIDL_CHECK(sorter->shape() == seq.shape(), op, ": expected sorter of sorted_sequence's shape ", seq.shape(),
                 ", got ", sorter->shape());
    seq = gather(seq, -1, *sorter);
  }
  const int64_t n = seq.size(-1);
  const int64_t batch = shape_numel(Shape(seq.shape().begin(), seq.shape().end() - 1));
  const int64_t m = seq.dim() == 1 ? values.numel() : values.size(-1);
  const Tensor s = reshape(seq, {batch, 1, n});
  const Tensor v = reshape(values.detach(), {batch, m});
  const int64_t chunk = std::max<int64_t>(1, kComparisonsPerChunk / std::max<int64_t>(1, batch * n));
  std::vector<Tensor> parts;
  for (int64_t start = 0; start < m || (m == 0 && parts.empty()); start += chunk) {
    const int64_t len = std::min(chunk, m - start);
    const Tensor vc = reshape(narrow(v, 1, start, len), {batch, len, 1});
    // left: s < v; right: s <= v; a NaN value goes past everything.
    const Tensor before = logical_or(right ? le(s, vc) : lt(s, vc), isnan(vc));
    parts.push_back(sum(before, {2}));
    if (m == 0) break;
  }
  Tensor counts = parts.size() == 1 ? parts[0] : cat(parts, 1);
  counts = reshape(counts, values.shape());
  if (counts.dtype() != kInt64) counts = counts.to(kInt64);
  return out_int32 ? counts.to(kInt32) : counts;
}

Tensor searchsorted(const Tensor& sorted_sequence, const Scalar& value, bool out_int32, bool right,
                    const std::optional<std::string>& side, const std::optional<Tensor>& sorter) {
  MINIDL_CHECK(sorted_sequence.dim() == 1, "searchsorted: a scalar value needs a 1-D sorted_sequence, got shape ",
               sorted_sequence.shape());
  return searchsorted(sorted_sequence, scalar_tensor(value, sorted_sequence.device()), out_int32, right, side, sorter);
}

Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool out_int32, bool right) {
  MINIDL_CHECK(boundaries.dim() == 1, "bucketize: expected 1-D boundaries, got shape ", boundaries.shape());
  return searchsorted(boundaries, x, out_int32, right);
}

Tensor bucketize(const Scalar& x, const Tensor& boundaries, bool out_int32, bool right) {
  MINIDL_CHECK(boundaries.dim() == 1, "bucketize: expected 1-D boundaries, got shape ", boundaries.shape());
  return searchsorted(boundaries, x, out_int32, right);
}

Tensor bincount(const Tensor& x, const std::optional<Tensor>& weights, int64_t minlength) {
  const char* op = "bincount";
  MINIDL_CHECK(x.dim() == 1 && is_integral(x.dtype()) && x.dtype() != kBool, op,
               ": expected a 1-D tensor of non-negative integers, got a ", x.dtype(), " tensor of shape ", x.shape());
  MINIDL_CHECK(minlength >= 0, op, ": expected minlength >= 0, got ", minlength);
  const bool weighted = weights.has_value() && weights->defined();
  DType dtype = kInt64;
  if (weighted) {
    MINIDL_CHECK(weights->dim() == 1 && weights->numel() == x.numel(), op,
                 ": expected 1-D weights of the input's length ", x.numel(), ", got shape ", weights->shape());
    MINIDL_CHECK(weights->device() == x.device(), op, ": expected weights on the input's device ", x.device(),
                 ", got ", weights->device());
    dtype = weights->dtype() == kFloat32 ? kFloat32 : kFloat64;
  }
  NoGradGuard no_grad;
  int64_t size = minlength;
  if (x.numel() > 0) {
    // The number of bins depends on the data: its extremes are read on the host (a device sync).
    auto [lo, hi] = aminmax(x);
    const int64_t low = lo.to(kInt64).item<int64_t>(), high = hi.to(kInt64).item<int64_t>();
    MINIDL_CHECK(low >= 0, op, ": expected non-negative values, got a minimum of ", low);
    size = std::max(size, high + 1);
  }
  Tensor out = zeros({size}, dtype, x.device());
  if (x.numel() == 0) return out;
  const Tensor index = x.to(kInt64);
  const Tensor src = weighted ? weights->detach().to(dtype) : ones({x.numel()}, kInt64, x.device());
  return scatter_add(out, 0, index, src);
}

Tensor histc(const Tensor& x, int64_t bins, const Scalar& min, const Scalar& max) {
  const char* op = "histc";
  MINIDL_CHECK(x.is_floating_point(), op, ": expected a floating-point input, got ", x.dtype());
  MINIDL_CHECK(bins > 0, op, ": expected bins > 0, got ", bins);
  double lo = min.to_double(), hi = max.to_double();
  MINIDL_CHECK(!(lo > hi), op, ": expected min <= max, got min ", lo, " and max ", hi);
  NoGradGuard no_grad;
  if (lo == hi && x.numel() > 0) {
    // The range comes from the data: read on the host (a device sync), as PyTorch's.
    auto [a, b] = aminmax(x.detach());
    lo = a.to(kFloat64).item<double>();
    hi = b.to(kFloat64).item<double>();
  }
  MINIDL_CHECK(std::isfinite(lo) && std::isfinite(hi), op, ": expected a finite range, got [", lo, ", ", hi, "]");
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  Tensor out = zeros({bins}, x.dtype(), x.device());
  if (x.numel() == 0) return out;
  const Tensor flat = reshape(x.detach(), {x.numel()});
  const Tensor inside = logical_and(ge(flat, lo), le(flat, hi));  // false for NaN
  // The bin as PyTorch computes it, (x - min) * bins / (max - min) truncated; max goes in the last bin.
  Tensor position = where(inside, div(mul(flat - lo, scalar_like(static_cast<double>(bins), flat)),
                                      scalar_like(hi - lo, flat)), Scalar(0.0));
  const Tensor index = clamp(floor(position).to(kInt64), 0, bins - 1);
  return scatter_add(out, 0, index, inside.to(x.dtype()));
}

}  // namespace minidl
