// Custom functions: the context's saved tensors and the one tape entry a Function's outputs share.
#include "core/autograd_function.h"

#include <cxxabi.h>

#include <cstdlib>

#include "ops/creation.h"

namespace minidl::autograd {

namespace {

const char* kind_name(size_t index) {
  static const char* names[] = {"None", "Double", "Int", "Bool", "String", "Tensor"};
  return names[index];
}

}  // namespace

const char* IValue::tagKind() const { return kind_name(value_.index()); }

double IValue::toDouble() const {
  MINIDL_CHECK(isDouble(), "IValue::toDouble: expected Double but got ", tagKind());
  return std::get<double>(value_);
}

int64_t IValue::toInt() const {
  MINIDL_CHECK(isInt(), "IValue::toInt: expected Int but got ", tagKind());
  return std::get<int64_t>(value_);
}

bool IValue::toBool() const {
  MINIDL_CHECK(isBool(), "IValue::toBool: expected Bool but got ", tagKind());
  return std::get<bool>(value_);
}

const std::string& IValue::toStringRef() const {
  MINIDL_CHECK(isString(), "IValue::toStringRef: expected String but got ", tagKind());
  return std::get<std::string>(value_);
}

Tensor IValue::toTensor() const {
  MINIDL_CHECK(isTensor(), "IValue::toTensor: expected Tensor but got ", tagKind());
  return std::get<Tensor>(value_);
}

void AutogradContext::save_for_backward(variable_list to_save) { to_save_ = std::move(to_save); }

variable_list AutogradContext::get_saved_variables() const {
  variable_list out;
  out.reserve(saved_.size());
  for (const Saved& s : saved_)
    out.push_back(s.output >= 0 ? saved_output(s.tensor, static_cast<size_t>(s.output)) : s.tensor);
  return out;
}

void AutogradContext::mark_non_differentiable(const variable_list& outputs) {
  for (const Tensor& t : outputs)
    if (t.defined()) non_differentiable_.insert(&t.impl());
}

bool AutogradContext::needs_input_grad(size_t index) const {
  MINIDL_CHECK(index < needs_input_grad_.size(), "needs_input_grad: index ", index, " is out of range for ",
               needs_input_grad_.size(), " forward arguments");
  return needs_input_grad_[index];
}

namespace detail {

std::string function_node_name(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : type.name();
  std::free(demangled);
  // The struct's own name, as libtorch prints it: no namespaces (those outside template arguments).
  size_t cut = 0, depth = 0;
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    else if (name[i] == '>') --depth;
    else if (depth == 0 && name[i] == ':' && name[i + 1] == ':') cut = i + 2;
  }
  return name.substr(cut) + "Backward";
}

void FunctionRecorder::prepare(AutogradContext& ctx, const variable_list& inputs) {
  ctx.needs_input_grad_.clear();
  for (const Tensor& t : inputs) ctx.needs_input_grad_.push_back(t.defined() && t.requires_grad());
}

void FunctionRecorder::finish(const char* name, std::shared_ptr<AutogradContext> ctx, const variable_list& inputs,
                              variable_list& outputs, FunctionBackward backward) {
  auto same_as_input = [&](const Tensor& t) {
    for (const Tensor& in : inputs)
      if (in.defined() && in.is_same(t)) return true;
    return false;
  };
  // Saved tensors: an output of this Function is kept as a detached alias (a strong handle would
  // keep the entry alive for ever) and given back with its history under create_graph.
  const std::vector<Tensor> returned = outputs;
  for (const Tensor& t : ctx->to_save_) {
    AutogradContext::Saved s{t, -1};
    if (t.defined() && !same_as_input(t))
      for (size_t k = 0; k < returned.size(); ++k)
        if (returned[k].defined() && returned[k].is_same(t)) s.output = static_cast<int>(k);
    ctx->saved_.push_back(std::move(s));
  }
  ctx->to_save_.clear();

  bool any_input_requires_grad = false;
  for (const Tensor& t : inputs) any_input_requires_grad = any_input_requires_grad || (t.defined() && t.requires_grad());
  if (!grad_mode_enabled() || !any_input_requires_grad) return;

  // An output that is an input (or has history) gets its own handle to the same memory, so that
  // recording it changes neither the input nor another graph.
  std::vector<Tensor*> differentiable;
  std::vector<size_t> positions;
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& out = outputs[k];
    if (!out.defined()) continue;
    const bool non_differentiable = ctx->non_differentiable_.count(&returned[k].impl()) > 0;
    if (same_as_input(out) || !out.is_leaf() || out.requires_grad()) out = out.detach();
    if (non_differentiable || !is_floating(out.dtype())) continue;
    differentiable.push_back(&out);
    positions.push_back(k);
  }
  if (differentiable.empty()) return;
  std::vector<Tensor> saved_versions;
  for (AutogradContext::Saved& s : ctx->saved_) {
    if (s.output >= 0) s.tensor = outputs[static_cast<size_t>(s.output)].detach();
    saved_versions.push_back(s.tensor);
  }
  struct Meta {
    Shape shape;
    DType dtype;
    Device device;
  };
  std::vector<Meta> metas;
  for (const Tensor& out : outputs)
    metas.push_back(out.defined() ? Meta{out.shape(), out.dtype(), out.device()} : Meta{{}, kFloat32, Device::cpu()});
  const size_t n_inputs = inputs.size();
  record_multi(name, differentiable, inputs, saved_versions,
               [ctx, backward = std::move(backward), positions, metas, n_inputs, name](
                   const std::vector<Tensor>& grads, const std::vector<bool>& needs) {
                 variable_list grad_outputs(metas.size());
                 for (size_t i = 0; i < positions.size(); ++i) grad_outputs[positions[i]] = grads[i];
                 if (ctx->materialize_grads_)
                   for (size_t k = 0; k < metas.size(); ++k)
                     if (!grad_outputs[k].defined())
                       grad_outputs[k] = zeros(metas[k].shape, metas[k].dtype, metas[k].device);
                 ctx->needs_input_grad_ = needs;
                 variable_list result = backward(ctx.get(), std::move(grad_outputs));
                 // Extra gradients are fine while undefined (a defaulted argument's), as in libtorch.
                 bool extra_defined = false;
                 for (size_t i = n_inputs; i < result.size(); ++i) extra_defined = extra_defined || result[i].defined();
                 if (result.size() > n_inputs && !extra_defined) result.resize(n_inputs);
                 MINIDL_CHECK(result.size() == n_inputs, "function ", name,
                              " returned an incorrect number of gradients (expected ", n_inputs, ", got ",
                              result.size(), ")");
                 for (size_t i = 0; i < n_inputs; ++i)
                   if (!needs[i]) result[i] = Tensor();
                 return result;
               },
               true);
}

}  // namespace detail
}  // namespace minidl::autograd
