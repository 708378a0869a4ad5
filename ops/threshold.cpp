#include "ops/threshold.h"

#include "ops/compare.h"

namespace minidl {

Tensor threshold(const Tensor& x, double threshold, double value) {
  MINIDL_CHECK(x.defined(), "threshold: the input is undefined");
  // x <= threshold, not !(x > threshold): a NaN compares false and is kept, as PyTorch keeps it.
  return where(le(x, Scalar(threshold)), Scalar(value), x);
}

}  // namespace minidl
