#pragma once
// DistributedDataParallel: the same model on every rank, each rank training on its own share of the
// batch, with gradients averaged across ranks during backward, as torch.nn.parallel's DDP.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"

namespace minidl::distributed {

struct DistributedDataParallelOptions {
  /// Gradients are averaged in buckets of about this many megabytes: a bucket's all-reduce starts as
  /// soon as backward has produced all of its gradients, while backward goes on. Default: PyTorch's
  /// 25, or a quarter of the model's gradients where that is smaller, so that a small model's
  /// communication overlaps the rest of its backward too.
  DistributedDataParallelOptions& bucket_cap_mb(double mb) {
    bucket_cap_mb_ = mb;
    return *this;
  }
  std::optional<double> bucket_cap_mb() const { return bucket_cap_mb_; }

 private:
  std::optional<double> bucket_cap_mb_;
};

/// Wraps a model already on this rank's GPU. Construction copies rank 0's parameters and buffers to
/// every rank; each backward then leaves every rank with the average of all ranks' gradients, so the
/// same optimizer step keeps the replicas bitwise identical. The gradients are bucketed in reverse
/// registration order (the order backward produces them), each bucket averaged by one NCCL all-reduce
/// on a communication stream that overlaps the rest of backward; the compute stream waits for them
/// before the gradients are read. Works inside cuda::GraphedStep (the all-reduces are captured).
/// Every backward through the model must reach every parameter (an unused one is reported by the
/// next forward) and all ranks must run the same steps.
///   auto ddp = std::make_shared<distributed::DistributedDataParallel>(model);
///   optim::SGD opt(ddp->parameters(), 0.01);   loss = criterion(ddp->forward(x), y); loss.backward();
class DistributedDataParallel : public nn::Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group = distributed::group(),
                                   DistributedDataParallelOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "DistributedDataParallel"; }
  std::shared_ptr<nn::Module> module() const { return module_; }
  /// While the returned guard lives, backwards communicate nothing: each rank sums its gradients
  /// into .grad as usual, and the first backward after the guard averages the sums (gradient
  /// accumulation over several micro-batches with one all-reduce, as PyTorch's DDP.no_sync()).
  ///   { auto local = ddp->no_sync(); loss_fn(ddp->forward(x1), y1).backward(); }
  ///   loss_fn(ddp->forward(x2), y2).backward();   // every rank: the average of both micro-batches
  class NoSync;
  [[nodiscard]] NoSync no_sync();
  /// Buckets, and the parameter names in each (for tests and for the docs' figures).
  std::vector<std::vector<std::string>> buckets() const;

 private:
  struct Slot {
    Tensor param;
    std::string name;
    int64_t offset;
    bool reached = false;  // this backward gave it a gradient
  };
  struct Bucket {
    Tensor flat;  // the bucket's gradients, one after another
    std::vector<Slot> slots;
    size_t ready = 0;
  };
  // What the parameters' hooks reach: they hold it weakly, so hooks outliving the wrapper do nothing.
  struct State {
    ProcessGroup* group;
    std::vector<Bucket> buckets;
    size_t reduced = 0;  // buckets whose all-reduce this backward has started
    bool sync = true;    // false inside no_sync()
    void on_gradient(size_t bucket, size_t slot);
  };

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<State> state_;
};

class DistributedDataParallel::NoSync {
 public:
  explicit NoSync(const std::shared_ptr<State>& state) : state_(state), before_(state->sync) { state->sync = false; }
  ~NoSync() {
    if (auto state = state_.lock()) state->sync = before_;
  }
  NoSync(const NoSync&) = delete;
  NoSync& operator=(const NoSync&) = delete;

 private:
  std::weak_ptr<State> state_;
  bool before_;
};

}  // namespace minidl::distributed
