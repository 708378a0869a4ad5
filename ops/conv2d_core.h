#pragma once
// The convolution without its bias, shared by conv2d and its fused forms (ops/conv2d_relu.cpp):
// the forward runs off the tape, by cuDNN or by im2col + GEMM as conv_backend() says, and keeps
// what the backward needs; the caller records one node that adds its own epilogue's gradient.
// Internal to ops/.
#include "core/tensor.h"
#include "ops/kernels.h"

namespace minidl {

struct ConvSaved {
  ConvGeometry g{};
  Shape w_shape;
  bool cudnn = false;
  /// The layout cuDNN ran in (Kernels::conv2d_cudnn_format): the output, its gradient, x and the
  /// weight as saved, and the input's gradient are all in it.
  MemoryFormat format = MemoryFormat::Contiguous;
  bool onednn = false;  // the forward ran on oneDNN (CPU); the gradients will too
  Tensor x;     // cuDNN and oneDNN: the input, kept when the weight needs a gradient
  Tensor cols;  // im2col: the columns [N, K, L], kept when the weight needs a gradient
  Tensor w;     // the weight (as [O, K] for im2col), kept when the input needs a gradient
};

/// Whether a bfloat16 / float16 convolution computes in float32 instead: its operands widened (the
/// widening recorded, so gradients come back rounded to 16 bits), the float32 convolution run, its
/// output rounded once. That is the CPU (im2col and oneDNN are float32 paths), the Im2col backend,
/// and CUDA where cuDNN has no algorithm for the shape (or in deterministic mode); CUDA otherwise runs
/// cuDNN in 16 bits with float32 accumulation. False for float32 and float64.
bool conv_computes_in_float32(const Tensor& x, int64_t out_channels, const ConvGeometry& g);

/// t as float32, recorded (its gradient comes back in t's dtype); an undefined t stays undefined.
Tensor widen_to_float32(const Tensor& t);

/// The dtypes a convolution's node hands its weight's and bias's gradients back in: the recorded
/// tensors' (float32 for masters, ops/autocast_masters.h); `fallback` where there is no bias.
struct GradDtypes {
  DType weight, bias;
  GradDtypes(const Tensor& weight_recorded, const Tensor& bias_recorded, DType fallback)
      : weight(weight_recorded.dtype()), bias(bias_recorded.defined() ? bias_recorded.dtype() : fallback) {}
};

/// Checks x [N, C, H, W], weight [O, C, kh, kw] and bias ([O] or undefined) for `op` and returns the
/// geometry.
ConvGeometry conv2d_check(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride,
                          Size2 padding, Size2 dilation);

/// out [N, O, out_h, out_w] = x cross-correlated with weight, no bias, not recorded; fills `saved`
/// with what the gradients will need: the weight's where `weight_recorded` (the tensor the tape
/// records for it: weight itself, or its master, ops/autocast_masters.h) requires grad. On cuDNN the
/// output is laid out as saved.format (channels-last for bfloat16 and float16), any other path's is
/// contiguous.
Tensor conv2d_nobias(const Tensor& x, const Tensor& weight, const ConvGeometry& g, ConvSaved& saved,
                     const Tensor& weight_recorded);

/// The input and weight gradients of conv2d_nobias from grad [N, O, out_h, out_w] (any layout); each
/// one only when asked for (else left undefined). grad_x is laid out as saved.format; grad_w is
/// contiguous, in `weight_grad_dtype` (the recorded weight's: a master's float32, GradDtypes).
void conv2d_nobias_backward(const ConvSaved& saved, const Tensor& grad, bool need_x, bool need_w, Tensor& grad_x,
                            Tensor& grad_w, DType weight_grad_dtype);

}  // namespace minidl
