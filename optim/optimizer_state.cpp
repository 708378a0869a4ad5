// Optimizer::state_dict / load_state_dict: the optimizer's state under the flattened names of
// PyTorch's optimizer.state_dict(), so a checkpoint can hold it beside the model's tensors.
#include <algorithm>
#include <cmath>
#include <set>

#include "ops/copy.h"
#include "optim/optimizer.h"
#include "optim/state_tensors.h"

namespace minidl::optim {
namespace {

std::string group_key(size_t group, const char* what) { return "param_groups." + std::to_string(group) + "." + what; }
std::string state_key(size_t index, const char* field) { return "state." + std::to_string(index) + "." + field; }

// A private copy on `device`: the caller's tensors (another optimizer's live state, say) stay theirs.
Tensor own_copy(const Tensor& t, Device device) {
  Tensor d = t.detach();
  return d.device() == device ? d.clone() : d.to(device);
}

}  // namespace

void Optimizer::restore_into(Tensor& slot, Tensor value) {
  if (slot.defined() && value.defined() && slot.shape() == value.shape() && slot.dtype() == value.dtype() &&
      slot.device() == value.device()) {
    copy_(slot, value);
  } else {
    slot = std::move(value);
  }
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  const std::vector<StateField> fields = state_fields();
  size_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const size_t n = groups_[gi].params.size();
    out[group_key(gi, "lr")] = state_scalar(*groups_[gi].lr);
    Tensor ids = Tensor::empty({static_cast<int64_t>(n)}, kInt64);
    for (size_t i = 0; i < n; ++i) ids.data<int64_t>()[i] = static_cast<int64_t>(index + i);
    out[group_key(gi, "params")] = ids;
    for (size_t i = 0; i < n; ++i) {
      std::vector<Tensor> values = param_state(gi, i);
      for (size_t f = 0; f < values.size(); ++f) out[state_key(index + i, fields[f].name)] = values[f].detach();
    }
    index += n;
  }
  return out;
}

void Optimizer::load_state_dict(const std::map<std::string, Tensor>& state) {
  const std::string where = std::string(name_) + "::load_state_dict: ";
  const std::vector<StateField> fields = state_fields();
  std::set<std::string> used;
  auto find = [&](const std::string& key) -> const Tensor* {
    auto it = state.find(key);
    if (it == state.end()) return nullptr;
    used.insert(key);
    return &it->second;
  };
  auto expect = [&](const std::string& key, const Tensor& t, DType dtype, const Shape& shape, const char* meaning) {
    MINIDL_CHECK(t.defined() && t.dtype() == dtype && t.shape() == shape, where, "\"", key, "\" is ", describe_entry(t),
                 ", expected ", dtype, " of shape ", shape, " (", meaning, ")");
  };

  // Everything is checked and copied into `lrs` and `values` first; the optimizer changes only
  // once nothing can fail.
  std::vector<double> lrs;
  std::vector<std::vector<std::vector<Tensor>>> values(groups_.size());
  size_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::vector<Tensor>& params = groups_[gi].params;
    const std::string lr_key = group_key(gi, "lr"), ids_key = group_key(gi, "params");
    const Tensor* lr = find(lr_key);
    MINIDL_CHECK(lr, where, "missing \"", lr_key, "\": the optimizer has ", groups_.size(), " parameter group(s)");
    expect(lr_key, *lr, kFloat64, {}, "the group's learning rate");
    const double lr_value = lr->item<double>();
    MINIDL_CHECK(std::isfinite(lr_value) && lr_value >= 0, where, "\"", lr_key, "\" is ", lr_value,
                 ", expected a learning rate >= 0");
    lrs.push_back(lr_value);

    const Tensor* ids = find(ids_key);
    MINIDL_CHECK(ids, where, "missing \"", ids_key, "\"");
    expect(ids_key, *ids, kInt64, {static_cast<int64_t>(params.size())}, "the group's parameter indices");
    const std::vector<int64_t> id_values = ids->to_vector<int64_t>();
    for (size_t i = 0; i < params.size(); ++i) {
      MINIDL_CHECK(id_values[i] == static_cast<int64_t>(index + i), where, "\"", ids_key, "\" lists parameter ",
                   id_values[i], " at position ", i, ", expected ", index + i, ": the parameter groups differ");
    }

    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      std::vector<const Tensor*> found;
      for (const StateField& f : fields) found.push_back(find(state_key(index + i, f.name)));
      const bool any = std::any_of(found.begin(), found.end(), [](const Tensor* t) { return t != nullptr; });
      values[gi].emplace_back();
      if (!any) continue;  // no state yet: that parameter never had a step
      for (size_t f = 0; f < fields.size(); ++f) {
        const std::string key = state_key(index + i, fields[f].name);
        MINIDL_CHECK(found[f], where, "missing \"", key, "\" (the parameter's other state is present)");
        if (fields[f].like_param) {
          expect(key, *found[f], p.dtype(), p.shape(), "the parameter's dtype and shape");
          values[gi].back().push_back(own_copy(*found[f], p.device()));
        } else {
          expect(key, *found[f], kInt64, {}, "a count");
          MINIDL_CHECK(found[f]->item<int64_t>() >= 0, where, "\"", key, "\" is ", found[f]->item<int64_t>(),
                       ", expected a count >= 0");
          values[gi].back().push_back(own_copy(*found[f], Device::cpu()));
        }
      }
    }
    index += params.size();
  }
  for (const auto& entry : state) {
    MINIDL_CHECK(used.count(entry.first), where, "unexpected \"", entry.first, "\": the optimizer has ", index,
                 " parameter(s) in ", groups_.size(),
                 " group(s) and keeps no such state (saved by another kind of "
                 "optimizer or with other options?)");
  }

  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    groups_[gi].lr = lrs[gi];
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) set_param_state(gi, i, std::move(values[gi][i]));
  }
}

}  // namespace minidl::optim
