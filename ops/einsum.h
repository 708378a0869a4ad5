#pragma once
// Einstein summation, as torch::einsum.
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// Sums products of `tensors` over the index labels that the output leaves out, as torch::einsum.
/// The equation names each operand's dimensions with letters (a-z, A-Z), separated by commas;
/// "->" names the output's (without it, the output takes the labels that appear once, in
/// alphabetical order, upper case first). A label repeated in one operand takes its diagonal;
/// "..." stands for the dimensions not named, broadcast across operands (and leading in an implicit
/// output). Computed by permutes, reshapes and batched matrix products (cuBLAS on CUDA), so it
/// is differentiable through them.
///   einsum("bij,bjk->bik", {a, b})  // batched matmul
///   einsum("ii", {m})               // trace
///   einsum("bn,anm,bm->ba", {l, w, r})  // bilinear
Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors);

}  // namespace minidl
