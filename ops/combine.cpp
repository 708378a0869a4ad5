#include "ops/combine.h"

#include <algorithm>

#include "core/type_promotion.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/pad.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  MINIDL_CHECK(indexing == "ij" || indexing == "xy", "meshgrid: expected indexing \"ij\" or \"xy\", got \"", indexing,
               "\"");
  MINIDL_CHECK(!tensors.empty(), "meshgrid: expected at least one tensor, got none");
  Shape shape;
  for (size_t i = 0; i < tensors.size(); ++i) {
    MINIDL_CHECK(tensors[i].dim() <= 1, "meshgrid: expected 0-d or 1-D tensors, got shape ", tensors[i].shape(),
                 " at index ", i);
    MINIDL_CHECK(tensors[i].dtype() == tensors[0].dtype() && tensors[i].device() == tensors[0].device(),
                 "meshgrid: expected tensors of one dtype and device, got ", tensors[0].dtype(), " on ",
                 tensors[0].device(), " and ", tensors[i].dtype(), " on ", tensors[i].device(), " at index ", i);
    shape.push_back(tensors[i].numel());
  }
  // "xy" is "ij" with the first two inputs swapped, and the outputs' first two dims swapped back.
  const bool swap = indexing == "xy" && tensors.size() >= 2;
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (swap) std::swap(order[0], order[1]);
  Shape grid;
  for (size_t i : order) grid.push_back(shape[i]);
  std::vector<Tensor> out(tensors.size());
  for (size_t k = 0; k < order.size(); ++k) {
    Shape along(order.size(), 1);
    along[k] = grid[k];
    out[order[k]] = tensors[order[k]].reshape(along).expand(grid);
  }
  return out;
}

Tensor cartesian_prod(const std::vector<Tensor>& tensors) {
  MINIDL_CHECK(!tensors.empty(), "cartesian_prod: expected at least one tensor, got none");
  for (size_t i = 0; i < tensors.size(); ++i)
    MINIDL_CHECK(tensors[i].dim() == 1, "cartesian_prod: expected 1-D tensors, got shape ", tensors[i].shape(),
                 " at index ", i);
  if (tensors.size() == 1) return tensors[0];
  std::vector<Tensor> columns;
  for (const Tensor& g : meshgrid(tensors, "ij")) columns.push_back(g.reshape({g.numel()}));
  return stack(columns, 1);
}

Tensor combinations(const Tensor& x, int64_t r, bool with_replacement) {
  MINIDL_CHECK(x.dim() == 1, "combinations: expected a 1-D tensor, got shape ", x.shape());
  MINIDL_CHECK(r >= 0, "combinations: expected r >= 0, got ", r);
  if (r == 0) return Tensor::empty({0}, x.dtype(), x.device());
  const int64_t n = x.size(0);
  // How many tuples: C(n, r), or C(n + r - 1, r) with replacement, refused past 2^31 elements.
  double count_estimate = 1;
  const int64_t top = with_replacement ? n + r - 1 : n;
  for (int64_t k = 0; k < r && count_estimate > 0; ++k)
    count_estimate = count_estimate * double(top - k) / double(k + 1);
  MINIDL_CHECK(count_estimate * double(r) < 2147483648.0, "combinations: ", r, "-element combinations of ", n,
               " elements number about ", count_estimate, ", too many to list");
  // The index tuples in itertools' order, built on the host: c[i] < c[i + 1] (<= with replacement).
  std::vector<int64_t> picks;
  std::vector<int64_t> c(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i) c[static_cast<size_t>(i)] = with_replacement ? 0 : i;
  const bool any = n > 0 && (with_replacement || r <= n);
  while (any) {
    picks.insert(picks.end(), c.begin(), c.end());
    int64_t i = r - 1;  // the rightmost position that can still grow
    while (i >= 0 && c[static_cast<size_t>(i)] == (with_replacement ? n - 1 : n - r + i)) --i;
    if (i < 0) break;
    ++c[static_cast<size_t>(i)];
    for (int64_t j = i + 1; j < r; ++j)
      c[static_cast<size_t>(j)] = with_replacement ? c[static_cast<size_t>(i)] : c[static_cast<size_t>(j - 1)] + 1;
  }
  const int64_t count = static_cast<int64_t>(picks.size()) / r;
  const Tensor index = Tensor::from_vector(picks, {count * r}).to(x.device());
  return index_select(x, 0, index).reshape({count, r});
}

