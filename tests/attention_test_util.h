#pragma once
// Inputs of the attention tests, CPU and CUDA alike.
#include <vector>

#include "minidl.h"

namespace minidl::testing {

/// q, k, v as a GPT block makes them (apps/common/gpt.h): one [B, T, 3C] projection split in three,
/// each viewed as [B, T, H, hs] and transposed to [B, H, T, hs] (strides T 3C, hs, 3C, 1).
inline std::vector<Tensor> packed_heads(const Tensor& qkv, int64_t H) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  std::vector<Tensor> heads;
  for (const Tensor& t : qkv.split(C, 2)) heads.push_back(t.view({B, T, H, C / H}).transpose(1, 2));
  return heads;
}

}  // namespace minidl::testing
