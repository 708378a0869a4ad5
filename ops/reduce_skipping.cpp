// Reductions that skip elements (declared in ops/reduce.h): NaN in nansum and nanmean, zeros in
// count_nonzero. Each is sum or mean over a masked tensor, so its gradient is theirs: 0 where NaN.
#include "core/type_promotion.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/logical.h"
#include "ops/math.h"
#include "ops/reduce.h"

namespace minidl {

Tensor nansum(const Tensor& x, IntArrayRef dims, bool keepdim) {
  if (!is_floating(x.dtype())) return sum(x, dims, keepdim);
  return sum(where(isnan(x), zeros_like(x), x), dims, keepdim);
}

Tensor nanmean(const Tensor& x, IntArrayRef dims, bool keepdim) {
  MINIDL_CHECK(is_floating(x.dtype()), "nanmean: expected a floating tensor, got ", x.dtype());
  if (is_reduced_floating(x.dtype())) return nanmean(x.to(kFloat32), dims, keepdim).to(x.dtype());
  const Tensor kept = logical_not(isnan(x));
  return nansum(x, dims, keepdim) / sum(kept, dims, keepdim).to(x.dtype());
}

Tensor count_nonzero(const Tensor& x, IntArrayRef dims) {
  return sum(ne(x, 0), dims, false).to(kInt64);
}

}  // namespace minidl
