// cuda::ElementwiseKernel on a GPU. Shapes: the inputs broadcast NumPy-style to the outputs' shape;
// the backward's gradients are summed back to each input's shape (sum_to_shape).
//
// Strided and broadcast inputs are read in place, through their strides (a broadcast axis has
// stride 0), rather than copied into contiguous tensors first: a copy would cost a kernel and the
// memory of the full broadcast shape per input, which is what a fused elementwise kernel is for
// avoiding. Inputs that are all contiguous in the output's shape take the flat loop, without the
// index arithmetic.
#include "ops/elementwise_kernel.h"

#include <algorithm>
#include <optional>

#include "core/autograd.h"
#include "core/cuda.h"
#include "core/cuda/context.h"
#include "ops/creation.h"
#include "ops/cuda/rtc_compiler.h"
#include "ops/cuda/rtc_disk_cache.h"
#include "ops/cuda/rtc_driver.h"
#include "ops/cuda/rtc_program.h"
#include "ops/elementwise_kernel_impl.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl::cuda {

namespace {

using Impl = ElementwiseKernel::Impl;
constexpr int64_t kMaxBlocks = 65535;  // grid-stride loops cover the rest (as ops/cuda/common.cuh)

const char* dtype_constant(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "kFloat32";
    case DType::Float64: return "kFloat64";
    case DType::Int64: return "kInt64";
    case DType::Int32: return "kInt32";
    case DType::Int8: return "kInt8";
    case DType::UInt8: return "kUInt8";
    case DType::Bool: return "kBool";
    case DType::BFloat16: return "kBFloat16";
    case DType::Float16: return "kFloat16";
  }
  return "?";
}

std::string names_of(const std::vector<rtc::KernelParam>& params) {
  std::string out;
  for (const auto& p : params) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

// Checks the inputs against the declaration; returns their device's index.
int check_inputs(const Impl& k, const std::vector<Tensor>& inputs) {
  MINIDL_CHECK(inputs.size() == k.inputs.size(), k.what, ": expected ", k.inputs.size(), " input tensor",
               k.inputs.size() == 1 ? "" : "s", " (", names_of(k.inputs), "), got ", inputs.size());
  int device = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const rtc::KernelParam& p = k.inputs[i];
    MINIDL_CHECK(t.defined(), k.what, ": input ", p.name, " is an undefined tensor");
    MINIDL_CHECK(t.device().is_cuda(), k.what, ": input ", p.name, " is on ", t.device(),
                 "; run-time kernels take CUDA tensors (move it with .to(Device::cuda()))");
    if (device < 0) device = t.device().index;
    MINIDL_CHECK(t.device().index == device, k.what, ": expected every input on one device, but ", k.inputs[0].name,
                 " is on cuda:", device, " and ", p.name, " on ", t.device());
    MINIDL_CHECK(t.dtype() == p.dtype, k.what, ": input ", p.name, " is declared ", rtc::c_type_name(p.dtype),
                 ", which takes a ", p.dtype, " tensor, but got a ", t.dtype(), " tensor; convert it with .to(",
                 dtype_constant(p.dtype), ")");
  }
  return device;
}

// The strided loop's walk (ops/elementwise_kernel_source.h) as int64 words: rank, kMaxWalkDims
// sizes, then kMaxWalkDims strides per read.
struct Walk {
  static constexpr int64_t D = rtc::kMaxWalkDims;
  std::vector<int64_t> words;
  explicit Walk(size_t reads) : words(static_cast<size_t>(1 + D * (1 + static_cast<int64_t>(reads))), 0) {}
  int64_t& rank() { return words[0]; }
  int64_t& size(int64_t d) { return words[static_cast<size_t>(1 + d)]; }
  int64_t& stride(size_t r, int64_t d) { return words[static_cast<size_t>(1 + D * (1 + static_cast<int64_t>(r)) + d)]; }
};

// The output's dims innermost first, size-1 dims dropped, a dim merged into the next inner one where
// every read steps through both as one (the output is contiguous, so it always can), as
// make_strided in ops/cuda/common.cuh. Empty when more than kMaxWalkDims dims remain.
std::optional<Walk> make_walk(const Shape& shape, const std::vector<Tensor>& reads) {
  Walk w(reads.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    const int64_t n = shape[static_cast<size_t>(d)];
    if (n == 1) continue;
    const int64_t last = w.rank() - 1;
    if (last >= 0) {
      bool merge = true;
      for (size_t r = 0; r < reads.size(); ++r)
        merge = merge && reads[r].strides()[static_cast<size_t>(d)] == w.stride(r, last) * w.size(last);
      if (merge) {
        w.size(last) *= n;
        continue;
      }
    }
    if (w.rank() == Walk::D) return std::nullopt;
    w.size(w.rank()) = n;
    for (size_t r = 0; r < reads.size(); ++r) w.stride(r, w.rank()) = reads[r].strides()[static_cast<size_t>(d)];
    ++w.rank();
  }
  return w;
}

