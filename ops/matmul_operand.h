#pragma once
// How a product's operands reach the GEMM kernel (ops/kernels.h): contiguous storage plus a
// transpose flag, so that a transposed view is never copied. Shared by matmul.cpp and mm.cpp.
#include <utility>

#include "core/tensor.h"

namespace minidl {

// A matrix (or batch of matrices) as the kernel takes it: contiguous `data`, read as its transpose
// when `trans`. The logical matrix is op(data).
struct GemmOperand {
  Tensor data;
  bool trans = false;
  GemmOperand transposed() const { return {data, !trans}; }
};

// Called without grad mode: a copy made here is plumbing, not a node of the graph.
inline GemmOperand as_operand(const Tensor& x) {
  if (x.is_contiguous()) return {x.detach(), false};
  Shape shape = x.shape();
  Strides strides = x.strides();
  const size_t r = shape.size();
  std::swap(shape[r - 1], shape[r - 2]);
  std::swap(strides[r - 1], strides[r - 2]);
  Tensor swapped = Tensor::make_view(x, std::move(shape), std::move(strides), x.offset());
  if (swapped.is_contiguous()) return {swapped, true};
  return {x.contiguous().detach(), false};
}

}  // namespace minidl
