#pragma once
// What the apps' --precision flag (parsed in apps/common/cli.h) turns on, as a PyTorch user does it:
//   fp32  strict float32: TF32 off for matmuls and for cuDNN convolutions
//   tf32  TF32 on for both (torch.backends.cuda.matmul.allow_tf32 / cudnn.allow_tf32 = True)
//   bf16  TF32 on, and torch.autocast(device, torch.bfloat16) around the forward and the loss
//   fp16  TF32 on, float16 autocast there, and a GradScaler around backward and the optimizer step
// Master weights, their gradients and the optimizer state stay float32 in every mode: autocast
// casts the weights on the way into the low-precision ops only.
#include <optional>
#include <string>

#include "core/autocast.h"
#include "core/error.h"
#include "ops/backend_setting.h"
#include "optim/grad_scaler.h"

namespace mnist_app {

enum class Precision { Fp32, Tf32, Bf16, Fp16 };

/// "fp32", "tf32", "bf16" or "fp16" (the flag's values); anything else is an error naming them.
///   Precision p = parse_precision("bf16");
inline Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::Fp32;
  if (name == "tf32") return Precision::Tf32;
  if (name == "bf16") return Precision::Bf16;
  if (name == "fp16") return Precision::Fp16;
  MINIDL_CHECK(false, "--precision: expected fp32, tf32, bf16 or fp16, got '", name, "'");
  return Precision::Fp32;
}

/// The flag's spelling of `p`.   precision_name(Precision::Bf16) == "bf16"
inline const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Tf32: return "tf32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
  }
  return "?";
}

/// In words, for a run's header.   "bf16 (bfloat16 autocast, TF32, float32 master weights)"
inline std::string precision_description(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32 (strict float32, no TF32)";
    case Precision::Tf32: return "tf32 (TF32 for matmuls and convolutions)";
    case Precision::Bf16: return "bf16 (bfloat16 autocast, TF32, float32 master weights)";
    case Precision::Fp16: return "fp16 (float16 autocast, gradient scaler, TF32, float32 master weights)";
  }
  return "?";
}

/// The dtype autocast runs the matmuls and convolutions in: none for fp32 and tf32.
inline std::optional<minidl::DType> autocast_dtype(Precision p) {
  if (p == Precision::Bf16) return minidl::kBFloat16;
  if (p == Precision::Fp16) return minidl::kFloat16;
  return std::nullopt;
}

/// The TF32 switches of `p` for the lifetime of a run, put back as they were after it (tests run
/// several apps' code in one process).
///   PrecisionScope precision(Precision::Tf32);
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p)
      : matmul_(minidl::allow_tf32_matmul()), cudnn_(minidl::allow_tf32_cudnn()) {
    // fp32 switches TF32 off explicitly: MINIDL_ALLOW_TF32 in the environment must not turn a
    // strict float32 run into a TF32 one.
    const bool tf32 = p != Precision::Fp32;
    minidl::set_allow_tf32_matmul(tf32);
    minidl::set_allow_tf32_cudnn(tf32);
  }
  ~PrecisionScope() {
    minidl::set_allow_tf32_matmul(matmul_);
    minidl::set_allow_tf32_cudnn(cudnn_);
  }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  bool matmul_, cudnn_;
};

/// Autocast on `device` in `p`'s dtype for a forward and its loss, as `with torch.autocast(...)`;
/// nothing for fp32 and tf32. Take it inside a graphed step's loss function, so that the capture
/// records the casts.
///   { ForwardPrecision autocast(precision, device); loss = cross_entropy(model->forward(x), y); }
class ForwardPrecision {
 public:
  ForwardPrecision(Precision p, minidl::Device device) {
    if (std::optional<minidl::DType> dtype = autocast_dtype(p)) guard_.emplace(device, *dtype);
  }

 private:
  std::optional<minidl::AutocastGuard> guard_;
};

/// The gradient scaler of `p`: torch.amp.GradScaler's defaults for fp16 (its state on the device,
/// so a scaled step can be captured), disabled (a pass-through) for the other precisions, which need
/// none (bfloat16 has float32's range).
///   optim::GradScaler scaler(grad_scaler_options(precision));
inline minidl::optim::GradScalerOptions grad_scaler_options(Precision p) {
  return minidl::optim::GradScalerOptions().enabled(p == Precision::Fp16);
}

/// What a GraphedStep is given: the scaler where it scales, none otherwise (the plain step).
///   cuda::GraphedStepOptions().grad_scaler(step_scaler(scaler))
inline minidl::optim::GradScaler* step_scaler(minidl::optim::GradScaler& scaler) {
  return scaler.is_enabled() ? &scaler : nullptr;
}

}  // namespace mnist_app
