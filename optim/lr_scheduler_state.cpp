// state_dict / load_state_dict of the learning-rate schedules: where a schedule stands, as named
// tensors, so a resumed run continues its schedule instead of starting it again.
#include <cmath>
#include <set>

#include "optim/lr_scheduler.h"
#include "optim/lr_scheduler_chain.h"
#include "optim/lr_scheduler_cyclic.h"
#include "optim/reduce_lr_on_plateau.h"
#include "optim/state_tensors.h"

namespace minidl::optim {

namespace {

using State = std::map<std::string, Tensor>;

// `state` must hold exactly the entries of `expected` (this schedule's own state_dict()), each of
// the same dtype and shape, and finite.
void check_like(const char* name, const State& state, const State& expected) {
  const std::string where = std::string(name) + "::load_state_dict: ";
  for (const auto& [key, want] : expected) {
    auto it = state.find(key);
    MINIDL_CHECK(it != state.end(), where, "missing \"", key, "\"");
    const Tensor& got = it->second;
    MINIDL_CHECK(got.defined() && got.dtype() == want.dtype() && got.shape() == want.shape(), where, "\"", key,
                 "\" is ", describe_entry(got), ", expected ", describe_entry(want));
    if (got.dtype() == kFloat64)
      for (double v : got.to_vector<double>())
        MINIDL_CHECK(std::isfinite(v), where, "\"", key, "\" holds ", v, ", expected finite values");
  }
  for (const auto& [key, value] : state)
    MINIDL_CHECK(expected.count(key), where, "unexpected \"", key, "\": a state of another kind of schedule");
}

std::vector<double> doubles_of(const State& state, const std::string& key) {
  return state.at(key).to_vector<double>();
}

int64_t count_of(const char* name, const State& state, const std::string& key) {
  const int64_t v = state.at(key).item<int64_t>();
  MINIDL_CHECK(v >= 0, name, "::load_state_dict: \"", key, "\" is ", v, ", expected a count >= 0");
  return v;
}

// The entries under "schedulers.K.", without that prefix.
State part(const State& state, size_t k) {
  const std::string prefix = "schedulers." + std::to_string(k) + ".";
  State out;
  for (const auto& [key, value] : state)
    if (key.rfind(prefix, 0) == 0) out.emplace(key.substr(prefix.size()), value);
  return out;
}

void add_parts(State& state, const std::vector<std::shared_ptr<LRScheduler>>& schedulers) {
  for (size_t k = 0; k < schedulers.size(); ++k)
    for (auto& [key, value] : schedulers[k]->state_dict())
      state.emplace("schedulers." + std::to_string(k) + "." + key, value);
}

}  // namespace

State LRScheduler::state_dict() const {
  State state{{"last_epoch", state_scalar<int64_t>(last_epoch_)},
              {"base_lrs", state_doubles(base_lrs_)},
              {"last_lr", state_doubles(last_lr_)}};
  add_state(state);
  return state;
}

void LRScheduler::load_state_dict(const State& state) {
  check_like(name_, state, state_dict());
  check_state(state);
  set_state(state);
}

void LRScheduler::check_state(const State& state) const {
  const int64_t epoch = state.at("last_epoch").item<int64_t>();
  MINIDL_CHECK(epoch >= -1, name_, "::load_state_dict: \"last_epoch\" is ", epoch, ", expected -1 or more");
}

void LRScheduler::set_state(const State& state) {
  last_epoch_ = state.at("last_epoch").item<int64_t>();
  base_lrs_ = doubles_of(state, "base_lrs");
  last_lr_ = doubles_of(state, "last_lr");
}

void SequentialLR::add_state(State& state) const { add_parts(state, schedulers_); }

void SequentialLR::check_state(const State& state) const {
  LRScheduler::check_state(state);
  for (size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->check_state(part(state, k));
}

void SequentialLR::set_state(const State& state) {
  LRScheduler::set_state(state);
  for (size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->set_state(part(state, k));
}

void ChainedScheduler::add_state(State& state) const { add_parts(state, schedulers_); }

void ChainedScheduler::check_state(const State& state) const {
  LRScheduler::check_state(state);
  for (size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->check_state(part(state, k));
}

void ChainedScheduler::set_state(const State& state) {
  LRScheduler::set_state(state);
  for (size_t k = 0; k < schedulers_.size(); ++k) schedulers_[k]->set_state(part(state, k));
}

void CosineAnnealingWarmRestarts::add_state(State& state) const {
  state.emplace("T_cur", state_scalar<double>(t_cur_));
  state.emplace("T_i", state_scalar<int64_t>(t_i_));
}

void CosineAnnealingWarmRestarts::check_state(const State& state) const {
  LRScheduler::check_state(state);
  const double t_cur = state.at("T_cur").item<double>();
  const int64_t t_i = state.at("T_i").item<int64_t>();
  MINIDL_CHECK(t_i > 0 && t_cur >= 0 && t_cur < static_cast<double>(t_i),
               "CosineAnnealingWarmRestarts::load_state_dict: expected 0 <= T_cur < T_i, got T_cur ", t_cur,
               " and T_i ", t_i);
}

void CosineAnnealingWarmRestarts::set_state(const State& state) {
  LRScheduler::set_state(state);
  t_cur_ = state.at("T_cur").item<double>();
  t_i_ = state.at("T_i").item<int64_t>();
}

State ReduceLROnPlateau::state_dict() const {
  return {{"best", state_scalar<double>(best_)},
          {"num_bad_epochs", state_scalar<int64_t>(num_bad_)},
          {"cooldown_counter", state_scalar<int64_t>(cooldown_left_)},
          {"last_lr", state_doubles(last_lr_)}};
}

void ReduceLROnPlateau::load_state_dict(const State& state) {
  State expected = state_dict();
  // "best" is infinite until the first metric: checked apart from the entries that must be finite.
  State finite = state;
  finite.erase("best");
  expected.erase("best");
  check_like("ReduceLROnPlateau", finite, expected);
  auto best = state.find("best");
  MINIDL_CHECK(best != state.end(), "ReduceLROnPlateau::load_state_dict: missing \"best\"");
  MINIDL_CHECK(best->second.defined() && best->second.dtype() == kFloat64 && best->second.dim() == 0,
               "ReduceLROnPlateau::load_state_dict: \"best\" is ", describe_entry(best->second),
               ", expected float64 of shape []");
  MINIDL_CHECK(!std::isnan(best->second.item<double>()), "ReduceLROnPlateau::load_state_dict: \"best\" is NaN");
  const int64_t bad = count_of("ReduceLROnPlateau", state, "num_bad_epochs");
  const int64_t cooldown = count_of("ReduceLROnPlateau", state, "cooldown_counter");
  best_ = best->second.item<double>();
  num_bad_ = bad;
  cooldown_left_ = cooldown;
  last_lr_ = doubles_of(state, "last_lr");
}

}  // namespace minidl::optim
