#pragma once
// Which members of UnaryOp are the special functions (ops/special_functions.h, on Eigen's). On CUDA
// they run in a kernel of their own (ops/cuda/special_math.cu) rather than the elementwise one.
#include "ops/kernels.h"

namespace minidl {

constexpr bool is_special_function(UnaryOp op) {
  switch (op) {
    case UnaryOp::Erfc:
    case UnaryOp::Erfinv:
    case UnaryOp::Lgamma:
    case UnaryOp::Digamma:
    case UnaryOp::Polygamma:
    case UnaryOp::Ndtri:
    case UnaryOp::I0:
    case UnaryOp::I0e:
    case UnaryOp::I1:
    case UnaryOp::I1e: return true;
    default: return false;
  }
}

}  // namespace minidl
