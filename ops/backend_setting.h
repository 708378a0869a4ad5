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

/// Which fused attention runs 16-bit inputs on CUDA (scaled_dot_product_attention without a mask):
/// minidl's FlashAttention-2 kernels (ops/cuda/attention.cu) or cuDNN's fused attention
/// (ops/cuda/cudnn_attention.cpp), as PyTorch's enable_flash_sdp / enable_cudnn_sdp choose. Auto (the
/// default) takes cuDNN where it has an engine for the call (bfloat16 or float16, head size 64 or 128,
/// an sm_90 or later GPU, cuDNN 9.6 or later, not deterministic mode with dropout), measured faster
/// there (docs/benchmarks.md), and minidl's kernels elsewhere. Cudnn asks for cuDNN by name and gets
/// the same: a call cuDNN cannot run still runs minidl's kernels. Minidl runs minidl's kernels for
/// every call. float32 always runs minidl's: cuDNN's fused attention has no float32. The two draw
/// different dropout masks from the same generator. The environment variable
/// MINIDL_ATTENTION_BACKEND (auto, minidl or cudnn) sets it until set_attention_backend overrides it.
enum class AttentionBackend { Auto, Minidl, Cudnn };
AttentionBackend attention_backend();
///   set_attention_backend(AttentionBackend::Minidl);
void set_attention_backend(AttentionBackend backend);
/// Parses "auto", "minidl" or "cudnn".
AttentionBackend parse_attention_backend(const std::string& name);

// TF32, as PyTorch names its switches. TF32 runs float32 products on tensor cores with 10 bits of
// mantissa in the inputs (float32 accumulation): several times faster on an A100/H100, results that
// differ from strict float32 by about 1e-3 relative. Both switches are OFF by default: minidl's float32
// stays strict, convolutions included (PyTorch's default allows TF32 in cuDNN convolutions,
// torch.backends.cudnn.allow_tf32 = True, and not in matmul). The environment variable
// MINIDL_ALLOW_TF32=1 turns both on, =0 keeps both off, until set_* overrides it. They affect only
// float32 on CUDA: the CPU, float64 and the 16-bit dtypes (always on tensor cores, float32
// accumulation) ignore them. A GEMM or convolution shape measured under one setting is measured
// again under the other (the cached choices are keyed by it).

/// torch.backends.cuda.matmul.allow_tf32: float32 GEMMs (matmul, linear, im2col convolutions) on
/// CUBLAS_COMPUTE_32F_FAST_TF32.   set_allow_tf32_matmul(true);
void set_allow_tf32_matmul(bool allow);
bool allow_tf32_matmul();
/// torch.backends.cudnn.allow_tf32: cuDNN's float32 convolutions may take tensor-op (TF32)
/// algorithms.   set_allow_tf32_cudnn(true);
void set_allow_tf32_cudnn(bool allow);
bool allow_tf32_cudnn();
/// torch.set_float32_matmul_precision: "highest" (strict float32, allow_tf32_matmul off), "high" or
/// "medium" (TF32 on). minidl has no bf16x3 path, so "medium" means the same as "high". Any other
/// string fails, naming the three.   set_float32_matmul_precision("high");
void set_float32_matmul_precision(const std::string& precision);
/// "highest" while allow_tf32_matmul() is off, else "high" (or "medium" where set so).
std::string float32_matmul_precision();

/// Whether CUDA GEMM shapes are timed: each new shape's cuBLASLt configurations are run and the
/// fastest kept (ops/cuda/cublaslt.cpp), as cudnn.benchmark does for convolutions. On unless
/// set_gemm_autotune(false), or the environment variable MINIDL_GEMM_TUNE=0 until set_gemm_autotune
/// overrides it. Off, a shape runs the heuristic's first pick. Turn it off where the shapes keep
/// changing: generating text, every token brings a new length, and timing costs milliseconds a shape.
///   set_gemm_autotune(false);
void set_gemm_autotune(bool on);
bool gemm_autotune();

}  // namespace minidl
