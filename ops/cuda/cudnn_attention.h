#pragma once
// What cuDNN's fused attention (ops/cuda/cudnn_attention.cpp) takes from minidl's own attention
// kernels (ops/cuda/attention.cu): how many Philox draws a call reserves, and the (seed, offset)
// pair written where cuDNN reads it, on the device.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor.h"

namespace minidl::cuda {

/// The Philox draws a fused attention call over B [L, S] score matrices reserves for its dropout
/// mask: minidl's kernels' count (a block of four draws per four scores), which cuDNN's engines,
/// drawing from the same offset, stay within.
uint64_t attention_dropout_draws(int64_t B, int64_t L, int64_t S);

/// Writes rng_state's draw (ops/kernels.h: seed, offset, a graph's device state) into `seed_offset`
/// (int64 [2, 2]: the seed at [0][0], the offset at [1][0], each on 16 bytes) on `stream`, by a
/// kernel: inside a captured graph each replay reads the graph's device state afresh, so each
/// replay's dropout mask is new.
void write_philox_seed_offset(const Tensor& rng_state, Tensor& seed_offset, cudaStream_t stream);

}  // namespace minidl::cuda
