#pragma once
// Anomaly mode, as torch.autograd.set_detect_anomaly: while it is on, every op recorded for
// backward has its floating output checked for NaN and infinity right after its forward, and every
// backward step has the gradients it computed checked before they go on. The first non-finite value
// throws a minidl::Error that names the op, its shapes, the pass (forward or backward) and, for a
// backward step, the forward op that recorded it. Checking reads one number from the device per
// tensor (a synchronization on CUDA), so it is for hunting a NaN, not for normal training; off,
// it costs one relaxed atomic load per op.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace minidl {

class Tensor;

namespace detail {
extern std::atomic<bool> anomaly_mode;

// The checks the autograd engine (core/autograd_engine.cpp) runs while anomaly mode is on.
/// Throws if the floating `output` of the op `name` holds a NaN or an infinity.
void check_forward(const char* name, const Tensor& output, const std::vector<Tensor>& inputs);
/// "name([2, 3] float32, none) -> [2, 3] float32": kept on the tape entry for a backward error.
std::unique_ptr<const std::string> describe_forward(const char* name, const Tensor& output,
                                                    const std::vector<Tensor>& inputs);
/// Throws if a gradient that `name`'s backward computed for a wanted input is not finite. `forward`
/// is describe_forward's text, or null when the op ran before anomaly mode was turned on.
void check_backward(const char* name, const std::string* forward, const Tensor& grad_output,
                    const std::vector<Tensor>& grads, const std::vector<bool>& wanted);
/// Throws if the gradient given to backward() is not finite.
void check_seed(const Tensor& grad);
}  // namespace detail

/// Turns anomaly mode on or off for every thread.   set_detect_anomaly(true);
void set_detect_anomaly(bool enabled);

/// True while anomaly mode is on.
inline bool is_anomaly_enabled() { return detail::anomaly_mode.load(std::memory_order_relaxed); }

/// Turns anomaly mode on (or off) for its lifetime, then restores what was set before.
///   { DetectAnomalyGuard anomaly; loss = model->forward(x).sum(); loss.backward(); }
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true);
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace minidl
