// repeat, flip, roll, tril, triu, one_hot, repeat_interleave: compositions of views, index_select,
// cat and masked_fill, whose backwards (sums over expanded dims, index_add, slicing, masking) are
// the exact adjoints; each runs on every device through those ops' kernels, and none is hot enough
// in training to earn a kernel of its own.
#include "ops/rearrange.h"

#include <algorithm>
#include <string>

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace {

void check_defined(const char* op, const Tensor& x) { MINIDL_CHECK(x.defined(), op, ": x is undefined"); }

// The wrapped dims, refusing repeats (PyTorch: "dims has duplicates").
std::vector<int64_t> unique_dims(const char* op, const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, rank, op);
    MINIDL_CHECK(std::find(out.begin(), out.end(), w) == out.end(), op, ": dim ", d, " appears more than once in dims ",
                 Shape(dims.begin(), dims.end()));
    out.push_back(w);
  }
  return out;
}

Tensor index_on(const std::vector<int64_t>& values, Device device) {
  return Tensor::from_vector<int64_t>(values).to(device);
}

// tril / triu: zero where (col - row) op diagonal says so, over the last two dims.
Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  check_defined(op, x);
  MINIDL_CHECK(x.dim() >= 2, op, ": expected a tensor of at least 2 dimensions, got shape ", x.shape());
  const int64_t rows = x.size(-2), cols = x.size(-1);
  Tensor offset = sub(unsqueeze(arange(0, static_cast<double>(cols), 1, kInt64, x.device()), 0),
                      unsqueeze(arange(0, static_cast<double>(rows), 1, kInt64, x.device()), 1));
  Tensor drop = lower ? gt(offset, Scalar(diagonal)) : lt(offset, Scalar(diagonal));
  return masked_fill(x, drop, 0.0);
}

}  // namespace

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  const char* op = "repeat";
  check_defined(op, x);
  const int64_t n = static_cast<int64_t>(repeats.size());
  MINIDL_CHECK(n >= x.dim(), op, ": expected at least ", x.dim(), " repeats for a tensor of shape ", x.shape(),
               ", got ", n);
  for (int64_t r : repeats)
    MINIDL_CHECK(r >= 0, op, ": expected non-negative repeats, got ", Shape(repeats.begin(), repeats.end()));
  // View x as [1, s0, 1, s1, ...] (leading dims of size 1 where repeats has more), expand to
  // [r0, s0, r1, s1, ...] and fold each pair: the fold's copy is the tiling, and expand's backward
  // sums the gradient over the copies.
  Shape pairs, expanded, folded;
  for (int64_t d = 0; d < n; ++d) {
    const int64_t size = d < n - x.dim() ? 1 : x.size(d - (n - x.dim()));
    pairs.insert(pairs.end(), {1, size});
    expanded.insert(expanded.end(), {repeats[static_cast<size_t>(d)], size});
    folded.push_back(repeats[static_cast<size_t>(d)] * size);
  }
  return reshape(expand(reshape(x, pairs), expanded), folded);
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined("flip", x);
  Tensor out = x;
  for (int64_t d : unique_dims("flip", dims, x.dim())) {
    const int64_t size = x.size(d);
    std::vector<int64_t> reversed(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) reversed[static_cast<size_t>(i)] = size - 1 - i;
    out = index_select(out, d, index_on(reversed, x.device()));
  }
  // flip always returns a new tensor, never x itself.
  return dims.empty() ? x.clone() : out;
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  const char* op = "roll";
  check_defined(op, x);
  if (dims.empty()) {
    MINIDL_CHECK(shifts.size() == 1, op, ": without dims, expected one shift (x is flattened), got ", shifts.size());
    return view(roll(reshape(x, {-1}), shifts, {0}), x.shape());
  }
  MINIDL_CHECK(shifts.size() == dims.size(), op, ": expected as many shifts as dims, got ", shifts.size(),
               " shifts and ", dims.size(), " dims");
  Tensor out = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), op), size = x.size(d);
    if (size == 0) continue;
    const int64_t s = ((shifts[i] % size) + size) % size;
    if (s == 0) continue;
    // The last s elements move to the front: two views joined by cat, whose backward slices.
    out = cat({narrow(out, d, size - s, s), narrow(out, d, 0, size - s)}, d);
  }
  return out.is_same(x) ? x.clone() : out;
}

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, true); }

Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, false); }

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  const char* op = "one_hot";
  check_defined(op, x);
  MINIDL_CHECK(x.dtype() == kInt64, op, ": expected an int64 tensor of class indices, got ", x.dtype());
  MINIDL_CHECK(num_classes >= -1, op, ": expected num_classes >= 0 (or -1 to infer it), got ", num_classes);
  if (x.numel() == 0) {
    MINIDL_CHECK(num_classes != -1, op, ": cannot infer num_classes from an empty tensor; pass it");
  } else {
    // Reads two numbers back to the host (a sync on CUDA), as PyTorch does to check the classes.
    Tensor flat = reshape(x, {-1});
    const int64_t low = -max(neg(flat), 0).values.item<int64_t>();
    const int64_t high = max(flat, 0).values.item<int64_t>();
    MINIDL_CHECK(low >= 0, op, ": expected non-negative class indices, got ", low);
    if (num_classes == -1) num_classes = high + 1;
    MINIDL_CHECK(high < num_classes, op, ": class index ", high, " is out of range for num_classes ", num_classes);
  }
  Tensor classes = arange(0, static_cast<double>(num_classes), 1, kInt64, x.device());
  return eq(unsqueeze(x, -1), classes).to(kInt64);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  const char* op = "repeat_interleave";
  check_defined(op, x);
  MINIDL_CHECK(repeats >= 0, op, ": expected non-negative repeats, got ", repeats);
  if (!dim) return repeat_interleave(reshape(x, {-1}), repeats, 0);
  const int64_t d = wrap_dim(*dim, x.dim(), op), size = x.size(d);
  std::vector<int64_t> index(static_cast<size_t>(size * repeats));
  for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int64_t>(i) / repeats;
  return index_select(x, d, index_on(index, x.device()));
}

Tensor rot90(const Tensor& x, int64_t k, const std::vector<int64_t>& dims) {
  MINIDL_CHECK(dims.size() == 2, "rot90: expected two dims, got ", dims.size());
  MINIDL_CHECK(x.dim() >= 2, "rot90: expected a tensor with at least 2 dims, got ", x.dim());
  const int64_t d0 = wrap_dim(dims[0], x.dim(), "rot90"), d1 = wrap_dim(dims[1], x.dim(), "rot90");
  MINIDL_CHECK(d0 != d1, "rot90: expected two different dims, got ", d0, " twice");
  switch (((k % 4) + 4) % 4) {
    case 1: return transpose(flip(x, {d1}), d0, d1);
    case 2: return flip(x, {d0, d1});
    case 3: return transpose(flip(x, {d0}), d0, d1);
    default: return x.clone();
  }
}

Tensor flipud(const Tensor& x) {
  MINIDL_CHECK(x.dim() >= 1, "flipud: expected a tensor with at least 1 dim, got a scalar");
  return flip(x, {0});
}

Tensor fliplr(const Tensor& x) {
  MINIDL_CHECK(x.dim() >= 2, "fliplr: expected a tensor with at least 2 dims, got ", x.dim());
  return flip(x, {1});
}

}  // namespace minidl
