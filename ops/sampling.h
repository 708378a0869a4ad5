#pragma once
// Drawing category indices from probabilities (torch.multinomial).
#include <cstdint>

#include "core/tensor.h"

namespace minidl {

/// num_samples category indices (int64) per row of probs [C] or [N, C] (non-negative weights, not
/// necessarily normalized; floating, on any device): [num_samples] or [N, num_samples], as
/// torch.multinomial. Without replacement a row's draws are distinct, in the order a sequential
/// draw would give them. Draws come from this thread's default generator (a GeneratorGuard makes
/// them repeat). A negative, infinite or NaN weight, a row summing to zero, or (without
/// replacement) fewer nonzero weights than num_samples is an error: checking it reads one flag per
/// row back to the host, the op's one synchronization.
///   Tensor next = multinomial(softmax(logits / temperature, -1), 1);   // [B, C] -> [B, 1]
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

}  // namespace minidl
