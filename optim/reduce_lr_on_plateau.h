#pragma once
// Lowers the learning rate when a watched metric stops improving, as PyTorch's ReduceLROnPlateau. Its
// step takes a metric, so it is no LRScheduler, and SequentialLR and ChainedScheduler do not take it
// (PyTorch refuses it there too).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace minidl::optim {

struct ReduceLROnPlateauOptions {
  bool maximize = false;     // mode "max": a larger metric is better
  double factor = 0.1;       // new lr = lr * factor
  int64_t patience = 10;     // epochs without improvement tolerated before reducing
  double threshold = 1e-4;   // what counts as an improvement (relative unless threshold_abs)
  bool threshold_abs = false;
  int64_t cooldown = 0;      // epochs to wait after a reduction before counting again
  double min_lr = 0;
  double eps = 1e-8;         // reductions smaller than this are skipped
};

/// After each epoch, step(metric): when the metric has not improved for more than `patience`
/// epochs, every group's lr is multiplied by `factor` (not below min_lr): the lr it has then, so a
/// rate set by hand or by another schedule is the one lowered.
///   optim::ReduceLROnPlateau plateau(optimizer);  ...  plateau.step(validation_loss);
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  void step(double metric);
  /// The rates after the last step() (or at construction), one per group; not one set by hand since.
  ///   double lr = plateau.get_last_lr()[0];
  std::vector<double> get_last_lr() const { return last_lr_; }
  int64_t num_bad_epochs() const { return num_bad_; }
  /// Where it stands (PyTorch's state_dict()): "best" (float64), "num_bad_epochs" and
  /// "cooldown_counter" (int64), "last_lr" (float64, one per group); the options are the
  /// constructor's. load_state_dict checks everything before it changes anything.
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  bool is_better(double metric) const;
  void remember_lrs();

  Optimizer& optimizer_;
  ReduceLROnPlateauOptions options_;
  double best_;
  int64_t num_bad_ = 0, cooldown_left_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace minidl::optim
