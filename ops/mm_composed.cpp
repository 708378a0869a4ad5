// tensordot, multi_dot, chain_matmul and matrix_power (declared in ops/mm.h): permutes, reshapes and
// matmuls, so their gradients are matmul's. And the cross product, from index_select and products.
#include <algorithm>
#include <functional>
#include <limits>

#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/mm.h"
#include "ops/tensor_data.h"
#include "ops/view.h"

namespace minidl {

Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int64_t>& dims_a,
                 const std::vector<int64_t>& dims_b) {
  MINIDL_CHECK(dims_a.size() == dims_b.size(), "tensordot: expected as many dims for a as for b, got ", dims_a.size(),
               " and ", dims_b.size());
  std::vector<bool> summed_a(static_cast<size_t>(a.dim())), summed_b(static_cast<size_t>(b.dim()));
  std::vector<int64_t> order_a, order_b;
  int64_t k = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    const int64_t da = wrap_dim(dims_a[i], a.dim(), "tensordot"), db = wrap_dim(dims_b[i], b.dim(), "tensordot");
    MINIDL_CHECK(!summed_a[static_cast<size_t>(da)] && !summed_b[static_cast<size_t>(db)],
                 "tensordot: a dim is listed twice");
    MINIDL_CHECK(a.size(da) == b.size(db), "tensordot: expected dim ", da, " of a (size ", a.size(da), ") and dim ",
                 db, " of b (size ", b.size(db), ") of one size");
    summed_a[static_cast<size_t>(da)] = summed_b[static_cast<size_t>(db)] = true;
    k *= a.size(da);
  }
  // a as [free, summed], b as [summed, free], the summed dims in the pairs' order.
  Shape out;
  int64_t m = 1, n = 1;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (summed_a[static_cast<size_t>(d)]) continue;
    order_a.push_back(d);
    out.push_back(a.size(d));
    m *= a.size(d);
  }
  for (int64_t d : dims_a) order_a.push_back(wrap_dim(d, a.dim(), "tensordot"));
  for (int64_t d : dims_b) order_b.push_back(wrap_dim(d, b.dim(), "tensordot"));
  for (int64_t d = 0; d < b.dim(); ++d) {
    if (summed_b[static_cast<size_t>(d)]) continue;
    order_b.push_back(d);
    out.push_back(b.size(d));
    n *= b.size(d);
  }
  const Tensor lhs = permute(a, order_a).reshape({m, k}), rhs = permute(b, order_b).reshape({k, n});
  return matmul(lhs, rhs).reshape(out);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  MINIDL_CHECK(dims >= 0 && dims <= a.dim() && dims <= b.dim(), "tensordot: expected 0 <= dims <= ", std::min(a.dim(), b.dim()),
               " (the inputs' numbers of dims), got ", dims);
  std::vector<int64_t> da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(a.dim() - dims + i);
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

Tensor multi_dot(const std::vector<Tensor>& tensors) {
  const size_t n = tensors.size();
  MINIDL_CHECK(n >= 2, "multi_dot: expected at least 2 tensors, got ", n);
  std::vector<Tensor> mats;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = tensors[i];
    const bool end = i == 0 || i == n - 1;
    MINIDL_CHECK(t.dim() == 2 || (end && t.dim() == 1), "multi_dot: expected ", end ? "a 1-D or 2-D" : "a 2-D",
                 " tensor at index ", i, ", got shape ", t.shape());
    mats.push_back(t.dim() == 2 ? t : i == 0 ? t.unsqueeze(0) : t.unsqueeze(1));
  }
  for (size_t i = 0; i + 1 < n; ++i)
    MINIDL_CHECK(mats[i].size(1) == mats[i + 1].size(0), "multi_dot: tensors ", i, " and ", i + 1, " (shapes ",
                 tensors[i].shape(), " and ", tensors[i + 1].shape(), ") cannot be multiplied");
  // The matrix-chain order (fewest scalar multiplications), by dynamic programming over spans.
  std::vector<int64_t> sizes{mats[0].size(0)};
  for (const Tensor& m : mats) sizes.push_back(m.size(1));
  std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0));
  std::vector<std::vector<size_t>> split(n, std::vector<size_t>(n, 0));
  for (size_t len = 1; len < n; ++len)
    for (size_t i = 0; i + len < n; ++i) {
      const size_t j = i + len;
      cost[i][j] = std::numeric_limits<double>::infinity();
      for (size_t s = i; s < j; ++s) {
        const double c = cost[i][s] + cost[s + 1][j] +
                         static_cast<double>(sizes[i]) * static_cast<double>(sizes[s + 1]) * static_cast<double>(sizes[j + 1]);
        if (c < cost[i][j]) {
          cost[i][j] = c;
          split[i][j] = s;
        }
      }
    }
  std::function<Tensor(size_t, size_t)> product = [&](size_t i, size_t j) -> Tensor {
    if (i == j) return mats[i];
    return matmul(product(i, split[i][j]), product(split[i][j] + 1, j));
  };
  Tensor out = product(0, n - 1);
  if (tensors[0].dim() == 1) out = out.squeeze(0);
  if (tensors[n - 1].dim() == 1) out = out.squeeze(-1);
  return out;
}

Tensor chain_matmul(const std::vector<Tensor>& matrices) {
  MINIDL_CHECK(!matrices.empty(), "chain_matmul: expected at least one matrix, got none");
  for (size_t i = 0; i < matrices.size(); ++i)
    MINIDL_CHECK(matrices[i].dim() == 2, "chain_matmul: expected 2-D matrices, got shape ", matrices[i].shape(),
                 " at index ", i);
  return matrices.size() == 1 ? matrices[0] : multi_dot(matrices);
}

Tensor matrix_power(const Tensor& x, int64_t n) {
  MINIDL_CHECK(x.dim() >= 2 && x.size(-1) == x.size(-2), "matrix_power: expected square matrices [..., m, m], got shape ",
               x.shape());
  MINIDL_CHECK(n >= 0, "matrix_power: a negative power needs the inverse, which minidl does not compute; got n = ", n);
  if (n == 0) return eye(x.size(-1), TensorOptions().dtype(x.dtype()).device(x.device())).expand(x.shape()).clone();
  Tensor result, square = x;
  for (int64_t e = n; e > 0; e >>= 1) {
    if (e & 1) result = result.defined() ? matmul(result, square) : square;
    if (e > 1) square = matmul(square, square);
  }
  return result;
}

Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "linalg_cross");
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()), "linalg_cross");
  MINIDL_CHECK(shape[static_cast<size_t>(d)] == 3, "linalg_cross: expected dim ", dim, " of length 3, got shape ",
               a.shape(), " and ", b.shape());
  const Tensor x = a.expand(shape), y = b.expand(shape);
  // Component i is x[i + 1] y[i + 2] - x[i + 2] y[i + 1], indices mod 3.
  const Tensor next = tensor({1, 2, 0}, kInt64).to(a.device()), after = tensor({2, 0, 1}, kInt64).to(a.device());
  return index_select(x, d, next) * index_select(y, d, after) - index_select(x, d, after) * index_select(y, d, next);
}

Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim) {
  if (dim) return linalg_cross(a, b, *dim);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "cross");
  const auto three = std::find(shape.begin(), shape.end(), 3);
  MINIDL_CHECK(three != shape.end(), "cross: expected a dim of length 3, got shape ", a.shape(), " and ", b.shape());
  return linalg_cross(a, b, three - shape.begin());
}

}  // namespace minidl