// True when the element count and every read's largest offset fit 32-bit indices.
bool fits_32bit(Walk& w, size_t reads, int64_t numel) {
  if (numel >= (int64_t{1} << 31)) return false;
  for (size_t r = 0; r < reads; ++r) {
    int64_t span = 0;
    for (int64_t d = 0; d < w.rank(); ++d) span += (w.size(d) - 1) * w.stride(r, d);
    if (span >= (int64_t{1} << 31)) return false;
  }
  return true;
}

// Runs `generated` over `shape`: `reads` are views of exactly that shape (any strides), `writes`
// new contiguous tensors of it. Loads the program first, so a compile error surfaces even for an
// empty output.
void launch(const rtc::GeneratedSource& generated, int device, const Shape& shape, std::vector<Tensor> reads,
            const std::vector<Tensor>& writes) {
  DeviceGuard guard(device);
  const std::shared_ptr<const rtc::LoadedProgram> program = rtc::load_program(device, generated);
  const int64_t n = shape_numel(shape);
  if (n == 0) return;
  bool flat = std::all_of(reads.begin(), reads.end(), [](const Tensor& t) { return t.is_contiguous(); });
  std::optional<Walk> walk;
  if (!flat) {
    walk = make_walk(shape, reads);
    if (!walk) {
      // More unmergeable dims than the walk holds (rare: 9 or more dims with interleaved
      // strides): copy the reads into the output's layout and take the flat loop.
      NoGradGuard no_grad;
      for (Tensor& r : reads) r = r.contiguous();
      flat = true;
    }
  }
  const bool small = flat ? n < (int64_t{1} << 31) : fits_32bit(*walk, reads.size(), n);
  const int entry = flat ? (small ? rtc::kFlat32 : rtc::kFlat64) : (small ? rtc::kStrided32 : rtc::kStrided64);

  std::vector<void*> pointers;
  for (const Tensor& t : reads) pointers.push_back(t.raw_data());
  for (const Tensor& t : writes) pointers.push_back(t.raw_data());
  std::vector<void*> args;
  for (void*& p : pointers) args.push_back(&p);
  if (!flat) args.push_back(walk->words.data());  // the minidl_walk struct, word for word
  unsigned int n32 = static_cast<unsigned int>(n);
  long long n64 = n;
  args.push_back(small ? static_cast<void*>(&n32) : static_cast<void*>(&n64));

  rtc::make_primary_context_current(device);
  const auto blocks = static_cast<unsigned int>(
      std::clamp<int64_t>((n + rtc::kThreadsPerBlock - 1) / rtc::kThreadsPerBlock, 1, kMaxBlocks));
  CU_CHECK(rtc::driver().launch_kernel(program->functions[static_cast<size_t>(entry)], blocks, 1, 1,
                                       rtc::kThreadsPerBlock, 1, 1, 0, compute_stream(device), args.data(),
                                       nullptr));
}

std::vector<bool> all_stored(const Impl& k) { return std::vector<bool>(k.grad_inputs.size(), true); }

// What the backward of one call needs: the kernel, the backward variant that stores the gradients
// the inputs wanted at the time, and the inputs and outputs its statements name (detached).
struct BackwardState {
  std::shared_ptr<const Impl> kernel;
  std::shared_ptr<const rtc::GeneratedSource> generated;
  std::vector<bool> stored;  // per grad_inputs entry
  std::vector<Tensor> saved_inputs, saved_outputs;
  std::vector<Shape> input_shapes;
  Shape shape;
  int device = 0;
};

// The input gradients from the gradient of floating output number `which` (others taken as zero).
std::vector<Tensor> run_backward(const BackwardState& s, size_t which, const Tensor& grad,
                                 const std::vector<bool>& needs) {
  const Impl& k = *s.kernel;
  const Device device = Device::cuda(s.device);
  NoGradGuard no_grad;
  std::vector<Tensor> reads;
  for (const Tensor& t : s.saved_inputs) reads.push_back(expand(t, s.shape));
  for (const Tensor& t : s.saved_outputs) reads.push_back(t);
  for (size_t q = 0; q < k.grad_outputs.size(); ++q) {
    const DType dtype = k.outputs[k.grad_outputs[q]].dtype;
    if (q != which) {
      reads.push_back(expand(zeros({}, dtype, device), s.shape));
      continue;
    }
    MINIDL_CHECK(grad.dtype() == dtype && grad.device() == device, k.what, ": backward got a ", grad.dtype(),
                 " gradient on ", grad.device(), " for a ", dtype, " output on ", device);
    reads.push_back(expand(grad, s.shape));
  }
  std::vector<Tensor> writes;
  for (size_t j = 0; j < k.grad_inputs.size(); ++j)
    if (s.stored[j]) writes.push_back(Tensor::empty(s.shape, k.inputs[k.grad_inputs[j]].dtype, device));
  launch(*s.generated, s.device, s.shape, reads, writes);
  std::vector<Tensor> grads(k.inputs.size());
  size_t w = 0;
  for (size_t j = 0; j < k.grad_inputs.size(); ++j) {
    if (!s.stored[j]) continue;
    const size_t i = k.grad_inputs[j];
    if (needs[i]) grads[i] = sum_to_shape(writes[w], s.input_shapes[i]);
    ++w;
  }
  return grads;
}

