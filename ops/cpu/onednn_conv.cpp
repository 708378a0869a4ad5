// Convolutions on oneDNN (Kernels::conv2d_onednn and its two gradients), float32 only.
//
// oneDNN's JIT kernels work on blocked layouts (nChw16c) with the window in registers instead of a
// [K, L] column buffer per image: with them the MNIST CNN at batch 64 went from 1,643 to 2,368
// img/s on 2 AVX-512 cores (`bench --model cnn`, docs/benchmarks.md says what each step gave).
//
// minidl's CPU results must not depend on the thread count. The forward and the input gradient give
// the same bits for any count (each output is summed by one thread; checked for 1 to 4). The weight
// gradient splits its sum over the batch across threads, so it always runs with one fixed count, the
// machine's cores (kWeightThreads below), whatever set_num_threads says.
//
// minidl's tensors are plain NCHW and OIHW; the primitives pick their own layouts ("any"), and a
// reorder converts on the way in and out where they differ. Primitives are made once per shape
// and kept; a primitive runs one call at a time (each shape's own lock). Their scratch memory and
// the converted copies come from minidl's CPU allocator (Scratch).
#include "ops/backend_setting.h"
#include "ops/cpu/cpu_kernels.h"

#if MINIDL_WITH_ONEDNN

#include <dnnl.hpp>
#include <omp.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace minidl {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct ConvPrimitives {
  dnnl::convolution_forward::primitive_desc forward_pd;
  dnnl::convolution_backward_data::primitive_desc backward_data_pd;
  dnnl::convolution_backward_weights::primitive_desc backward_weights_pd;
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
  std::mutex running;
};

// oneDNN on OpenMP sizes its work split by omp_get_max_threads(), when a primitive is made and when
// it runs: this sets that for a scope, then puts back the caller's count.
class OmpThreads {
 public:
  explicit OmpThreads(int threads) : previous_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~OmpThreads() { omp_set_num_threads(previous_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int previous_;
};

const int kWeightThreads = omp_get_num_procs();

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

ConvPrimitives& primitives_for(int64_t n, int64_t o, const ConvGeometry& g) {
  using Key = std::array<int64_t, 13>;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<ConvPrimitives>> cache;
  const Key key{n, g.channels, g.height, g.width, o, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w,
                g.pad_h, g.pad_w, g.dilation_h, g.dilation_w};
  std::lock_guard lock(mutex);
  std::unique_ptr<ConvPrimitives>& p = cache[key];
  if (p) return *p;
  const memory::dims x_dims{n, g.channels, g.height, g.width}, w_dims{o, g.channels, g.kernel_h, g.kernel_w},
      y_dims{n, o, g.out_h, g.out_w}, strides{g.stride_h, g.stride_w}, padding{g.pad_h, g.pad_w},
      dilation{g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps between taps
  const memory::desc x_any(x_dims, memory::data_type::f32, Tag::any), w_any(w_dims, memory::data_type::f32, Tag::any),
      y_any(y_dims, memory::data_type::f32, Tag::any);
  auto& engine = cpu_engine();
  auto forward = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                 dnnl::algorithm::convolution_direct, x_any, w_any, y_any, strides,
                                                 dilation, padding, padding);
  // The primitives' scratch memory comes from the caller too (Scratch below), not from oneDNN.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto forward_pd = dnnl::convolution_forward::primitive_desc(forward, attr, engine);
  auto backward = dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, x_any, w_any, y_any,
                                                        strides, dilation, padding, padding);
  auto backward_pd = dnnl::convolution_backward_data::primitive_desc(backward, attr, engine, forward_pd);
  auto weights = dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, x_any, w_any, y_any,
                                                          strides, dilation, padding, padding);
  const OmpThreads fixed(kWeightThreads);
  auto weights_pd = dnnl::convolution_backward_weights::primitive_desc(weights, attr, engine, forward_pd);
  p.reset(new ConvPrimitives{forward_pd, backward_pd, weights_pd, dnnl::convolution_forward(forward_pd),
                             dnnl::convolution_backward_data(backward_pd),
                             dnnl::convolution_backward_weights(weights_pd), {}});
  return *p;
}

memory plain(const Tensor& t, Tag tag) {
  memory::dims dims(t.shape().begin(), t.shape().end());
  return memory({dims, memory::data_type::f32, tag}, cpu_engine(), const_cast<void*>(t.raw_data()));
}

// A oneDNN memory in the layout `desc`, its bytes from minidl's CPU allocator, which keeps freed
// blocks for the next step (oneDNN's own allocation would map and fault in fresh pages every call).
struct Scratch {
  Tensor storage;
  memory mem;
  explicit Scratch(const memory::desc& desc)
      : storage(Tensor::empty({static_cast<int64_t>((desc.get_size() + 3) / 4)}, kFloat32, Device::cpu())),
        mem(desc, cpu_engine(), storage.raw_data()) {}
};

// `user` in the layout `wanted`: itself where the layouts agree, else a reordered copy in `scratch`.
memory as_layout(const memory& user, const memory::desc& wanted, dnnl::stream& stream, std::optional<Scratch>& scratch) {
  if (user.get_desc() == wanted) return user;
  scratch.emplace(wanted);
  dnnl::reorder(user, scratch->mem).execute(stream, const_cast<memory&>(user), scratch->mem);
  return scratch->mem;
}

