#pragma once
// What the losses share: folding per-element losses by a Reduction, and the checks that
// name the loss. Internal to ops/ (the losses' .cpp files).
#include "core/tensor.h"
#include "ops/arithmetic.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/loss.h"
#include "ops/reduce.h"

namespace minidl::detail {

/// Refuses BatchMean, kl_div's alone, naming `op`.
inline void check_not_batchmean(const char* op, Reduction reduction) {
  MINIDL_CHECK(reduction != Reduction::BatchMean, op,
               ": Reduction::BatchMean is kl_div's alone; expected Mean, Sum or None");
}

/// The per-element loss folded: summed, kept, averaged, or (kl_div's BatchMean) summed over the batch.
inline Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::Sum: return sum(loss);
    case Reduction::None: return loss;
    case Reduction::BatchMean:
      return div(sum(loss), Scalar(static_cast<double>(loss.dim() ? loss.size(0) : 1)));
    default: return mean(loss);
  }
}

/// Mean, Sum or None; BatchMean is refused, naming `op`.
inline Tensor reduce_loss(const char* op, const Tensor& loss, Reduction reduction) {
  check_not_batchmean(op, reduction);
  return reduce(loss, reduction);
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
