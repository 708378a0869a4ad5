#pragma once
// L-BFGS, as PyTorch's torch.optim.LBFGS: a quasi-Newton method that keeps the last history_size
// steps and gradient changes to shape its direction, for full-batch problems. Each step() re-evaluates
// the model through a closure (the loss, after zero_grad and backward) as often as it needs.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nn/options.h"
#include "optim/optimizer.h"

namespace minidl::optim {

struct LBFGSOptions {
  LBFGSOptions(double lr = 1) : lr_(lr) {}  // NOLINT: implicit, as in PyTorch
  MINIDL_ARG(double, lr);
  /// Iterations per step().
  MINIDL_ARG(int64_t, max_iter) = 20;
  /// Closure calls per step(); unset: max_iter * 5 / 4.
  MINIDL_ARG(std::optional<int64_t>, max_eval) = std::nullopt;
  /// Stop when the largest gradient element is at most this.
  MINIDL_ARG(double, tolerance_grad) = 1e-7;
  /// Stop when the step, or the change in loss, is at most this.
  MINIDL_ARG(double, tolerance_change) = 1e-9;
  MINIDL_ARG(int64_t, history_size) = 100;
  /// std::nullopt: a fixed step of lr; "strong_wolfe": a line search meeting the strong Wolfe conditions.
  MINIDL_ARG(std::optional<std::string>, line_search_fn) = std::nullopt;
};

/// The closure: clears the gradients, computes the loss, runs its backward, returns it.
using LossClosure = std::function<Tensor()>;

/// All parameters in one group, of one dtype and device (the search works on them as one vector).
/// Every iteration reads a few values on the host (a device sync on CUDA), so a step cannot be
/// captured in a CUDA graph. The history is kept across step() calls but not by state_dict().
///   optim::LBFGS lbfgs(model->parameters(), optim::LBFGSOptions(1).line_search_fn("strong_wolfe"));
///   lbfgs.step([&] { lbfgs.zero_grad(); Tensor loss = mse_loss(model(x), y); loss.backward(); return loss; });
class LBFGS : public Optimizer {
 public:
  LBFGS(std::vector<Tensor> params, LBFGSOptions options = {});
  /// Up to max_iter iterations; returns the loss the first closure call gave.
  Tensor step(const LossClosure& closure);
  /// Refused: L-BFGS needs a closure.
  void step() override;
  bool capturable() const override { return false; }
  const LBFGSOptions& options() const { return options_; }
  /// Closure calls over every step() so far, and iterations.
  int64_t func_evals() const { return func_evals_; }
  int64_t n_iter() const { return n_iter_; }

 private:
  Tensor flat_grad() const;
  // params += step * direction.
  void add_to_params(double step, const Tensor& direction);
  std::vector<Tensor> clone_params() const;
  void set_params(const std::vector<Tensor>& values);
  // Loss and gradient at params + step * direction, the params put back after.
  std::pair<double, Tensor> evaluate_at(const LossClosure& closure, const std::vector<Tensor>& start, double step,
                                        const Tensor& direction);
  struct Search {
    double loss;
    Tensor grad;
    double step;
    int64_t evals;
  };
  Search strong_wolfe(const LossClosure& closure, double step, const Tensor& direction, double loss,
                      const Tensor& grad, double slope);

  LBFGSOptions options_;
  // Kept across steps, as PyTorch's state.
  Tensor direction_, prev_flat_grad_;
  double step_ = 0, prev_loss_ = 0, h_diag_ = 1;
  std::vector<Tensor> old_dirs_, old_steps_;  // gradient changes y and steps s
  std::vector<double> ro_;                    // 1 / (y . s)
  int64_t func_evals_ = 0, n_iter_ = 0;
};

}  // namespace minidl::optim
