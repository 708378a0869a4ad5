// cuda::ElementwiseKernel on the host: parsing, checking and generating at construction, in every
// build, so that a bad parameter list or backward fails where it is written, GPU or not. Running
// it is ops/cuda/elementwise_kernel.cpp (or ops/elementwise_kernel_nocuda.cpp without CUDA).
#include "ops/elementwise_kernel.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_set>

#include "ops/elementwise_kernel_impl.h"

namespace minidl::cuda {

namespace {

bool blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); });
}

// The tape keeps an op's name as a pointer for as long as the process runs (its tombstones name
// the op), so each kernel name is stored once, for good.
const char* intern(const std::string& name) {
  static std::mutex mutex;
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(name).first->c_str();
}

std::string gradient_name(const rtc::KernelParam& p) { return "g" + p.name; }

void check_backward(ElementwiseKernel::Impl& k) {
  const std::string& what = k.what;
  for (size_t s = 0; s < k.backward.size(); ++s)
    MINIDL_CHECK(!blank(k.backward[s]), what, ": backward statement ", s + 1, " is empty");
  MINIDL_CHECK(!k.grad_inputs.empty(), what, ": has backward statements but no floating (float or double) input to "
                                             "differentiate");
  MINIDL_CHECK(!k.grad_outputs.empty(), what, ": has backward statements but no floating (float or double) output "
                                              "to take a gradient from");
  std::string all;
  for (const std::string& s : k.backward) all += s + "\n";
  const std::set<std::string> used = rtc::identifiers_in(all);
  std::vector<std::string> declared;
  for (const auto& p : k.inputs) declared.push_back(p.name);
  for (const auto& p : k.outputs) declared.push_back(p.name);
  auto check_gradient_name = [&](const rtc::KernelParam& p, const char* kind) {
    const std::string g = gradient_name(p);
    MINIDL_CHECK(std::find(declared.begin(), declared.end(), g) == declared.end(), what, ": the gradient of ", kind,
                 " ", p.name, " is called ", g, " in the backward statements, but a parameter has that name; "
                 "rename it");
  };
  for (size_t o : k.grad_outputs) check_gradient_name(k.outputs[o], "output");
  for (size_t i : k.grad_inputs) {
    check_gradient_name(k.inputs[i], "input");
    MINIDL_CHECK(used.count(gradient_name(k.inputs[i])), what, ": no backward statement assigns ",
                 gradient_name(k.inputs[i]), ", the gradient of input ", k.inputs[i].name,
                 " (write \"", gradient_name(k.inputs[i]), " = 0\" if it has none)");
  }
  for (size_t i = 0; i < k.inputs.size(); ++i)
    if (used.count(k.inputs[i].name)) k.backward_inputs.push_back(i);
  for (size_t o = 0; o < k.outputs.size(); ++o)
    if (used.count(k.outputs[o].name)) k.backward_outputs.push_back(o);
  const size_t operands =
      k.backward_inputs.size() + k.backward_outputs.size() + k.grad_outputs.size() + k.grad_inputs.size();
  MINIDL_CHECK(operands <= static_cast<size_t>(rtc::kMaxOperands), what, ": its backward kernel would take ", operands,
               " tensors; at most ", rtc::kMaxOperands, " are supported");
}

}  // namespace

