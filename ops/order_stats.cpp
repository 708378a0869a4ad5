// median, nanmedian, kthvalue, mode: a stable ascending sort along `dim`, then one gather of values and
// indices at a position computed per row (NaN sorts last, so counting NaN per row finds both the
// lower median of what is left and the first NaN). quantile follows PyTorch's composite: ranks
// q * (n - 1) per row, rounded by the interpolation mode, then two gathers and a lerp. Shapes:
// reductions along `dim` give x's shape without it (size 1 with keepdim); quantile with a 1-D q of
// size Q puts Q first.
#include "ops/order_stats.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/logical.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/slice.h"
#include "ops/sort.h"
#include "ops/view.h"

namespace minidl {

namespace {

enum class Pick { kMedian, kNanMedian, kKth };

// The element at a per-row position of the stable ascending sort along `dim`: median's lower
// median (or first NaN), nanmedian's lower median of the non-NaN values, kthvalue's k-th.
std::tuple<Tensor, Tensor> pick_sorted(const Tensor& x, int64_t dim, bool keepdim, Pick pick, int64_t k,
                                       const char* op) {
  if (x.dim() == 0) {
    wrap_dim(dim, 1, op);
    auto [v, i] = pick_sorted(reshape(x, {1}), 0, false, pick, k, op);
    return {reshape(v, {}), reshape(i, {})};
  }
  dim = wrap_dim(dim, x.dim(), op);
  const int64_t n = x.size(dim);
  MINIDL_CHECK(n > 0, op, ": expected a non-empty dimension to reduce, got dimension ", dim, " of size 0 (shape ",
               x.shape(), ")");
  if (pick == Pick::kKth)
    MINIDL_CHECK(k >= 1 && k <= n, op, ": k (", k, ") is out of range for dimension ", dim, " of size ", n,
                 " (shape ", x.shape(), "); expected 1 <= k <= ", n);
  auto [sorted, order] = sort(x, dim);
  Shape kept = x.shape();
  kept[static_cast<size_t>(dim)] = 1;
  Tensor position;
  {
    NoGradGuard no_grad;
    const int64_t fixed = pick == Pick::kKth ? k - 1 : (n - 1) / 2;
    position = full(kept, fixed, kInt64, x.device());
    if (pick != Pick::kKth && x.is_floating_point()) {
      const Tensor nan_count = sum(isnan(x), {dim}, true);  // int64
      if (pick == Pick::kMedian) {
        // NaN sorts last: the first NaN of a row sits at n - nan_count.
        position = where(gt(nan_count, 0), sub(full(kept, n, kInt64, x.device()), nan_count), position);
      } else {
        // The lower median of the m = n - nan_count values before the NaNs; 0 (a NaN) when m == 0.
        const Tensor m = sub(full(kept, n, kInt64, x.device()), nan_count);
        position = floor_divide(clamp(m - 1, 0), full(kept, 2, kInt64, x.device()));
      }
    }
  }
  Tensor values = gather(sorted, dim, position), indices = gather(order, dim, position);
  if (!keepdim) {
    values = squeeze(values, dim);
    indices = squeeze(indices, dim);
  }
  return {values, indices};
}

Tensor pick_all(const Tensor& x, Pick pick, const char* op) {
  if (x.numel() == 0) {
    MINIDL_CHECK(x.is_floating_point(), op, ": expected a non-empty tensor or a floating one (whose empty median is "
                 "NaN), got an empty ", x.dtype(), " tensor of shape ", x.shape());
    return full({}, std::numeric_limits<double>::quiet_NaN(), x.dtype(), x.device());
  }
  return std::get<0>(pick_sorted(reshape(x, {x.numel()}), 0, false, pick, 0, op));
}

// mode's index along the last dim of `rows`, keepdim: in the stable sort, equal values form runs
// (NaN != NaN, so each NaN is a run of one); the first of the longest runs holds the smallest
// most frequent value, and its last element the value's last position in the row.
Tensor mode_index(const Tensor& rows) {
  const int64_t n = rows.size(-1);
  auto [sorted, order] = sort(rows.dtype() == kBool ? rows.to(kUInt8) : rows, -1);
  Shape one = rows.shape();
  one.back() = 1;
  const Tensor starts = cat({ones(one, kBool, rows.device()),
                             ne(narrow(sorted, -1, 1, n - 1), narrow(sorted, -1, 0, n - 1))}, -1);
  const Tensor run = cumsum(starts, -1) - 1;  // int64: each position's run
  const Tensor run_length = gather(scatter_add(zeros_like(run), -1, run, ones_like(run)), -1, run);
  const Tensor first = argmax(run_length, -1, /*keepdim=*/true);
  return gather(order, -1, first + gather(run_length, -1, first) - 1);
}

void check_interpolation(const std::string& interpolation, const char* op) {
  MINIDL_CHECK(interpolation == "linear" || interpolation == "lower" || interpolation == "higher" ||
                   interpolation == "nearest" || interpolation == "midpoint",
               op, ": expected interpolation \"linear\", \"lower\", \"higher\", \"nearest\" or \"midpoint\", got \"",
               interpolation, "\"");
}

void check_quantile_input(const Tensor& x, const char* op) {
  MINIDL_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64, op, ": expected a float32 or float64 input, got ",
               x.dtype());
  MINIDL_CHECK(x.numel() > 0, op, ": expected a non-empty input, got shape ", x.shape());
}

// q: 0-d or 1-D, x's dtype and device, values checked. Returns [Q] + out shape, or out shape for 0-d q.
Tensor quantile_impl(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                     const std::string& interpolation, bool ignore_nan, const char* op) {
  Shape out_shape;
  Tensor rows;  // [R, n]: one row per result
  if (!dim) {
    if (keepdim) out_shape.assign(static_cast<size_t>(x.dim()), 1);
    rows = reshape(x, {1, x.numel()});
  } else if (x.dim() == 0) {
    wrap_dim(*dim, 1, op);
    rows = reshape(x, {1, 1});
  } else {
    const int64_t d = wrap_dim(*dim, x.dim(), op);
    out_shape = x.shape();
    if (keepdim)
      out_shape[static_cast<size_t>(d)] = 1;
    else
      out_shape.erase(out_shape.begin() + d);
    const int64_t n = x.size(d);
    rows = reshape(movedim(x, d, -1), {x.numel() / n, n});
  }
  const int64_t r = rows.size(0), n = rows.size(1), count = q.numel();
  const Tensor sorted = std::get<0>(sort(rows, 1));
  Tensor below, above, weights;
  const bool interpolate = interpolation == "linear" || interpolation == "midpoint";
  {
    NoGradGuard no_grad;
    const Tensor qs = reshape(q.detach(), {1, count});
    Tensor ranks;
    if (ignore_nan) {
      // Ranks among the non-NaN values; a row of NaN only gets rank 0 (a NaN).
      const Tensor valid = sum(logical_not(isnan(sorted)), {1}, true).to(x.dtype());
      ranks = mul(qs, valid - 1.0);
      ranks = masked_fill(ranks, lt(ranks, 0.0), 0.0);
    } else {
      // A row holding NaN (sorted last) gets the last rank: a NaN.
      const Tensor has_nan = isnan(narrow(sorted, 1, n - 1, 1));
      ranks = where(has_nan, Scalar(static_cast<double>(n - 1)), expand(qs * static_cast<double>(n - 1), {r, count}));
    }
    if (interpolation == "lower") ranks = floor(ranks);
    if (interpolation == "higher") ranks = ceil(ranks);
    if (interpolation == "nearest") ranks = round(ranks);
    below = ranks.to(kInt64);
    if (interpolate) {
      above = ceil(ranks).to(kInt64);
      weights = interpolation == "midpoint" ? full_like(ranks, 0.5) : ranks - floor(ranks);
    }
  }
  Tensor result = gather(sorted, 1, below);
  if (interpolate) {
    // PyTorch's lerp: from the nearer end, so that weight 1 gives `high` exactly.
    const Tensor high = gather(sorted, 1, above), step = high - result;
    result = where(lt(weights, 0.5), result + weights * step, high - step * (1.0 - weights));
  }
  if (q.dim() == 0) return reshape(result, out_shape);
  Shape with_q = out_shape;
  with_q.insert(with_q.begin(), count);
  return reshape(transpose(result, 0, 1), with_q);
}

Tensor quantile_tensor(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                       const std::string& interpolation, bool ignore_nan, const char* op) {
  check_quantile_input(x, op);
  check_interpolation(interpolation, op);
  MINIDL_CHECK(q.dim() <= 1, op, ": expected q to be a scalar or a 0-d or 1-D tensor, got shape ", q.shape());
  MINIDL_CHECK(q.dtype() == x.dtype(), op, ": expected q to have the input's dtype ", x.dtype(), ", got ", q.dtype());
  MINIDL_CHECK(q.device() == x.device(), op, ": expected q on the input's device ", x.device(), ", got ", q.device());
  if (q.numel() > 0) {
    NoGradGuard no_grad;
    // The range check reads q's extremes on the host (a device sync on CUDA), as PyTorch's CPU check.
    auto [lo, hi] = aminmax(q.detach());
    const double qmin = lo.to(kFloat64).item<double>(), qmax = hi.to(kFloat64).item<double>();
    MINIDL_CHECK(qmin >= 0 && qmax <= 1, op, ": expected q values in [0, 1], got values in [", qmin, ", ", qmax, "]");
  }
  return quantile_impl(x, q, dim, keepdim, interpolation, ignore_nan, op);
}

Tensor quantile_double(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                       const std::string& interpolation, bool ignore_nan, const char* op) {
  check_quantile_input(x, op);
  check_interpolation(interpolation, op);
  MINIDL_CHECK(q >= 0 && q <= 1, op, ": expected q in [0, 1], got ", q);
  return quantile_impl(x, full({}, q, x.dtype(), x.device()), dim, keepdim, interpolation, ignore_nan, op);
}

}  // namespace

