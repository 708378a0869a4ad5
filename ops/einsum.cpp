// einsum. The equation is parsed into integer labels per operand dimension (letters, and one label
// per dimension an ellipsis covers, aligned from the right so that they broadcast). Then:
//   1. a label repeated within an operand takes the diagonal: multiply by an identity mask over the
//      two dimensions and sum one away (clear, differentiable, and small next to the products);
//   2. a label that no later operand and not the output needs is summed away at once;
//   3. operands are contracted left to right, each pair as one batched GEMM: both permuted to
//      [batch, own, contracted] / [batch, contracted, own], broadcast (expand) where one side
//      has size 1, reshaped to three dims and multiplied by matmul (cuBLAS on CUDA);
//   4. the result is permuted to the output's order.
// Every step is a differentiable op, so the backward is theirs.
#include "ops/einsum.h"

#include <algorithm>
#include <map>
#include <set>

#include "ops/autocast_policy.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

constexpr int kEllipsisBase = 52;  // letters take 0..51 (A-Z, then a-z: ASCII order)
constexpr int kEllipsisMark = -1;

int letter_label(char c, const std::string& equation) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  MINIDL_FAIL("einsum: unexpected character '", c, "' in \"", equation,
              "\"; expected letters, ',', '->' and '...'");
}

std::string label_name(int label) {
  if (label >= kEllipsisBase) return "...";
  return std::string(1, static_cast<char>(label < 26 ? 'A' + label : 'a' + (label - 26)));
}

// Letters as labels, an ellipsis as kEllipsisMark.
std::vector<int> parse_term(const std::string& term, const std::string& equation) {
  std::vector<int> out;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      MINIDL_CHECK(term.compare(i, 3, "...") == 0, "einsum: a '.' that is not part of \"...\" in \"", equation, "\"");
      MINIDL_CHECK(std::find(out.begin(), out.end(), kEllipsisMark) == out.end(),
                   "einsum: more than one \"...\" in the term \"", term, "\" of \"", equation, "\"");
      out.push_back(kEllipsisMark);
      i += 2;
    } else {
      out.push_back(letter_label(term[i], equation));
    }
  }
  return out;
}

struct Operand {
  Tensor t;
  std::vector<int> labels;  // one per dimension of t
};

int64_t position(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) - labels.begin();
}

bool contains(const std::vector<int>& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

// Sums away the labels of `op` that `keep` does not hold.
void sum_unneeded(Operand& op, const std::set<int>& keep) {
  std::vector<int64_t> dims;
  std::vector<int> rest;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (keep.count(op.labels[d])) rest.push_back(op.labels[d]);
    else dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return;
  op.t = sum(op.t, dims);
  op.labels = rest;
}

// The diagonal of every label repeated within op.
void take_diagonals(Operand& op, size_t index) {
  for (size_t a = 0; a < op.labels.size(); ++a) {
    for (size_t b = a + 1; b < op.labels.size();) {
      if (op.labels[b] != op.labels[a]) {
        ++b;
        continue;
      }
      const int64_t n = op.t.size(static_cast<int64_t>(a));
      MINIDL_CHECK(op.t.size(static_cast<int64_t>(b)) == n, "einsum: the label '", label_name(op.labels[a]),
                   "' repeated in operand ", index, " covers dimensions of sizes ", n, " and ",
                   op.t.size(static_cast<int64_t>(b)), " (shape ", op.t.shape(), "); a diagonal needs equal sizes");
      Tensor range = arange(0, static_cast<double>(n), 1, kInt64, op.t.device());
      Shape shape(op.labels.size(), 1);
      shape[a] = n;
      shape[b] = n;
      Tensor eye = eq(unsqueeze(range, 1), unsqueeze(range, 0)).to(op.t.dtype()).reshape(shape);
      op.t = sum(mul(op.t, eye), {static_cast<int64_t>(b)});
      op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(b));
    }
  }
}

// Permutes t to `order` (labels of t), expands each to `sizes`, and folds into `groups` dims.
Tensor arrange(const Operand& op, const std::vector<std::vector<int>>& groups, const std::map<int, int64_t>& sizes) {
  std::vector<int64_t> perm;
  Shape full, folded;
  for (const auto& group : groups) {
    int64_t n = 1;
    for (int label : group) {
      perm.push_back(position(op.labels, label));
      full.push_back(sizes.at(label));
      n *= sizes.at(label);
    }
    folded.push_back(n);
  }
  return reshape(expand(permute(op.t, perm), full), folded);
}

Operand contract(const Operand& a, const Operand& b, const std::set<int>& keep, const std::map<int, int64_t>& sizes) {
  std::vector<int> batch, contracted, a_only, b_only;
  for (int label : a.labels) {
    if (!contains(b.labels, label)) a_only.push_back(label);
    else if (keep.count(label)) batch.push_back(label);
    else contracted.push_back(label);
  }
  for (int label : b.labels)
    if (!contains(a.labels, label)) b_only.push_back(label);
  Tensor product = matmul(arrange(a, {batch, a_only, contracted}, sizes), arrange(b, {batch, contracted, b_only}, sizes));
  Operand out;
  out.labels = batch;
  out.labels.insert(out.labels.end(), a_only.begin(), a_only.end());
  out.labels.insert(out.labels.end(), b_only.begin(), b_only.end());
  Shape shape;
  for (int label : out.labels) shape.push_back(sizes.at(label));
  out.t = reshape(product, shape);
  return out;
}

}  // namespace

