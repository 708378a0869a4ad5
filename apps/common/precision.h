#pragma once
// What the apps' --precision flag (parsed in apps/common/cli.h) turns on, as a PyTorch user does it:
//   fp32  strict float32: TF32 off for matmuls and for cuDNN convolutions
//   tf32  TF32 on for both (torch.backends.cuda.matmul.allow_tf32 / cudnn.allow_tf32 = True)
//   bf16  TF32 on, and torch.autocast(device, torch.bfloat16) around the forward and the loss
//   fp16  TF32 on, float16 autocast there, and a GradScaler around backward and the optimizer step
// Master weights, their gradients and the optimizer state stay float32 in every mode: autocast
// casts the weights on the way into the low-precision ops only.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "core/autocast.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "ops/creation.h"
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

/// The checkpoint metadata keys of the scaler's state: this prefix and GradScaler::state_dict's keys.
inline constexpr const char* kGradScalerKeyPrefix = "app.grad_scaler.";

/// fp16's scaler state (its scale and growth count) as checkpoint metadata, so that a resumed run
/// goes on with the scale it had, as a PyTorch user saves scaler.state_dict() beside the model;
/// nothing for a disabled scaler. Reads the device (a sync): once per checkpoint.
///   optim::save_checkpoint(path, model, optimizer, position, scaler_metadata(scaler));
inline minidl::safetensors::Metadata scaler_metadata(const minidl::optim::GradScaler& scaler) {
  minidl::safetensors::Metadata metadata;
  for (const auto& [key, value] : scaler.state_dict()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", value.to(minidl::kFloat64).item<double>());
    metadata[kGradScalerKeyPrefix + key] = text;
  }
  return metadata;
}

/// Puts back the scaler state that scaler_metadata wrote into the checkpoint `path`. A checkpoint
/// without it (a run in another precision) leaves the scaler as it is; a disabled scaler ignores it.
inline void restore_scaler(minidl::optim::GradScaler& scaler, const std::string& path) {
  if (!scaler.is_enabled()) return;
  const std::string prefix = kGradScalerKeyPrefix;
  std::map<std::string, minidl::Tensor> state;
  for (const auto& [key, text] : minidl::safetensors::load(path).metadata) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    MINIDL_CHECK(!text.empty() && *end == '\0', path, ": metadata \"", key, "\" is \"", text, "\", expected a number");
    state[key.substr(prefix.size())] = minidl::full({}, value, minidl::kFloat64);
  }
  if (!state.empty()) scaler.load_state_dict(state);
}

}  // namespace mnist_app
