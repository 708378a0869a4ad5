// Buckets hold copies of the gradients rather than being the gradients' memory: .grad keeps its own
// tensor (so optimizers, cuda::GraphedStep's static gradients and zero_grad work unchanged) at the
// price of two device copies per parameter and step, small against the all-reduce itself.
#include "distributed/ddp.h"

#include <algorithm>
#include <sstream>

#include "core/autograd.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace minidl::distributed {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroup& group,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  state_->group = &group;
  MINIDL_CHECK(module_, "DistributedDataParallel: the module is null");
  MINIDL_CHECK(!options.bucket_cap_mb() || *options.bucket_cap_mb() > 0,
               "DistributedDataParallel: bucket_cap_mb must be positive, got ", options.bucket_cap_mb().value_or(0));
  register_module("module", module_);
  NoGradGuard no_grad;
  auto named = module_->named_parameters();
  for (auto& [name, p] : named)
    MINIDL_CHECK(p.device() == group.device(), "DistributedDataParallel: parameter '", name, "' is on ", p.device(),
                 ", but this rank's group is on ", group.device(), "; move the model there first (model->to(device))");
  // Every replica starts from rank 0's values.
  for (auto& [name, p] : named) group.broadcast(p, 0);
  for (auto& [name, b] : module_->named_buffers()) group.broadcast(b, 0);

  // Backward produces gradients roughly in reverse registration order; buckets follow it.
  int64_t total = 0;
  for (auto& [name, p] : named)
    if (p.requires_grad()) total += static_cast<int64_t>(p.nbytes());
  const int64_t cap = options.bucket_cap_mb() ? static_cast<int64_t>(*options.bucket_cap_mb() * 1024 * 1024)
                                              : std::min<int64_t>(25 << 20, std::max<int64_t>(total / 4, 1));
  std::vector<std::vector<Slot>> plan;
  int64_t bytes = 0;
  DType dtype = kFloat32;
  for (auto it = named.rbegin(); it != named.rend(); ++it) {
    Tensor& p = it->second;
    if (!p.requires_grad()) continue;
    if (plan.empty() || bytes + static_cast<int64_t>(p.nbytes()) > cap || p.dtype() != dtype) {
      if (plan.empty() || !plan.back().empty()) plan.emplace_back();
      bytes = 0;
      dtype = p.dtype();
    }
    const int64_t offset = plan.back().empty() ? 0 : plan.back().back().offset + plan.back().back().param.numel();
    plan.back().push_back({p, it->first, offset});
    bytes += static_cast<int64_t>(p.nbytes());
  }
  auto& buckets = state_->buckets;
  for (auto& slots : plan) {
    const int64_t numel = slots.back().offset + slots.back().param.numel();
    buckets.push_back({zeros({numel}, slots.front().param.dtype(), group.device()), std::move(slots), 0});
  }
  std::weak_ptr<State> weak = state_;
  for (size_t b = 0; b < buckets.size(); ++b)
    for (size_t s = 0; s < buckets[b].slots.size(); ++s)
      buckets[b].slots[s].param.register_post_accumulate_grad_hook([weak, b, s](Tensor&) {
        if (auto state = weak.lock()) state->on_gradient(b, s);
      });
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  // A backward that reached only some parameters left the ranks' gradients unaveraged (their buckets
  // never completed); say which parameters got none.
  std::ostringstream unused;
  bool any = false;
  for (Bucket& bucket : state_->buckets)
    for (Slot& slot : bucket.slots) any = any || slot.reached;
  for (Bucket& bucket : state_->buckets) {
    for (Slot& slot : bucket.slots) {
      if (any && !slot.reached) unused << " '" << slot.name << "'";
      slot.reached = false;
    }
    bucket.ready = 0;
  }
  state_->reduced = 0;
  MINIDL_CHECK(unused.str().empty(), "DistributedDataParallel: the last backward gave no gradient to",
               unused.str(), "; every parameter must take part in the loss (or be frozen with requires_grad false)");
  return module_->forward(input);
}

DistributedDataParallel::NoSync DistributedDataParallel::no_sync() { return NoSync(state_); }

void DistributedDataParallel::State::on_gradient(size_t b, size_t s) {
  if (!sync) return;
  Bucket& bucket = buckets[b];
  Slot& slot = bucket.slots[s];
  Tensor into = bucket.flat.slice(0, slot.offset, slot.offset + slot.param.numel()).view(slot.param.shape());
  copy_(into, slot.param.grad());
  slot.reached = true;
  if (++bucket.ready < bucket.slots.size()) return;
  group->all_reduce_overlapped(bucket.flat, ReduceOp::Avg);
  if (++reduced < buckets.size()) return;
  // The last bucket: the compute stream waits for every all-reduce, then the averages go back to .grad.
  group->join();
  for (Bucket& done : buckets) {
    for (Slot& sl : done.slots) {
      Tensor grad = sl.param.grad();
      copy_(grad, done.flat.slice(0, sl.offset, sl.offset + sl.param.numel()).view(sl.param.shape()));
      sl.reached = false;
    }
    done.ready = 0;
  }
  reduced = 0;
}

std::vector<std::vector<std::string>> DistributedDataParallel::buckets() const {
  std::vector<std::vector<std::string>> out;
  for (const Bucket& b : state_->buckets) {
    out.emplace_back();
    for (const Slot& s : b.slots) out.back().push_back(s.name);
  }
  return out;
}

}  // namespace minidl::distributed