Tensor einsum(const std::string& equation_in, const std::vector<Tensor>& tensors) {
  MINIDL_AUTOCAST(einsum, einsum, equation_in, tensors);
  std::string equation;
  for (char c : equation_in)
    if (c != ' ') equation.push_back(c);
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms{""};
  for (char c : lhs) {
    if (c == ',') terms.emplace_back();
    else terms.back().push_back(c);
  }
  MINIDL_CHECK(terms.size() == tensors.size(), "einsum: \"", equation_in, "\" names ", terms.size(),
               " operands, but ", tensors.size(), " tensors were given");
  // Operands with their labels, ellipses expanded.
  std::vector<Operand> ops;
  std::vector<std::vector<int>> parsed;
  int64_t ellipsis_dims = 0;
  bool any_ellipsis = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    MINIDL_CHECK(tensors[i].defined(), "einsum: operand ", i, " is undefined");
    if (i > 0) check_same_device("einsum", {tensors[0], tensors[i]});
    parsed.push_back(parse_term(terms[i], equation_in));
    const bool has_ellipsis = contains(parsed.back(), kEllipsisMark);
    any_ellipsis = any_ellipsis || has_ellipsis;
    const int64_t named = static_cast<int64_t>(parsed.back().size()) - (has_ellipsis ? 1 : 0);
    const int64_t rank = tensors[i].dim();
    MINIDL_CHECK(has_ellipsis ? named <= rank : named == rank, "einsum: the term \"", terms[i], "\" of operand ", i,
                 " names ", named, " dimensions", has_ellipsis ? " (and \"...\")" : "", ", but the operand has shape ",
                 tensors[i].shape(), " (", rank, "-D)");
    if (has_ellipsis) ellipsis_dims = std::max(ellipsis_dims, rank - named);
  }
  std::map<int, int64_t> sizes;
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    Operand op{tensors[i], {}};
    const int64_t covered = tensors[i].dim() - (static_cast<int64_t>(parsed[i].size()) - 1);
    for (int label : parsed[i]) {
      if (label != kEllipsisMark) {
        op.labels.push_back(label);
        continue;
      }
      for (int64_t k = 0; k < covered; ++k)
        op.labels.push_back(kEllipsisBase + static_cast<int>(ellipsis_dims - covered + k));
    }
    for (size_t d = 0; d < op.labels.size(); ++d) {
      const int label = op.labels[d];
      const int64_t n = op.t.size(static_cast<int64_t>(d));
      ++count[label];
      auto [it, fresh] = sizes.emplace(label, n);
      if (fresh || it->second == n || n == 1) continue;
      MINIDL_CHECK(it->second == 1, "einsum: the label '", label_name(label), "' has size ", it->second,
                   " in one place and ", n, " in operand ", i, " (shape ", op.t.shape(),
                   "); sizes must match or be 1 (broadcast)");
      it->second = n;
    }
    ops.push_back(std::move(op));
  }
  // The output's labels.
  std::vector<int> output;
  if (arrow != std::string::npos) {
    for (int label : parse_term(equation.substr(arrow + 2), equation_in)) {
      if (label == kEllipsisMark) {
        for (int64_t k = 0; k < ellipsis_dims; ++k) output.push_back(kEllipsisBase + static_cast<int>(k));
        continue;
      }
      MINIDL_CHECK(sizes.count(label), "einsum: the output label '", label_name(label),
                   "' appears in no operand of \"", equation_in, "\"");
      MINIDL_CHECK(!contains(output, label), "einsum: the output label '", label_name(label), "' appears twice in \"",
                   equation_in, "\"");
      output.push_back(label);
    }
  } else {
    if (any_ellipsis)
      for (int64_t k = 0; k < ellipsis_dims; ++k) output.push_back(kEllipsisBase + static_cast<int>(k));
    for (const auto& [label, n] : count)
      if (label < kEllipsisBase && n == 1) output.push_back(label);  // std::map: ascending, upper case first
  }
  for (size_t i = 0; i < ops.size(); ++i) take_diagonals(ops[i], i);
  // Labels needed after operand i: the output's and those of the operands after it.
  auto needed_after = [&](size_t i) {
    std::set<int> keep(output.begin(), output.end());
    for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(ops[j].labels.begin(), ops[j].labels.end());
    return keep;
  };
  Operand result = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    std::set<int> keep = needed_after(i);
    std::set<int> keep_a = keep, keep_b = keep;
    keep_a.insert(ops[i].labels.begin(), ops[i].labels.end());
    keep_b.insert(result.labels.begin(), result.labels.end());
    sum_unneeded(result, keep_a);
    sum_unneeded(ops[i], keep_b);
    result = contract(result, ops[i], keep, sizes);
  }
  sum_unneeded(result, std::set<int>(output.begin(), output.end()));
  std::vector<int64_t> perm;
  for (int label : output) perm.push_back(position(result.labels, label));
  return perm.empty() ? result.t : permute(result.t, perm);
}

}  // namespace minidl