std::tuple<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  MINIDL_CHECK(x.defined(), "mode: expected a defined tensor");
  if (x.dim() == 0) {
    wrap_dim(dim, 1, "mode");
    return {x.clone(), zeros({}, kInt64, x.device())};
  }
  dim = wrap_dim(dim, x.dim(), "mode");
  MINIDL_CHECK(x.size(dim) > 0, "mode: expected a non-empty dimension to reduce, got dimension ", dim,
               " of size 0 (shape ", x.shape(), ")");
  Tensor index;
  {
    NoGradGuard no_grad;
    index = movedim(mode_index(movedim(x, dim, -1)), -1, dim);
  }
  Tensor values = gather(x, dim, index);  // so that the gradient reaches the element picked
  if (!keepdim) return {squeeze(values, dim), squeeze(index, dim)};
  return {values, index};
}

Tensor median(const Tensor& x) { return pick_all(x, Pick::kMedian, "median"); }

std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  return pick_sorted(x, dim, keepdim, Pick::kMedian, 0, "median");
}

Tensor nanmedian(const Tensor& x) { return pick_all(x, Pick::kNanMedian, "nanmedian"); }

std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  return pick_sorted(x, dim, keepdim, Pick::kNanMedian, 0, "nanmedian");
}

std::tuple<Tensor, Tensor> kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  return pick_sorted(x, dim, keepdim, Pick::kKth, k, "kthvalue");
}

Tensor quantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim, const std::string& interpolation) {
  return quantile_double(x, q, dim, keepdim, interpolation, false, "quantile");
}

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  return quantile_tensor(x, q, dim, keepdim, interpolation, false, "quantile");
}

Tensor nanquantile(const Tensor& x, double q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return quantile_double(x, q, dim, keepdim, interpolation, true, "nanquantile");
}

Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return quantile_tensor(x, q, dim, keepdim, interpolation, true, "nanquantile");
}

}  // namespace minidl