// An output in the user's plain layout, written through a scratch copy in the layout `wanted`
// where the two differ; finish() converts it back.
struct Output {
  memory user;
  std::optional<Scratch> scratch;
  Output(const Tensor& t, Tag tag, const memory::desc& wanted) : user(plain(t, tag)) {
    if (user.get_desc() != wanted) scratch.emplace(wanted);
  }
  memory mem() const { return scratch ? scratch->mem : user; }
  void finish(dnnl::stream& stream) {
    if (scratch) dnnl::reorder(scratch->mem, user).execute(stream, scratch->mem, user);
  }
};

// Runs `body` turning oneDNN's exceptions into minidl::Error, naming the op.
template <class Body>
void guarded(const char* op, Body&& body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    MINIDL_FAIL(op, " on oneDNN: ", e.what());
  }
}

}  // namespace

bool onednn_available() { return true; }

bool CpuKernels::conv2d_onednn(const Tensor& x, const Tensor& weight, const ConvGeometry& g, Tensor& out) {
  if (x.dtype() != kFloat32) return false;
  guarded("conv2d", [&] {
    ConvPrimitives& p = primitives_for(x.size(0), weight.size(0), g);
    std::lock_guard lock(p.running);
    dnnl::stream stream(cpu_engine());
    std::optional<Scratch> x_scratch, w_scratch;
    const memory src = as_layout(plain(x, Tag::nchw), p.forward_pd.src_desc(), stream, x_scratch);
    const memory w = as_layout(plain(weight, Tag::oihw), p.forward_pd.weights_desc(), stream, w_scratch);
    Output y(out, Tag::nchw, p.forward_pd.dst_desc());
    const Scratch pad(p.forward_pd.scratchpad_desc());
    p.forward.execute(stream,
                      {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y.mem()}, {DNNL_ARG_SCRATCHPAD, pad.mem}});
    y.finish(stream);
    stream.wait();
  });
  return true;
}

bool CpuKernels::conv2d_backward_data_onednn(const Tensor& grad_out, const Tensor& weight, const ConvGeometry& g,
                                             Tensor& grad_x) {
  if (grad_out.dtype() != kFloat32) return false;
  guarded("conv2d backward", [&] {
    ConvPrimitives& p = primitives_for(grad_out.size(0), weight.size(0), g);
    std::lock_guard lock(p.running);
    dnnl::stream stream(cpu_engine());
    std::optional<Scratch> gy_scratch, w_scratch;
    const memory gy = as_layout(plain(grad_out, Tag::nchw), p.backward_data_pd.diff_dst_desc(), stream, gy_scratch);
    const memory w = as_layout(plain(weight, Tag::oihw), p.backward_data_pd.weights_desc(), stream, w_scratch);
    Output gx(grad_x, Tag::nchw, p.backward_data_pd.diff_src_desc());
    const Scratch pad(p.backward_data_pd.scratchpad_desc());
    p.backward_data.execute(stream, {{DNNL_ARG_DIFF_DST, gy}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, gx.mem()},
                                     {DNNL_ARG_SCRATCHPAD, pad.mem}});
    gx.finish(stream);
    stream.wait();
  });
  return true;
}

bool CpuKernels::conv2d_backward_weights_onednn(const Tensor& grad_out, const Tensor& x, const ConvGeometry& g,
                                                Tensor& grad_weight) {
  if (grad_out.dtype() != kFloat32) return false;
  guarded("conv2d backward", [&] {
    ConvPrimitives& p = primitives_for(x.size(0), grad_out.size(1), g);
    std::lock_guard lock(p.running);
    const OmpThreads fixed(kWeightThreads);
    dnnl::stream stream(cpu_engine());
    std::optional<Scratch> x_scratch, gy_scratch;
    const memory src = as_layout(plain(x, Tag::nchw), p.backward_weights_pd.src_desc(), stream, x_scratch);
    const memory gy = as_layout(plain(grad_out, Tag::nchw), p.backward_weights_pd.diff_dst_desc(), stream, gy_scratch);
    Output gw(grad_weight, Tag::oihw, p.backward_weights_pd.diff_weights_desc());
    const Scratch pad(p.backward_weights_pd.scratchpad_desc());
    p.backward_weights.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, gy}, {DNNL_ARG_DIFF_WEIGHTS, gw.mem()},
                                        {DNNL_ARG_SCRATCHPAD, pad.mem}});
    gw.finish(stream);
    stream.wait();
  });
  return true;
}

}  // namespace minidl

#else  // built without oneDNN: every convolution takes the im2col kernels

namespace minidl {

bool onednn_available() { return false; }
bool CpuKernels::conv2d_onednn(const Tensor&, const Tensor&, const ConvGeometry&, Tensor&) { return false; }
bool CpuKernels::conv2d_backward_data_onednn(const Tensor&, const Tensor&, const ConvGeometry&, Tensor&) {
  return false;
}
bool CpuKernels::conv2d_backward_weights_onednn(const Tensor&, const Tensor&, const ConvGeometry&, Tensor&) {
  return false;
}

}  // namespace minidl

#endif
