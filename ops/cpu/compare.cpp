// Comparisons and where on the CPU: one strided walk for any layout (broadcast operands have
// stride 0), the comparison chosen once per call rather than per element.
#include <functional>

#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/strided.h"

namespace minidl {

namespace {

// Calls fn with the standard function object of `op`; NaN compares as IEEE says (only Ne is true).
template <class Fn>
void with_comparison(CompareOp op, Fn&& fn) {
  switch (op) {
    case CompareOp::Eq: return fn(std::equal_to<>{});
    case CompareOp::Ne: return fn(std::not_equal_to<>{});
    case CompareOp::Lt: return fn(std::less<>{});
    case CompareOp::Le: return fn(std::less_equal<>{});
    case CompareOp::Gt: return fn(std::greater<>{});
    case CompareOp::Ge: return fn(std::greater_equal<>{});
  }
}

}  // namespace

void CpuKernels::compare(CompareOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_with_bool(a.dtype(), "compare", [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    bool* o = out.data<bool>();
    with_comparison(op, [&](auto cmp) {
      cpu::for_each_row<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()},
                           [&](auto off, int64_t n, auto inc) {
                             for (int64_t i = 0; i < n; ++i)
                               o[off[0] + i * inc[0]] = cmp(x[off[1] + i * inc[1]], y[off[2] + i * inc[2]]);
                           });
    });
  });
}

void CpuKernels::where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  dispatch_with_bool(out.dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    const bool* c = cond.data<bool>();
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    T* o = out.data<T>();
    cpu::for_each_row<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()},
                         [&](auto off, int64_t n, auto inc) {
                           for (int64_t i = 0; i < n; ++i) {
                             const bool take_a = c[off[1] + i * inc[1]];
                             o[off[0] + i * inc[0]] = take_a ? x[off[2] + i * inc[2]] : y[off[3] + i * inc[3]];
                           }
                         });
  });
}

}  // namespace minidl
