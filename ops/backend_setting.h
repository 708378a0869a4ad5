#pragma once
// Which implementation conv2d and max_pool2d use on CUDA devices: our im2col + GEMM and pooling
// kernels, cuDNN, or (the default) for each convolution shape whichever measured faster the first
// time that shape ran (cuDNN with its fastest algorithms found by timing, as cudnn.benchmark). All
// give the same results within float32 tolerance. Devices without a cuDNN path (the CPU, a build
// without cuDNN) ignore Cudnn. On the CPU, Auto takes oneDNN for the float32 convolutions with at
// least 64 products per output (ops/conv2d.cpp) where minidl was built with oneDNN, and Im2col
// keeps every convolution on im2col + GEMM.
#include <cstddef>
#include <string>

namespace minidl {

enum class ConvBackend { Auto, Im2col, Cudnn };

/// The backend in force: set_conv_backend's last value, else the environment variable
/// MINIDL_CONV_BACKEND (auto, im2col or cudnn), else Auto.   if (conv_backend() == ConvBackend::Cudnn) ...
ConvBackend conv_backend();
/// Overrides the environment for the rest of the process.   set_conv_backend(ConvBackend::Cudnn);
void set_conv_backend(ConvBackend backend);
/// Parses "auto", "im2col" or "cudnn" (the values MINIDL_CONV_BACKEND and an app's flag accept).
ConvBackend parse_conv_backend(const std::string& name);
const char* conv_backend_name(ConvBackend backend);
/// The most scratch memory one CUDA convolution may hold beyond its inputs and outputs, in bytes:
/// cuDNN's workspace, or im2col's columns (kept for the backward, and as many again in it), for a
/// convolution run op by op (`in_graph` false) or captured into a CUDA graph (true). Auto takes the
/// fastest way within it (with none within it, the fastest). Set for both by set_conv_workspace_limit,
/// else the environment variable MINIDL_CONV_WORKSPACE_MB (as PyTorch's CUDNN_CONV_WSCAP_DBG). By
/// default 32 MB op by op and none in a graph: cuDNN's fastest algorithms can ask for several times
/// the activations (about 700 MB at batch 512 of the MNIST CNN, where those without workspace were
/// 40% slower on an H200), and a step run op by op allocates them anew on every call, at the height
/// of its memory, while a graph allocates them once, at capture (docs/benchmarks.md). A shape
/// measured before a change keeps its choice.
size_t conv_workspace_limit(bool in_graph = false);
/// `bytes` SIZE_MAX: no limit.
void set_conv_workspace_limit(size_t bytes);
/// Back to MINIDL_CONV_WORKSPACE_MB, else the defaults.
void reset_conv_workspace_limit();
/// True when this build has the CPU convolutions' oneDNN path (cmake/onednn.cmake).
bool onednn_available();

}  // namespace minidl
