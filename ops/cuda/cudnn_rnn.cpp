// cuDNN's RNN (the v8 entry points of cuDNN 9) for ops/rnn.cpp. Each configuration, down to the
// sequence length and batch, gets its descriptors once (cached by key). Parameters stay separate
// tensors, as PyTorch lists them: each call packs them into cuDNN's weight space (one device copy per
// gate matrix and bias, at the addresses cudnnGetRNNWeightParams gives) and the backward unpacks
// the weight space's gradient the same way. Math is FMA for float32 (no TF32), as the convolutions'.
// Dropout between layers is never asked of cuDNN (ops/rnn.cpp composes that case), so the dropout
// descriptor holds 0 and no generator states.
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/cuda.h"
#include "ops/cuda/cudnn_plan.h"

namespace minidl {

using namespace cudnn;

namespace {

struct RnnPlan {
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnDropoutDescriptor_t dropout = nullptr;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t h = nullptr;  // [layers*D, N, H], for h and c alike
  size_t weight_bytes = 0;
  size_t work_bytes[2] = {0, 0}, reserve_bytes[2] = {0, 0};  // by cudnnForwardMode_t
  Tensor seq_lengths;                                        // int32 [N] on the device, all L
  bool ok = false;
  ~RnnPlan() {
    if (x) cudnnDestroyRNNDataDescriptor(x);
    if (y) cudnnDestroyRNNDataDescriptor(y);
    if (h) cudnnDestroyTensorDescriptor(h);
    if (rnn) cudnnDestroyRNNDescriptor(rnn);
    if (dropout) cudnnDestroyDropoutDescriptor(dropout);
  }
};

using RnnKey = std::tuple<int, int, int, int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t>;

// The plan of `c` in `dtype`; ok false where cuDNN refuses the configuration (the caller composes).
RnnPlan& rnn_plan(int device, cudnnHandle_t handle, DType dtype, const Kernels::RnnConfig& c) {
  static std::mutex mutex;
  static auto* plans = new std::map<RnnKey, std::unique_ptr<RnnPlan>>();  // never destroyed: used until exit
  const RnnKey key{device,        static_cast<int>(dtype), c.cell,          c.input_size, c.hidden_size,
                   c.num_layers,  c.bidirectional,         c.has_biases,    c.seq_len,    c.batch};
  std::lock_guard lock(mutex);
  auto& slot = (*plans)[key];
  if (slot) return *slot;
  auto plan = std::make_unique<RnnPlan>();
  RnnPlan& p = *plan;
  slot = std::move(plan);
  const cudnnDataType_t type = cudnn_type(dtype);
  const int directions = c.bidirectional ? 2 : 1;
  const int L = as_int(c.seq_len), N = as_int(c.batch), H = as_int(c.hidden_size);
  CUDNN_CHECK(cudnnCreateDropoutDescriptor(&p.dropout));
  CUDNN_CHECK(cudnnSetDropoutDescriptor(p.dropout, handle, 0.0f, nullptr, 0, 0));
  CUDNN_CHECK(cudnnCreateRNNDescriptor(&p.rnn));
  // A configuration cuDNN does not take (a dtype or size it has no kernel for) leaves ok false.
  if (cudnnSetRNNDescriptor_v8(p.rnn, CUDNN_RNN_ALGO_STANDARD, static_cast<cudnnRNNMode_t>(c.cell),
                               c.has_biases ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
                               c.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, type,
                               type, dtype == DType::Float32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH,
                               as_int(c.input_size), H, H, as_int(c.num_layers), p.dropout,
                               CUDNN_RNN_PADDED_IO_ENABLED) != CUDNN_STATUS_SUCCESS)
    return p;
  const std::vector<int> lengths(static_cast<size_t>(N), L);
  CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&p.x));
  CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&p.y));
  CUDNN_CHECK(cudnnSetRNNDataDescriptor(p.x, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, L, N,
                                        as_int(c.input_size), lengths.data(), nullptr));
  CUDNN_CHECK(cudnnSetRNNDataDescriptor(p.y, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, L, N, directions * H,
                                        lengths.data(), nullptr));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.h));
  const int dims[3] = {as_int(c.num_layers) * directions, N, H}, strides[3] = {N * H, H, 1};
  CUDNN_CHECK(cudnnSetTensorNdDescriptor(p.h, type, 3, dims, strides));
  if (cudnnGetRNNWeightSpaceSize(handle, p.rnn, &p.weight_bytes) != CUDNN_STATUS_SUCCESS) return p;
  for (const cudnnForwardMode_t mode : {CUDNN_FWD_MODE_INFERENCE, CUDNN_FWD_MODE_TRAINING})
    if (cudnnGetRNNTempSpaceSizes(handle, p.rnn, mode, p.x, &p.work_bytes[mode], &p.reserve_bytes[mode]) !=
        CUDNN_STATUS_SUCCESS)
      return p;
  // cuDNN reads the lengths from device memory during its kernels: one copy, when the plan is made.
  p.seq_lengths = Tensor::from_vector<int32_t>(std::vector<int32_t>(lengths.begin(), lengths.end()), {N},
                                               Device::cuda(device));
  p.ok = true;
  return p;
}

