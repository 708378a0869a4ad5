// unique: a stable sort, a flag where each run of equal values (or slices) starts, the flags'
// running count as each element's group, masked_select / index_select for the runs' first
// elements, scatter for the inverse and scatter_add for the counts. unique_consecutive is the same
// without the sort. The dim forms see x as [N, K]: N slices along dim of K elements each, moved first.
#include "ops/unique.h"

#include <vector>

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/indexing.h"
#include "ops/logical.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/select.h"
#include "ops/slice.h"
#include "ops/sort.h"
#include "ops/view.h"

namespace minidl {

namespace {

Tensor not_asked(Device device) { return Tensor::empty({0}, kInt64, device); }

// True where row i of `rows` ([N, K], or [N] for elements) differs from row i - 1; true at 0.
Tensor run_starts(const Tensor& rows) {
  const int64_t n = rows.size(0);
  Tensor first = ones({1}, kBool, rows.device());
  if (n <= 1) return narrow(first, 0, 0, n);
  Tensor differs = ne(narrow(rows, 0, 1, n - 1), narrow(rows, 0, 0, n - 1));
  if (rows.dim() == 2) differs = any(differs, 1);
  return cat({first, differs}, 0);
}

struct Runs {
  Tensor starts;  // bool [N]
  Tensor group;   // int64 [N]: the run of each row
  int64_t count;  // number of runs
};

Runs runs_of(const Tensor& rows) {
  Runs r;
  r.starts = run_starts(rows);
  r.group = cumsum(r.starts, 0) - 1;
  r.count = rows.size(0) == 0 ? 0 : sum(r.starts).item<int64_t>();  // host read: the result's size
  return r;
}

Tensor counts_of(const Runs& r, Device device) {
  const int64_t n = r.group.numel();
  return scatter_add(zeros({r.count}, kInt64, device), 0, r.group, ones({n}, kInt64, device));
}

// The stable lexicographic order of the rows of [N, K]: stable sorts by each column, last first.
Tensor lexicographic_order(const Tensor& rows) {
  const int64_t n = rows.size(0), k = rows.size(1);
  Tensor order = arange(n, kInt64, rows.device());
  for (int64_t c = k - 1; c >= 0; --c) {
    const Tensor keys = index_select(select(rows, 1, c), 0, order);
    order = index_select(order, 0, argsort(keys));
  }
  return order;
}

std::tuple<Tensor, Tensor, Tensor> unique_flat(const Tensor& x, bool sort_first, bool return_inverse,
                                               bool return_counts) {
  const Device device = x.device();
  const int64_t n = x.numel();
  const Tensor flat = reshape(x, {n});
  Tensor values = flat, order;
  if (sort_first) std::tie(values, order) = sort(flat);
  const Runs r = runs_of(values);
  Tensor inverse = not_asked(device), counts = not_asked(device);
  if (return_inverse) {
    inverse = sort_first ? scatter(zeros({n}, kInt64, device), 0, order, r.group) : r.group;
    inverse = reshape(inverse, x.shape());
  }
  if (return_counts) counts = counts_of(r, device);
  return {masked_select(values, r.starts), inverse, counts};
}

std::tuple<Tensor, Tensor, Tensor> unique_slices(const Tensor& x, int64_t dim, bool sort_first, bool return_inverse,
                                                 bool return_counts, const char* op) {
  MINIDL_CHECK(x.dim() >= 1, op, ": expected a tensor with at least 1 dimension for the dim form, got a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), op);
  const Device device = x.device();
  const int64_t n = x.size(dim);
  const Tensor moved = movedim(x, dim, 0).contiguous();
  const int64_t k = n == 0 ? 0 : x.numel() / n;
  const Tensor rows = reshape(moved, {n, k});
  // Slices of no elements are all equal: any() over none is false, so they form one run.
  const Tensor order = sort_first ? lexicographic_order(rows) : arange(n, kInt64, device);
  const Runs r = runs_of(index_select(rows, 0, order));
  const Tensor firsts = index_select(order, 0, reshape(nonzero(r.starts), {r.count}));
  Tensor inverse = not_asked(device), counts = not_asked(device);
  if (return_inverse) inverse = scatter(zeros({n}, kInt64, device), 0, order, r.group);
  if (return_counts) counts = counts_of(r, device);
  return {movedim(index_select(moved, 0, firsts), 0, dim), inverse, counts};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool /*sorted*/, bool return_inverse, bool return_counts,
                                          std::optional<int64_t> dim) {
  NoGradGuard no_grad;
  const Tensor input = x.detach();
  if (dim) return unique_slices(input, *dim, true, return_inverse, return_counts, "unique");
  return unique_flat(input, true, return_inverse, return_counts);
}

std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& x, int64_t dim, bool sorted, bool return_inverse,
                                              bool return_counts) {
  return unique(x, sorted, return_inverse, return_counts, dim);
}

std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse, bool return_counts,
                                                      std::optional<int64_t> dim) {
  NoGradGuard no_grad;
  const Tensor input = x.detach();
  if (dim) return unique_slices(input, *dim, false, return_inverse, return_counts, "unique_consecutive");
  return unique_flat(input, false, return_inverse, return_counts);
}

}  // namespace minidl
