// normalize, cosine_similarity and pairwise_distance composed of norms and elementwise ops, so their
// gradients are those ops' (on every device and floating dtype).
#include "ops/distance.h"

#include "core/autograd.h"
#include "core/error.h"
#include "ops/arithmetic.h"
#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/diagonal.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

void check_floating(const char* op, const Tensor& x) {
  MINIDL_CHECK(x.defined(), op, ": the input is undefined");
  MINIDL_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor, got ", x.dtype());
}

// n with its values raised to at least eps while its gradient stays that of n: PyTorch clamps the
// norms of cosine_similarity in place under no_grad, which leaves the graph as if unclamped.
Tensor clamped_values(const Tensor& n, double eps) {
  Tensor raise;
  {
    NoGradGuard no_grad;
    raise = sub(clamp(n, eps), n);
  }
  return add(n, raise);
}

}  // namespace

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  check_floating("normalize", x);
  const int64_t d = wrap_dim(dim, x.dim(), "normalize");
  return div(x, clamp(norm(x, p, {d}, /*keepdim=*/true), eps));
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  check_floating("cosine_similarity", x1);
  check_floating("cosine_similarity", x2);
  Shape shape;
  try {
    shape = broadcast_shapes(x1.shape(), x2.shape(), "cosine_similarity");
  } catch (const Error&) {
    MINIDL_FAIL("cosine_similarity: x1 of shape ", x1.shape(), " and x2 of shape ", x2.shape(), " do not broadcast");
  }
  const Tensor a = x1.shape() == shape ? x1 : expand(x1, shape), b = x2.shape() == shape ? x2 : expand(x2, shape);
  const int64_t d = wrap_dim(dim, a.dim(), "cosine_similarity");
  const Tensor na = clamped_values(norm(a, 2, {d}, true), eps), nb = clamped_values(norm(b, 2, {d}, true), eps);
  return sum(mul(div(a, na), div(b, nb)), {d});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  check_floating("pairwise_distance", x1);
  check_floating("pairwise_distance", x2);
  const Tensor diff = add(sub(x1, x2), eps);
  MINIDL_CHECK(diff.dim() >= 1, "pairwise_distance: expected inputs of at least one dim, got shapes ", x1.shape(),
               " and ", x2.shape());
  return norm(diff, p, {diff.dim() - 1}, keepdim);
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, const std::string& compute_mode) {
  MINIDL_AUTOCAST(cdist, cdist, x1, x2, p, compute_mode);
  check_floating("cdist", x1);
  check_floating("cdist", x2);
  MINIDL_CHECK(x1.dim() >= 2 && x2.dim() >= 2, "cdist: expected x1 and x2 with at least 2 dims, got shapes ",
               x1.shape(), " and ", x2.shape());
  MINIDL_CHECK(x1.size(-1) == x2.size(-1), "cdist: expected x1 and x2 with one number of columns, got shapes ",
               x1.shape(), " and ", x2.shape());
  MINIDL_CHECK(p >= 0, "cdist: expected p >= 0, got ", p);
  const bool if_necessary = compute_mode == "use_mm_for_euclid_dist_if_necessary";
  MINIDL_CHECK(if_necessary || compute_mode == "use_mm_for_euclid_dist" || compute_mode == "donot_use_mm_for_euclid_dist",
               "cdist: expected compute_mode \"use_mm_for_euclid_dist_if_necessary\", \"use_mm_for_euclid_dist\" or "
               "\"donot_use_mm_for_euclid_dist\", got \"", compute_mode, "\"");
  const bool by_product = p == 2 && (compute_mode == "use_mm_for_euclid_dist" ||
                                     (if_necessary && (x1.size(-2) > 25 || x2.size(-2) > 25)));
  if (by_product) {
    const Tensor n1 = sum(mul(x1, x1), {-1}, true), n2 = sum(mul(x2, x2), {-1}, true);
    const Tensor dot = matmul(x1, transpose(x2, -1, -2));
    const Tensor squared = sub(add(n1, transpose(n2, -1, -2)), mul(dot, 2.0));
    return sqrt(clamp(squared, 1e-30));
  }
  const Tensor diff = sub(unsqueeze(x1, -2), unsqueeze(x2, -3));
  return linalg_vector_norm(diff, p, std::vector<int64_t>{-1});
}

Tensor dist(const Tensor& a, const Tensor& b, double p) {
  check_floating("dist", a);
  check_floating("dist", b);
  return norm(sub(a, b), p);
}

Tensor pdist(const Tensor& x, double p) {
  check_floating("pdist", x);
  MINIDL_CHECK(x.dim() == 2, "pdist: expected a 2-D tensor [N, M], got shape ", x.shape());
  MINIDL_CHECK(p >= 0, "pdist: expected p >= 0, got ", p);
  const Tensor pairs = triu_indices(x.size(0), x.size(0), 1, TensorOptions().dtype(kInt64).device(x.device()));
  const Tensor diff = sub(index_select(x, 0, pairs[0]), index_select(x, 0, pairs[1]));
  return linalg_vector_norm(diff, p, std::vector<int64_t>{1});
}

Tensor renorm(const Tensor& x, double p, int64_t dim, double maxnorm) {
  check_floating("renorm", x);
  MINIDL_CHECK(p > 0, "renorm: expected p > 0, got ", p);
  MINIDL_CHECK(maxnorm >= 0, "renorm: expected maxnorm >= 0, got ", maxnorm);
  MINIDL_CHECK(x.dim() >= 1, "renorm: expected a tensor with at least 1 dim, got a scalar");
  const int64_t d = wrap_dim(dim, x.dim(), "renorm");
  std::vector<int64_t> others;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) others.push_back(i);
  const Tensor norms = others.empty() ? abs(x) : linalg_vector_norm(x, p, others, /*keepdim=*/true);
  const Tensor scale = where(gt(norms, maxnorm), div(full_like(norms, maxnorm), add(norms, 1e-7)), ones_like(norms));
  return mul(x, scale);
}

}  // namespace minidl