Tensor block_diag(const std::vector<Tensor>& tensors) {
  MINIDL_CHECK(!tensors.empty(), "block_diag: expected at least one tensor, got none");
  const DType dtype = result_type(tensors);
  std::vector<Tensor> blocks;
  int64_t cols = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    MINIDL_CHECK(t.dim() <= 2, "block_diag: expected 0-d, 1-D or 2-D tensors, got shape ", t.shape(), " at index ", i);
    MINIDL_CHECK(t.device() == tensors[0].device(), "block_diag: expected tensors on one device, got ",
                 tensors[0].device(), " and ", t.device(), " at index ", i);
    blocks.push_back(t.dim() == 2 ? t.to(dtype) : t.reshape({1, t.numel()}).to(dtype));
    cols += blocks.back().size(1);
  }
  // Each block padded with zeros to the full width, at its own columns; then the rows stacked.
  std::vector<Tensor> rows;
  int64_t left = 0;
  for (const Tensor& b : blocks) {
    const int64_t width = b.size(1);
    rows.push_back(pad(b, {left, cols - left - width}));
    left += width;
  }
  return cat(rows, 0);
}

Tensor kron(const Tensor& a, const Tensor& b) {
  const int64_t rank = std::max(a.dim(), b.dim());
  // Both as `rank` dims, then interleaved: a as [a0, 1, a1, 1, ...], b as [1, b0, 1, b1, ...].
  auto padded = [rank](const Tensor& t) {
    Shape s(static_cast<size_t>(rank - t.dim()), 1);
    s.insert(s.end(), t.shape().begin(), t.shape().end());
    return s;
  };
  const Shape as = padded(a), bs = padded(b);
  Shape a_view, b_view, out;
  for (size_t d = 0; d < as.size(); ++d) {
    a_view.insert(a_view.end(), {as[d], 1});
    b_view.insert(b_view.end(), {1, bs[d]});
    out.push_back(as[d] * bs[d]);
  }
  return (a.reshape(a_view) * b.reshape(b_view)).reshape(out);
}

Tensor atleast_1d(const Tensor& x) { return x.dim() >= 1 ? x : x.reshape({1}); }

Tensor atleast_2d(const Tensor& x) {
  if (x.dim() >= 2) return x;
  return x.reshape({1, x.numel()});
}

Tensor atleast_3d(const Tensor& x) {
  if (x.dim() >= 3) return x;
  if (x.dim() == 2) return x.unsqueeze(-1);
  return x.reshape({1, x.numel(), 1});
}

namespace {

std::vector<Tensor> each(const std::vector<Tensor>& tensors, Tensor (*f)(const Tensor&), const char* op) {
  MINIDL_CHECK(!tensors.empty(), op, ": expected at least one tensor, got none");
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(f(t));
  return out;
}

}  // namespace

Tensor hstack(const std::vector<Tensor>& tensors) {
  const std::vector<Tensor> ts = each(tensors, atleast_1d, "hstack");
  return cat(ts, ts[0].dim() == 1 ? 0 : 1);
}

Tensor vstack(const std::vector<Tensor>& tensors) { return cat(each(tensors, atleast_2d, "vstack"), 0); }

Tensor row_stack(const std::vector<Tensor>& tensors) { return vstack(tensors); }

Tensor dstack(const std::vector<Tensor>& tensors) { return cat(each(tensors, atleast_3d, "dstack"), 2); }

Tensor column_stack(const std::vector<Tensor>& tensors) {
  MINIDL_CHECK(!tensors.empty(), "column_stack: expected at least one tensor, got none");
  std::vector<Tensor> columns;
  for (const Tensor& t : tensors) columns.push_back(t.dim() <= 1 ? t.reshape({t.numel(), 1}) : t);
  return cat(columns, 1);
}

}  // namespace minidl
