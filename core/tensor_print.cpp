// Printing a tensor as PyTorch does: values in aligned columns, one format for the whole tensor
// chosen from the values shown (integers as "1.", fixed with 4 decimals, or scientific when the
// nonzero magnitudes span more than 1000x, pass 1e8, or go below 1e-4; bools as True / False,
// right-aligned like every column), rows indented under their
// opening bracket, the middle of long dimensions elided past 1000 elements; then shape and dtype
// always (minidl prints no default), device and requires_grad where they apply.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minidl {

namespace {

constexpr int64_t kSummarizeAbove = 1000;  // elements
constexpr int64_t kEdgeItems = 3;          // kept at each end of an elided dimension

// The value of every element shown, as text, in row-major order over the kept indices.
struct Printed {
  std::vector<std::string> text;
  size_t width = 0;
};

template <class T>
std::vector<std::string> format_all(const std::vector<T>& values) {
  std::vector<std::string> out;
  char buf[64];
  if constexpr (std::is_same_v<T, bool>) {
    for (bool v : values) out.push_back(v ? "True" : "False");
    return out;
  } else if constexpr (std::is_integral_v<T>) {
    for (T v : values) out.push_back(std::to_string(v));
    return out;
  } else {
    bool integral = true;
    double max_abs = 0, min_abs = INFINITY;
    for (T v : values) {
      if (!std::isfinite(v)) continue;
      if (v != std::nearbyint(v)) integral = false;
      const double a = std::abs(static_cast<double>(v));
      if (a == 0) continue;
      max_abs = std::max(max_abs, a);
      min_abs = std::min(min_abs, a);
    }
    const bool any = min_abs < INFINITY;  // a finite nonzero value exists
    const bool sci = any && (max_abs > 1e8 || max_abs / min_abs > 1000 || (!integral && min_abs < 1e-4));
    for (T v : values) {
      const double d = static_cast<double>(v);
      if (std::isnan(d)) out.push_back("nan");
      else if (std::isinf(d)) out.push_back(d > 0 ? "inf" : "-inf");
      else if (sci) out.push_back((std::snprintf(buf, sizeof buf, "%.4e", d), buf));
      else if (integral) out.push_back((std::snprintf(buf, sizeof buf, "%.0f.", d), buf));
      else out.push_back((std::snprintf(buf, sizeof buf, "%.4f", d), buf));
    }
    return out;
  }
}

// Indices kept along a dimension of size n: all, or the first and last kEdgeItems around a -1 (the "...").
std::vector<int64_t> kept(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);
    for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

// Flat positions of the elements shown, in printing order.
void shown_positions(const Shape& shape, size_t d, int64_t base, bool summarize, std::vector<int64_t>& out) {
  if (d == shape.size()) {
    out.push_back(base);
    return;
  }
  int64_t inner = 1;
  for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  for (int64_t i : kept(shape[d], summarize))
    if (i >= 0) shown_positions(shape, d + 1, base + i * inner, summarize, out);
}

// Writes dimension d on; `next` walks the formatted values; `indent` is the column of this
// dimension's '['.
void write(std::string& out, const Printed& p, const Shape& shape, size_t d, size_t& next, bool summarize,
           size_t indent) {
  if (d == shape.size()) {
    const std::string& t = p.text[next++];
    out.append(p.width - t.size(), ' ').append(t);
    return;
  }
  const size_t rest = shape.size() - d - 1;  // dimensions inside this one
  out += '[';
  bool first = true;
  for (int64_t i : kept(shape[d], summarize)) {
    if (!first) {
      out += ',';
      if (rest == 0) out += ' ';
      else out.append(rest, '\n').append(indent + 1, ' ');
    }
    first = false;
    if (i < 0) out += rest == 0 ? " ..." : "...";  // PyTorch pads the 1-D one
    else write(out, p, shape, d + 1, next, summarize, indent + 1);
  }
  out += ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& tensor) {
  if (!tensor.defined()) return os << "Tensor(undefined)";
  const bool summarize = tensor.numel() > kSummarizeAbove;
  std::vector<int64_t> positions;
  shown_positions(tensor.shape(), 0, 0, summarize, positions);
  Printed printed;
  dispatch_with_bool(tensor.dtype(), "print", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> all = tensor.to_vector<T>();  // a read: a device tensor is copied to the host
    using Shown = std::conditional_t<is_16bit_float_v<T>, float, T>;  // printed by their float32 value
    std::vector<Shown> shown;
    for (int64_t pos : positions) shown.push_back(static_cast<Shown>(all[static_cast<size_t>(pos)]));
    printed.text = format_all(shown);
  });
  for (const std::string& t : printed.text) printed.width = std::max(printed.width, t.size());
  std::string out = "tensor(";
  size_t next = 0;
  write(out, printed, tensor.shape(), 0, next, summarize, out.size());
  os << out << ", shape=" << tensor.shape() << ", dtype=" << tensor.dtype();
  if (!tensor.device().is_cpu()) os << ", device=" << tensor.device();
  if (tensor.requires_grad()) os << ", requires_grad=true";
  return os << ')';
}

}  // namespace minidl
