// Anomaly mode's switch and its checks. Like core/autograd_gradients.cpp, this part of the engine calls a few
// ops (sub, sum, to) to look at values on any device.
#include "core/anomaly_mode.h"

#include <cmath>
#include <sstream>

#include "core/autograd.h"
#include "core/cuda.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace minidl {

namespace detail {

std::atomic<bool> anomaly_mode{false};

namespace {

constexpr const char* kHowToTurnOff = " (anomaly mode is on: set_detect_anomaly(false) turns these checks off)";

std::string describe(const Tensor& t) {
  if (!t.defined()) return "none";
  std::ostringstream os;
  os << t.shape() << " " << t.dtype();
  if (!t.device().is_cpu()) os << " on " << t.device();
  return os.str();
}

bool all_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return true;
  MINIDL_CHECK(!t.device().is_cuda() || !cuda::this_thread_captures(),
               "anomaly mode reads every checked result on the host, which cannot happen while a CUDA graph is being "
               "captured; run the step eagerly (GraphedStepOptions().enabled(false), or --no-cuda-graph in the apps)");
  NoGradGuard no_grad;
  // x - x is 0 for every finite x and NaN for a NaN or an infinity, so its sum is 0 exactly when all
  // are finite: one elementwise kernel, one reduction and one number read back.
  const Tensor x = t.detach();
  const Tensor total = sum(sub(x, x));
  return total.item().toDouble() == 0;  // exact in float64 for every floating dtype
}

// "1 NaN and 2 +inf of 6 values (first at [0, 1])": read on the host, only once a check has failed.
std::string nonfinite_summary(const Tensor& t) {
  const Tensor c = t.detach().to(Device::cpu()).to(kFloat64);
  const std::vector<double> v = c.to_vector<double>();
  int64_t nan = 0, pos_inf = 0, neg_inf = 0, first = -1;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(v[i])) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    if (std::isnan(v[i])) ++nan;
    else if (v[i] > 0) ++pos_inf;
    else ++neg_inf;
  }
  std::vector<int64_t> index(t.shape().size());
  for (size_t d = index.size(), rest = static_cast<size_t>(std::max<int64_t>(first, 0)); d-- > 0;) {
    const auto size = static_cast<size_t>(t.shape()[d]);
    index[d] = static_cast<int64_t>(rest % size);
    rest /= size;
  }
  std::ostringstream os;
  const char* sep = "";
  for (auto [count, what] : {std::pair{nan, "NaN"}, std::pair{pos_inf, "+inf"}, std::pair{neg_inf, "-inf"}}) {
    if (count == 0) continue;
    os << sep << count << " " << what;
    sep = " and ";
  }
  os << " of " << v.size() << " values (the first at " << index << ")";
  return os.str();
}

// Each input with its shape and whether it was finite; `bad_input` is set to the first that was not.
std::string describe_inputs(const std::vector<Tensor>& inputs, int64_t& bad_input) {
  std::ostringstream os;
  bad_input = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    os << (i ? "; " : "") << "input " << i << " " << describe(inputs[i]);
    if (!inputs[i].defined() || !is_floating(inputs[i].dtype())) continue;
    if (all_finite(inputs[i])) {
      os << " (finite)";
    } else {
      os << " (holds " << nonfinite_summary(inputs[i]) << ")";
      if (bad_input < 0) bad_input = static_cast<int64_t>(i);
    }
  }
  return os.str();
}

}  // namespace

void check_forward(const char* name, const Tensor& output, const std::vector<Tensor>& inputs) {
  if (all_finite(output)) return;
  int64_t bad_input = -1;
  const std::string input_text = describe_inputs(inputs, bad_input);
  const std::string origin =
      bad_input >= 0
          ? "its input " + std::to_string(bad_input) +
                " was already non-finite, so the values came from before this op: from the data, a parameter, or "
                "an op that ran without being recorded (anomaly mode checks the ops recorded for backward)"
          : "its inputs were all finite, so this op made them";
  MINIDL_FAIL("anomaly detected in the forward of '", name, "': its output ", describe(output), " holds ",
              nonfinite_summary(output), "; ", origin, ". Inputs: ", input_text, kHowToTurnOff);
}

std::unique_ptr<const std::string> describe_forward(const char* name, const Tensor& output,
                                                    const std::vector<Tensor>& inputs) {
  std::string s = std::string(name) + "(";
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : "") + describe(inputs[i]);
  return std::make_unique<const std::string>(s + ") -> " + describe(output));
}

void check_backward(const char* name, const std::string* forward, const Tensor& grad_output,
                    const std::vector<Tensor>& grads, const std::vector<bool>& wanted) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (i >= wanted.size() || !wanted[i] || all_finite(grads[i])) continue;
    const bool received_finite = all_finite(grad_output);
    MINIDL_FAIL("anomaly detected in the backward of '", name, "': the gradient it computed for its input ", i, ", ",
                describe(grads[i]), ", holds ", nonfinite_summary(grads[i]), "; the gradient it received, ",
                describe(grad_output), ", ",
                received_finite ? std::string("was finite, so this backward made them")
                                : "already held " + nonfinite_summary(grad_output),
                ". The op was recorded in the forward as ",
                forward ? *forward : std::string(name) + " (its shapes are unknown: anomaly mode was off when it ran)",
                kHowToTurnOff);
  }
}

void check_seed(const Tensor& grad) {
  if (all_finite(grad)) return;
  MINIDL_FAIL("anomaly detected in backward(): the gradient passed to it, ", describe(grad), ", holds ",
              nonfinite_summary(grad), kHowToTurnOff);
}

}  // namespace detail

void set_detect_anomaly(bool enabled) { detail::anomaly_mode.store(enabled, std::memory_order_relaxed); }

DetectAnomalyGuard::DetectAnomalyGuard(bool enabled) : previous_(is_anomaly_enabled()) { set_detect_anomaly(enabled); }
DetectAnomalyGuard::~DetectAnomalyGuard() { set_detect_anomaly(previous_); }

}  // namespace minidl