// One tape entry per floating output, each running the backward kernel with that output's gradient
// and zeros for the others: a backward is linear in the output gradients, so the entries' input
// gradients add up to the whole.
void record_backward(const std::shared_ptr<const Impl>& impl, const std::vector<Tensor>& inputs,
                     std::vector<Tensor>& outputs, const Shape& shape, int device) {
  const Impl& k = *impl;
  auto state = std::make_shared<BackwardState>();
  state->kernel = impl;
  for (size_t i : k.grad_inputs) state->stored.push_back(inputs[i].requires_grad());
  state->generated = k.backward_kernel(state->stored);
  {
    DeviceGuard guard(device);
    rtc::load_program(device, *state->generated);  // errors in the backward surface here, in the forward call
  }
  for (size_t i : k.backward_inputs) state->saved_inputs.push_back(inputs[i].detach());
  for (size_t o : k.backward_outputs) state->saved_outputs.push_back(outputs[o].detach());
  for (const Tensor& t : inputs) state->input_shapes.push_back(t.shape());
  state->shape = shape;
  state->device = device;
  for (size_t which = 0; which < k.grad_outputs.size(); ++which) {
    std::vector<Tensor> saved = state->saved_inputs;
    saved.insert(saved.end(), state->saved_outputs.begin(), state->saved_outputs.end());
    autograd::record(k.tape_name, outputs[k.grad_outputs[which]], inputs, saved,
                     [state, which](const Tensor& grad, const std::vector<bool>& needs) {
                       return run_backward(*state, which, grad, needs);
                     });
  }
}

}  // namespace

std::vector<Tensor> ElementwiseKernel::call(const std::vector<Tensor>& inputs) const {
  const Impl& k = *impl_;
  const int device = check_inputs(k, inputs);
  Shape shape = inputs[0].shape();
  for (size_t i = 1; i < inputs.size(); ++i) shape = broadcast_shapes(shape, inputs[i].shape(), k.what.c_str());

  bool record = false;
  if (grad_mode_enabled()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].requires_grad()) continue;
      MINIDL_CHECK(!k.backward.empty(), k.what, ": input ", k.inputs[i].name, " requires grad, but the kernel has no "
                   "backward statements; pass them to the constructor (as {\"g", k.inputs[i].name, " = ...\"}), "
                   "or call it under NoGradGuard or on ", k.inputs[i].name, ".detach()");
      record = record || is_floating(k.inputs[i].dtype);
    }
  }

  std::vector<Tensor> outputs;
  for (const rtc::KernelParam& p : k.outputs) outputs.push_back(Tensor::empty(shape, p.dtype, Device::cuda(device)));
  std::vector<Tensor> reads;
  {
    NoGradGuard no_grad;  // the broadcast views are plumbing, not part of the graph
    for (const Tensor& t : inputs) reads.push_back(expand(t, shape));
  }
  launch(k.forward, device, shape, reads, outputs);
  if (record) record_backward(impl_, inputs, outputs, shape, device);
  return outputs;
}

void ElementwiseKernel::compile(Device device) const {
  MINIDL_CHECK(device.is_cuda(), impl_->what, ": compiles for a CUDA device, got ", device);
  check_device(device.index);
  DeviceGuard guard(device.index);
  rtc::load_program(device.index, impl_->forward);
  if (!impl_->backward.empty()) rtc::load_program(device.index, *impl_->backward_kernel(all_stored(*impl_)));
}

KernelCacheStats kernel_cache_stats() {
  const rtc::CompileCounters& c = rtc::compile_counters();
  return {c.compilations.load(), c.disk_loads.load(), c.disk_rejected.load(), c.disk_writes.load()};
}

void clear_kernel_memory_cache() { rtc::clear_loaded_programs(); }

std::string kernel_cache_dir() { return rtc::kernel_cache_folder(); }

}  // namespace minidl::cuda