ElementwiseKernel::ElementwiseKernel(const std::string& in_params, const std::string& out_params,
                                     const std::string& body, const std::string& name,
                                     const std::vector<std::string>& backward) {
  auto k = std::make_shared<Impl>();
  k->what = "cuda::ElementwiseKernel \"" + name + "\"";
  MINIDL_CHECK(rtc::is_identifier(name) && !rtc::is_reserved_name(name), k->what,
               ": the name must be a C identifier that is no keyword and does not start with minidl_ (it names the "
               "compiled kernels and their cache files)");
  k->name = name;
  k->tape_name = intern(name);
  k->inputs = rtc::parse_kernel_params(in_params, "input parameter list", k->what);
  k->outputs = rtc::parse_kernel_params(out_params, "output parameter list", k->what);
  MINIDL_CHECK(!k->inputs.empty(), k->what, ": expected at least one input parameter (\"float x\"), got \"", in_params,
               "\": the inputs decide the outputs' shape and device");
  MINIDL_CHECK(!k->outputs.empty(), k->what, ": expected at least one output parameter (\"float z\"), got \"",
               out_params, "\"");
  for (const auto& out : k->outputs)
    for (const auto& in : k->inputs)
      MINIDL_CHECK(in.name != out.name, k->what, ": ", in.name, " is both an input and an output parameter");
  const size_t operands = k->inputs.size() + k->outputs.size();
  MINIDL_CHECK(operands <= static_cast<size_t>(rtc::kMaxOperands), k->what, ": ", operands,
               " parameters; at most ", rtc::kMaxOperands, " inputs and outputs together are supported");
  MINIDL_CHECK(!blank(body), k->what, ": the body is empty; it should assign the outputs, as \"z = x * y\"");
  k->body = body;

  rtc::ElementwiseSpec spec{name, k->inputs, k->outputs, std::vector<bool>(k->outputs.size(), true), {body}, name};
  k->forward = rtc::generate_elementwise_kernel(spec, k->what);

  k->backward = backward;
  for (size_t i = 0; i < k->inputs.size(); ++i)
    if (is_floating(k->inputs[i].dtype)) k->grad_inputs.push_back(i);
  for (size_t o = 0; o < k->outputs.size(); ++o)
    if (is_floating(k->outputs[o].dtype)) k->grad_outputs.push_back(o);
  if (!backward.empty()) check_backward(*k);
  impl_ = std::move(k);
}

rtc::ElementwiseSpec ElementwiseKernel::Impl::backward_spec(const std::vector<bool>& stored) const {
  rtc::ElementwiseSpec spec;
  spec.name = name + "_backward";
  spec.label = name + ".backward";
  for (size_t i : backward_inputs) spec.reads.push_back(inputs[i]);
  for (size_t o : backward_outputs) spec.reads.push_back(outputs[o]);
  for (size_t o : grad_outputs) spec.reads.push_back({outputs[o].dtype, gradient_name(outputs[o])});
  for (size_t i : grad_inputs) spec.writes.push_back({inputs[i].dtype, gradient_name(inputs[i])});
  spec.stored = stored;
  spec.body = backward;
  return spec;
}

std::shared_ptr<const rtc::GeneratedSource> ElementwiseKernel::Impl::backward_kernel(
    const std::vector<bool>& stored) const {
  std::lock_guard<std::mutex> lock(backward_mutex);
  auto& slot = backward_kernels[stored];
  if (!slot) {
    slot = std::make_shared<rtc::GeneratedSource>(rtc::generate_elementwise_kernel(backward_spec(stored), what));
  }
  return slot;
}

const std::string& ElementwiseKernel::name() const { return impl_->name; }
int ElementwiseKernel::num_inputs() const { return static_cast<int>(impl_->inputs.size()); }
int ElementwiseKernel::num_outputs() const { return static_cast<int>(impl_->outputs.size()); }
bool ElementwiseKernel::differentiable() const { return !impl_->backward.empty(); }
std::string ElementwiseKernel::source() const { return impl_->forward.source; }

std::string ElementwiseKernel::backward_source() const {
  if (impl_->backward.empty()) return "";
  return impl_->backward_kernel(std::vector<bool>(impl_->grad_inputs.size(), true))->source;
}

Tensor ElementwiseKernel::operator()(const std::vector<Tensor>& inputs) const {
  MINIDL_CHECK(impl_->outputs.size() == 1, impl_->what, ": has ", impl_->outputs.size(),
               " outputs; call(inputs) returns them all");
  return call(inputs).front();
}

}  // namespace minidl::cuda
