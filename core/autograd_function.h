#pragma once
// Custom autograd functions, as libtorch's: a struct with a static forward (run without recording)
// and a static backward that maps the gradients of its outputs to those of its inputs.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "core/autograd.h"

namespace minidl::autograd {

/// A small tagged value for AutogradContext::saved_data: a double, an int64, a bool, a string or a
/// Tensor, read back with the accessor of its kind (a mismatch is an error naming both kinds).
///   ctx->saved_data["scale"] = 0.5;   double s = ctx->saved_data["scale"].toDouble();
class IValue {
 public:
  IValue() = default;
  IValue(double v) : value_(v) {}  // NOLINT: implicit, as libtorch's
  IValue(bool v) : value_(v) {}    // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  IValue(T v) : value_(static_cast<int64_t>(v)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_floating_point_v<T> && !std::is_same_v<T, double>, int> = 0>
  IValue(T v) : value_(static_cast<double>(v)) {}  // NOLINT
  IValue(std::string v) : value_(std::move(v)) {}  // NOLINT
  IValue(const char* v) : value_(std::string(v)) {}  // NOLINT
  IValue(Tensor v) : value_(std::move(v)) {}  // NOLINT

  bool isNone() const { return value_.index() == 0; }
  bool isDouble() const { return std::holds_alternative<double>(value_); }
  bool isInt() const { return std::holds_alternative<int64_t>(value_); }
  bool isBool() const { return std::holds_alternative<bool>(value_); }
  bool isString() const { return std::holds_alternative<std::string>(value_); }
  bool isTensor() const { return std::holds_alternative<Tensor>(value_); }

  double toDouble() const;
  int64_t toInt() const;
  bool toBool() const;
  const std::string& toStringRef() const;
  Tensor toTensor() const;
  /// "None", "Double", "Int", "Bool", "String" or "Tensor".
  const char* tagKind() const;

 private:
  std::variant<std::monostate, double, int64_t, bool, std::string, Tensor> value_;
};

namespace detail {
struct FunctionRecorder;
}

/// What a custom Function's forward leaves for its backward.
///   ctx->save_for_backward({input, weight});   auto saved = ctx->get_saved_variables();
class AutogradContext {
 public:
  /// Non-tensor values for the backward, by name.
  std::unordered_map<std::string, IValue> saved_data;

  /// Saves tensors (inputs, outputs or others; undefined ones allowed) for the backward. Their
  /// versions are checked before the backward runs, as an op's saved tensors are.
  void save_for_backward(variable_list to_save);
  /// The saved tensors, in order; with create_graph an output saved here comes back with its history.
  variable_list get_saved_variables() const;
  /// Outputs that get no gradient (indices, masks): they do not require grad, and their gradient
  /// in backward is zeros (or undefined without materialized gradients).
  void mark_non_differentiable(const variable_list& outputs);
  /// Whether undefined output gradients reach backward as zeros (default) or as undefined tensors.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  /// Whether forward argument `index` (counting every argument) wants a gradient.
  bool needs_input_grad(size_t index) const;

 private:
  friend struct detail::FunctionRecorder;
  struct Saved {
    Tensor tensor;
    int output = -1;  // >= 0: the Function's output of that index, held as a detached alias
  };
  std::vector<Tensor> to_save_;
  std::vector<Saved> saved_;
  std::unordered_set<const TensorImpl*> non_differentiable_;
  std::vector<bool> needs_input_grad_;
  bool materialize_grads_ = true;
};

namespace detail {

using FunctionBackward = std::function<variable_list(AutogradContext*, variable_list)>;

// The non-template part of Function<T>::apply: records `outputs` (in place) as one entry.
struct FunctionRecorder {
  static void prepare(AutogradContext& ctx, const variable_list& inputs);
  static void finish(const char* name, std::shared_ptr<AutogradContext> ctx, const variable_list& inputs,
                     variable_list& outputs, FunctionBackward backward);
};

// "LinearFunction" + "Backward" from T's type name, without namespaces.
std::string function_node_name(const std::type_info& type);

inline void collect_input(variable_list& inputs, const Tensor& t) { inputs.push_back(t); }
inline void collect_input(variable_list& inputs, const variable_list& ts) {
  inputs.insert(inputs.end(), ts.begin(), ts.end());
}
template <class A>
void collect_input(variable_list& inputs, const A&) {
  inputs.emplace_back();  // a non-tensor argument: its gradient is an undefined Tensor
}

}  // namespace detail

/// A custom autograd function: T has `static R forward(AutogradContext*, args...)` (R a Tensor or a
/// tensor_list), run with grad mode off, and `static tensor_list backward(AutogradContext*,
/// tensor_list grad_outputs)` returning one gradient per forward argument (undefined for non-tensor
/// arguments and inputs that want none). Its node is named "<T>Backward". A backward built from
/// differentiable ops is differentiable again (create_graph).
///   struct MulConstant : Function<MulConstant> { static Tensor forward(...); static tensor_list backward(...); };
///   Tensor y = MulConstant::apply(x, 5.5);
template <class T>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    variable_list inputs;
    (detail::collect_input(inputs, args), ...);
    detail::FunctionRecorder::prepare(*ctx, inputs);
    using Result = decltype(T::forward(ctx.get(), std::forward<Args>(args)...));
    static_assert(std::is_same_v<Result, Tensor> || std::is_same_v<Result, variable_list>,
                  "Function<T>::forward must return a Tensor or a tensor_list");
    variable_list outputs;
    {
      NoGradGuard no_grad;
      if constexpr (std::is_same_v<Result, Tensor>) outputs.push_back(T::forward(ctx.get(), std::forward<Args>(args)...));
      else outputs = T::forward(ctx.get(), std::forward<Args>(args)...);
    }
    static const std::string name = detail::function_node_name(typeid(T));
    detail::FunctionRecorder::finish(name.c_str(), std::move(ctx), inputs, outputs,
                                     [](AutogradContext* c, variable_list g) { return T::backward(c, std::move(g)); });
    if constexpr (std::is_same_v<Result, Tensor>) return outputs[0];
    else return outputs;
  }
};

}  // namespace minidl::autograd