// Bytes as a tensor from the caching allocator (a workspace, the weight space, the reserve).
Tensor bytes_on(int device, size_t bytes) {
  return Tensor::empty({static_cast<int64_t>(bytes)}, kUInt8, Device::cuda(device));
}

// Copies between the parameters and cuDNN's weight space `space`, gate matrix by gate matrix:
// into the space (`pack`), or out of it into `params` (each allocated beforehand).
void copy_weights(cudnnHandle_t handle, cudaStream_t stream, const RnnPlan& p, const Kernels::RnnConfig& c,
                  void* space, const std::vector<Tensor>& params, bool pack) {
  const int64_t gates = c.cell == 2 ? 4 : c.cell == 3 ? 3 : 1, H = c.hidden_size;
  const int directions = c.bidirectional ? 2 : 1;
  const size_t per = c.has_biases ? 4 : 2, elem = element_size(params[0].dtype());
  TensorDesc m, b;
  for (int pseudo = 0; pseudo < as_int(c.num_layers) * directions; ++pseudo) {
    const size_t at = static_cast<size_t>(pseudo) * per;
    for (int lin = 0; lin < 2 * gates; ++lin) {
      const bool recurrent = lin >= gates;
      const int64_t gate = recurrent ? lin - gates : lin;
      void* m_addr = nullptr;
      void* b_addr = nullptr;
      CUDNN_CHECK(cudnnGetRNNWeightParams(handle, p.rnn, pseudo, p.weight_bytes, space, lin, m.d, &m_addr, b.d,
                                          &b_addr));
      const Tensor& w = params[at + (recurrent ? 1 : 0)];
      const int64_t cols = w.size(1);
      int n_dims = 0, dims[3] = {0, 0, 0}, strides[3] = {0, 0, 0};
      cudnnDataType_t type{};
      CUDNN_CHECK(cudnnGetTensorNdDescriptor(m.d, 3, &type, &n_dims, dims, strides));
      MINIDL_CHECK(static_cast<int64_t>(dims[0]) * dims[1] * dims[2] == H * cols, "cuDNN RNN: gate matrix ", lin,
                   " of pseudo-layer ", pseudo, " has ", dims[0] * dims[1] * dims[2], " elements, expected ",
                   H * cols);
      char* w_gate = static_cast<char*>(w.raw_data()) + gate * H * cols * static_cast<int64_t>(elem);
      const size_t w_bytes = static_cast<size_t>(H * cols) * elem;
      CUDA_CHECK(cudaMemcpyAsync(pack ? m_addr : w_gate, pack ? w_gate : m_addr, w_bytes, cudaMemcpyDeviceToDevice,
                                 stream));
      if (c.has_biases && b_addr) {
        const Tensor& bias = params[at + (recurrent ? 3 : 2)];
        char* b_gate = static_cast<char*>(bias.raw_data()) + gate * H * static_cast<int64_t>(elem);
        CUDA_CHECK(cudaMemcpyAsync(pack ? b_addr : b_gate, pack ? b_gate : b_addr, static_cast<size_t>(H) * elem,
                                   cudaMemcpyDeviceToDevice, stream));
      }
    }
  }
}

}  // namespace

