#include "optim/grad_scaler.h"

#include "core/autograd.h"
#include "ops/amp.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/math.h"

namespace minidl::optim {

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  MINIDL_CHECK(options.init_scale() > 0, "GradScaler: expected init_scale > 0, got ", options.init_scale());
  MINIDL_CHECK(options.growth_factor() > 1, "GradScaler: expected growth_factor > 1, got ", options.growth_factor());
  MINIDL_CHECK(options.backoff_factor() > 0 && options.backoff_factor() < 1,
               "GradScaler: expected 0 < backoff_factor < 1, got ", options.backoff_factor());
  MINIDL_CHECK(options.growth_interval() > 0, "GradScaler: expected growth_interval > 0, got ",
               options.growth_interval());
}

void GradScaler::lazy_init(Device device) {
  if (scale_.defined()) return;
  scale_ = full({}, options_.init_scale(), kFloat32, device);
  growth_tracker_ = full({}, init_growth_tracker_, kInt32, device);
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!is_enabled()) return loss;
  MINIDL_CHECK(loss.defined() && is_floating(loss.dtype()), "GradScaler::scale: expected a floating loss, got ",
               loss.defined() ? dtype_name(loss.dtype()) : "an undefined tensor");
  lazy_init(loss.device());
  const Tensor s = scale_.device() == loss.device() ? scale_ : scale_.to(loss.device());
  return mul(loss, s);
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& losses) {
  std::vector<Tensor> out;
  out.reserve(losses.size());
  for (const Tensor& l : losses) out.push_back(scale(l));
  return out;
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!is_enabled()) return;
  PerOptimizer& state = per_optimizer_[&optimizer];
  MINIDL_CHECK(state.stage != Stage::Unscaled,
               "GradScaler: unscale_() has already been called on this optimizer since the last update()");
  MINIDL_CHECK(state.stage != Stage::Stepped, "GradScaler: unscale_() is being called after step()");
  MINIDL_CHECK(scale_.defined(), "GradScaler: unscale_() before any scale(): there is no scale yet");
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const ParamGroup& group : optimizer.param_groups())
    for (const Tensor& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      MINIDL_CHECK(g.device() == scale_.device(), "GradScaler: expected every gradient on ", scale_.device(),
                   " (where the loss was scaled), got one on ", g.device());
      grads.push_back(g);
    }
  // The inverse in float32 on the device, as PyTorch's (it computes it in float64 first; a power of
  // two's inverse is exact either way).
  const Tensor inv_scale = reciprocal(scale_);
  state.found_inf = zeros({}, TensorOptions().dtype(kFloat32).device(scale_.device()));
  amp_foreach_non_finite_check_and_unscale_(grads, state.found_inf, inv_scale);
  state.stage = Stage::Unscaled;
}

void GradScaler::step(Optimizer& optimizer) {
  if (!is_enabled()) {
    optimizer.step();
    return;
  }
  MINIDL_CHECK(per_optimizer_[&optimizer].stage != Stage::Stepped,
               "GradScaler: step() has already been called since the last update()");
  if (per_optimizer_[&optimizer].stage == Stage::Ready) unscale_(optimizer);
  PerOptimizer& state = per_optimizer_[&optimizer];
  optimizer.step_if_finite(state.found_inf);
  state.stage = Stage::Stepped;
}

void GradScaler::update() {
  if (!is_enabled()) return;
  NoGradGuard no_grad;
  Tensor found;
  for (auto& [opt, state] : per_optimizer_) {
    if (!state.found_inf.defined()) continue;
    found = found.defined() ? add(found, state.found_inf) : state.found_inf;
  }
  MINIDL_CHECK(found.defined(), "GradScaler: update() found no inf checks: call step() (or unscale_()) before update()");
  amp_update_scale_(scale_, growth_tracker_, found, options_.growth_factor(), options_.backoff_factor(),
                    options_.growth_interval());
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!is_enabled()) return;
  MINIDL_CHECK(scale_.defined(), "GradScaler: update(new_scale) before any scale(): there is no scale yet");
  fill_(scale_, new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!is_enabled()) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.to(Device::cpu()).item<float>()) : options_.init_scale();
}

int64_t GradScaler::get_growth_tracker() const {
  if (!is_enabled()) return 0;
  return growth_tracker_.defined() ? growth_tracker_.to(Device::cpu()).item<int32_t>() : init_growth_tracker_;
}

Tensor GradScaler::found_inf(const Optimizer& optimizer) const {
  auto it = per_optimizer_.find(&optimizer);
  return it == per_optimizer_.end() ? Tensor() : it->second.found_inf;
}

std::map<std::string, Tensor> GradScaler::state_dict() const {
  if (!is_enabled()) return {};
  return {
      {"scale", full({}, get_scale(), kFloat32)},
      {"growth_factor", full({}, options_.growth_factor(), kFloat64)},
      {"backoff_factor", full({}, options_.backoff_factor(), kFloat64)},
      {"growth_interval", full({}, options_.growth_interval(), kInt64)},
      {"_growth_tracker", full({}, get_growth_tracker(), kInt32)},
  };
}

void GradScaler::load_state_dict(const std::map<std::string, Tensor>& state) {
  MINIDL_CHECK(is_enabled(), "GradScaler: load_state_dict() should not be called if the scaler is disabled");
  MINIDL_CHECK(!state.empty(),
               "GradScaler: the state_dict is empty; it was probably saved from a disabled scaler");
  auto get = [&](const char* key) -> double {
    auto it = state.find(key);
    MINIDL_CHECK(it != state.end(), "GradScaler: load_state_dict: missing \"", key, "\"");
    MINIDL_CHECK(it->second.numel() == 1, "GradScaler: load_state_dict: expected \"", key,
                 "\" to hold one value, got shape ", it->second.shape());
    return it->second.to(Device::cpu()).to(kFloat64).item<double>();
  };
  const double scale = get("scale"), growth = get("growth_factor"), backoff = get("backoff_factor");
  const double interval = get("growth_interval"), tracker = get("_growth_tracker");
  options_.init_scale(scale).growth_factor(growth).backoff_factor(backoff).growth_interval(static_cast<int64_t>(interval));
  init_growth_tracker_ = static_cast<int32_t>(tracker);
  if (scale_.defined()) {  // in place: a captured graph keeps reading these buffers
    fill_(scale_, scale);
    fill_(growth_tracker_, init_growth_tracker_);
  }
}

}  // namespace minidl::optim
