#pragma once
// Activation checkpointing, as torch.utils.checkpoint.checkpoint (its reentrant form): memory for
// compute, a transformer block at a time.
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace minidl::autograd {

/// Runs fn(inputs) without keeping what its ops save for their backward, and runs fn again during
/// the backward to make it: the activations inside fn cost memory only while its backward runs.
/// The backward accumulates the gradients of fn's parameters into their .grad, through a backward
/// of its own, and hands the inputs' gradients on, so:
///   - at least one input must require grad (otherwise nothing would reach fn's parameters);
///   - use backward(), not autograd::grad(), through it, and no create_graph (both are refused);
///   - fn must compute the same thing twice: with preserve_rng_state the generator is set back to its
///     state at the forward for the recomputation (dropout draws the same mask), and autocast is on
///     as it was at the forward.
///   x = autograd::checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{block->forward(in[0])}; },
///                            {x})[0];
std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                               const std::vector<Tensor>& inputs, bool preserve_rng_state = true);
/// The one-input, one-output form.   x = autograd::checkpoint([&](const Tensor& t) { return block->forward(t); }, x);
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, bool preserve_rng_state = true);

}  // namespace minidl::autograd
