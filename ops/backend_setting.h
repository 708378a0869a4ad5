#pragma once
// Which implementation conv2d and max_pool2d use on CUDA devices: our im2col + GEMM and pooling
// kernels (the default), or cuDNN. Both give the same results within float32 tolerance. Devices
// without a cuDNN path (the CPU, a build without cuDNN) ignore the setting.
#include <string>

namespace minidl {

enum class ConvBackend { Im2col, Cudnn };

/// The backend in force: set_conv_backend's last value, else the environment variable
/// MINIDL_CONV_BACKEND (im2col or cudnn), else Im2col.   if (conv_backend() == ConvBackend::Cudnn) ...
ConvBackend conv_backend();
/// Overrides the environment for the rest of the process.   set_conv_backend(ConvBackend::Cudnn);
void set_conv_backend(ConvBackend backend);
/// Parses "im2col" or "cudnn" (the values MINIDL_CONV_BACKEND and an app's flag accept).
ConvBackend parse_conv_backend(const std::string& name);
const char* conv_backend_name(ConvBackend backend);

}  // namespace minidl
