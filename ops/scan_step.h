#pragma once
// One step of each ScanOp (ops/kernels.h), shared by the CPU and CUDA scan kernels so that both
// devices combine elements by the same formula. Every step is associative, which the CUDA block scan
// relies on; Max and Min let a NaN win, as torch.cummax does.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "ops/kernels.h"

namespace minidl {

template <class Acc, ScanOp kOp>
struct ScanStep {
  MINIDL_HOST_DEVICE static Acc identity() {
    if constexpr (kOp == ScanOp::Sum) return Acc(0);
    else if constexpr (kOp == ScanOp::Prod) return Acc(1);
    else if constexpr (!std::is_floating_point_v<Acc>) return kOp == ScanOp::Max ? std::numeric_limits<Acc>::lowest()
                                                                             : std::numeric_limits<Acc>::max();
    else return kOp == ScanOp::Min ? Acc(INFINITY) : Acc(-INFINITY);  // Max and LogAddExp: -inf
  }

  MINIDL_HOST_DEVICE Acc operator()(const Acc& a, const Acc& b) const {
    if constexpr (kOp == ScanOp::Sum) {
      return a + b;
    } else if constexpr (kOp == ScanOp::Prod) {
      return a * b;
    } else if constexpr (kOp == ScanOp::Max || kOp == ScanOp::Min) {
      if constexpr (std::is_floating_point_v<Acc>) {
        if (a != a) return a;
        if (b != b) return b;
      }
      if constexpr (kOp == ScanOp::Max) return b > a ? b : a;
      else return b < a ? b : a;
    } else {
      const Acc hi = a > b ? a : b, lo = a > b ? b : a;  // a NaN reaches the sum below and stays
      if (hi == lo && (hi == INFINITY || hi == -INFINITY)) return hi;  // inf - inf would be NaN
      using std::exp, std::log1p;  // not minidl's Tensor functions of the same names
      return hi + log1p(exp(lo - hi));
    }
  }
};

}  // namespace minidl
