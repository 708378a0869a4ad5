#pragma once
// Matrix products on the GEMM kernel (Eigen on the CPU, cuBLAS on CUDA).
#include <string>

#include "core/tensor.h"

namespace minidl {

/// torch.matmul: [M, K] @ [K, N] -> [M, N]; batched [B, M, K] @ [B, K, N] (or a 2-D side shared by
/// the batch) -> [B, M, N]; batch dims of any number broadcast ([2, 1, M, K] @ [3, K, N] ->
/// [2, 3, M, N]); a 1-D operand is a row (left) or a column (right) vector whose dim the result
/// drops ([K] @ [K] is a 0-d dot product). Transposed views go to the kernel as transposes, without
/// copies; broadcast batches are copied once, as PyTorch does.   matmul(q, k.transpose(-2, -1))
Tensor matmul(const Tensor& a, const Tensor& b);

/// x @ weight^T + bias, as nn::Linear computes it; bias may be undefined.   linear(x, w, b)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

/// relu(linear(x, weight, bias)) as one op: the bias and the ReLU are applied as the GEMM writes its
/// output, and the backward masks the gradient and sums the bias gradient in one pass.
/// nn::Sequential uses it for a Linear followed by a ReLU.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

/// linear(relu(linear(x, w1, b1)), w2, b2) as one op: on CUDA, where the first product is split
/// along k and the second layer has at most 16 outputs (a classifier's last layer), one kernel
/// finishes the first and computes the second, and one kernel takes the gradient back through
/// the second's input and the ReLU. nn::Sequential uses it for a Linear, a ReLU and a Linear that no ReLU follows.
Tensor linear_relu_linear(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                          const Tensor& b2 = Tensor());

/// linear(gelu(linear(x, w1, b1), approximate), w2, b2) as one op: the backward keeps only the
/// GELU's input (and what the gradients need of x, w1, w2) and makes the GELU's output again, so a
/// transformer's MLP saves one [..., hidden] tensor instead of two.   linear_gelu_linear(x, w1, b1, w2, b2, "tanh")
/// keep_gelu_output trades that memory back for time: the output is saved too, and the backward
/// writes one [..., hidden] tensor less. Worth it where the memory is there anyway (a model's last
/// layers, whose backward would hold the made-again output at the step's peak).
Tensor linear_gelu_linear(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                          const Tensor& b2 = Tensor(), const std::string& approximate = "none",
                          bool keep_gelu_output = false);

}  // namespace minidl
