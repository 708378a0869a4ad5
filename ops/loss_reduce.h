#pragma once
// What the composed losses share: folding per-element losses by a Reduction, and the checks that
// name the loss. Internal to ops/ (the losses' .cpp files).
#include "core/tensor.h"
#include "ops/kernels.h"
#include "ops/loss.h"
#include "ops/reduce.h"

namespace minidl::detail {

/// Mean, Sum or None; BatchMean (kl_div's alone) is refused, naming `op`.
inline Tensor reduce_loss(const char* op, const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::Sum: return sum(loss);
    case Reduction::None: return loss;
    case Reduction::Mean: return mean(loss);
    default: MINIDL_FAIL(op, ": Reduction::BatchMean is kl_div's alone; expected Mean, Sum or None");
  }
}

/// Defined, on one device, of one floating dtype.
inline void check_floating_inputs(const char* op, std::initializer_list<std::pair<const char*, Tensor>> inputs) {
  const Tensor* first = nullptr;
  const char* first_name = nullptr;
  for (const auto& [name, t] : inputs) {
    MINIDL_CHECK(t.defined(), op, ": ", name, " is undefined");
    MINIDL_CHECK(is_floating(t.dtype()), op, ": expected a floating ", name, ", got ", t.dtype());
    if (!first) {
      first = &t;
      first_name = name;
      continue;
    }
    check_same_device(op, {*first, t});
    MINIDL_CHECK(t.dtype() == first->dtype(), op, ": expected ", name, " of ", first_name, "'s dtype ", first->dtype(),
                 ", got ", t.dtype());
  }
}

}  // namespace minidl::detail