bool CudaKernels::rnn_cudnn(const RnnConfig& c, const Tensor& x, const Tensor& hx, const Tensor& cx,
                            const std::vector<Tensor>& params, Tensor& y, Tensor& hy, Tensor& cy,
                            std::vector<Tensor>& state) {
  const DType dt = x.dtype();
  if (dt != DType::Float32 && dt != DType::Float64) return false;
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  RnnPlan& p = rnn_plan(device_, handle, dt, c);
  if (!p.ok) return false;
  const bool lstm = c.cell == 2;
  const cudnnForwardMode_t mode = c.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  Tensor weights = bytes_on(device_, p.weight_bytes);
  copy_weights(handle, stream_, p, c, weights.raw_data(), params, true);
  Tensor work = bytes_on(device_, p.work_bytes[mode]);
  Tensor reserve = bytes_on(device_, p.reserve_bytes[mode]);
  CUDNN_CHECK(cudnnRNNForward(handle, p.rnn, mode, p.seq_lengths.data<int32_t>(), p.x, x.raw_data(), p.y,
                              y.raw_data(), p.h, hx.raw_data(), hy.raw_data(), p.h, lstm ? cx.raw_data() : nullptr,
                              lstm ? cy.raw_data() : nullptr, p.weight_bytes, weights.raw_data(), p.work_bytes[mode],
                              work.raw_data(), p.reserve_bytes[mode], reserve.raw_data()));
  if (c.training) state = {weights, reserve};
  return true;
}

bool CudaKernels::rnn_cudnn_backward(const RnnConfig& c, const Tensor& x, const Tensor& hx, const Tensor& cx,
                                     const Tensor& y, const Tensor& dy, const Tensor& dhy, const Tensor& dcy,
                                     const std::vector<Tensor>& params, const std::vector<Tensor>& state,
                                     bool weight_grads, Tensor& dx, Tensor& dhx, Tensor& dcx,
                                     std::vector<Tensor>& dparams) {
  cuda::DeviceGuard guard(device_);
  cudnnHandle_t handle = cudnn_handle(device_);
  RnnPlan& p = rnn_plan(device_, handle, x.dtype(), c);
  MINIDL_CHECK(p.ok && state.size() == 2, "cuDNN RNN backward: no training forward to go back through");
  const bool lstm = c.cell == 2;
  const Tensor& weights = state[0];
  // The backward writes into the reserve; a copy keeps the forward's for a second backward
  // (retain_graph).
  Tensor reserve = bytes_on(device_, p.reserve_bytes[CUDNN_FWD_MODE_TRAINING]);
  if (reserve.numel() > 0)
    CUDA_CHECK(cudaMemcpyAsync(reserve.raw_data(), state[1].raw_data(), reserve.nbytes(), cudaMemcpyDeviceToDevice,
                               stream_));
  Tensor work = bytes_on(device_, p.work_bytes[CUDNN_FWD_MODE_TRAINING]);
  dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  dhx = Tensor::empty(hx.shape(), hx.dtype(), hx.device());
  if (lstm) dcx = Tensor::empty(cx.shape(), cx.dtype(), cx.device());
  CUDNN_CHECK(cudnnRNNBackwardData_v8(
      handle, p.rnn, p.seq_lengths.data<int32_t>(), p.y, y.raw_data(), dy.raw_data(), p.x, dx.raw_data(), p.h,
      hx.raw_data(), dhy.defined() ? dhy.raw_data() : nullptr, dhx.raw_data(), p.h, lstm ? cx.raw_data() : nullptr,
      lstm && dcy.defined() ? dcy.raw_data() : nullptr, lstm ? dcx.raw_data() : nullptr, p.weight_bytes,
      weights.raw_data(), work.nbytes(), work.raw_data(), reserve.nbytes(), reserve.raw_data()));
  if (weight_grads) {
    // cuDNN adds into the weight gradient (the only mode it supports), so it starts at zero.
    Tensor dweights = bytes_on(device_, p.weight_bytes);
    CUDA_CHECK(cudaMemsetAsync(dweights.raw_data(), 0, dweights.nbytes(), stream_));
    CUDNN_CHECK(cudnnRNNBackwardWeights_v8(handle, p.rnn, CUDNN_WGRAD_MODE_ADD, p.seq_lengths.data<int32_t>(), p.x,
                                           x.raw_data(), p.h, hx.raw_data(), p.y, y.raw_data(), p.weight_bytes,
                                           dweights.raw_data(), work.nbytes(), work.raw_data(), reserve.nbytes(),
                                           reserve.raw_data()));
    dparams.clear();
    for (const Tensor& w : params) dparams.push_back(Tensor::empty(w.shape(), w.dtype(), w.device()));
    copy_weights(handle, stream_, p, c, dweights.raw_data(), dparams, false);
  }
  return true;
}

}  // namespace minidl
