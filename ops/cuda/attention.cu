// Fused attention on the GPU (the kernel interface of ops/kernels.h): FlashAttention-2's tiling,
// with the scores and probabilities never leaving the chip. bfloat16 and float16 run on tensor
// cores (attention_mma.cuh), float32 on FP32 FMA (attention_simt.cuh); head sizes 32, 64 and 128.
//
// The backward first takes delta = rowsum(dO * O). Then one pass parallel over key blocks writes dK
// and dV, and dQ gets a pass of its own, parallel over query blocks: two more products per tile
// pair, but every gradient is bit-reproducible, and on an H100 (bfloat16, 384 heads of 64, causal,
// no dropout) it was the faster: 0.163 ms against 0.214 at L = 256, 1.46 against 1.91 at L = 1024
// (bench_ops attention, with and without --deterministic). With dropout the 16-bit types run
// FlashAttention-2's single pass instead, which adds dQ into a float32 buffer with atomics (so dQ's
// last bits vary run to run; a last kernel rounds it to the dtype): the dQ pass would draw the
// whole mask a second time. That choice is not measured yet; set_deterministic(true) takes the dQ
// pass there too. Float32's kernel holds each key row in one thread quad's registers, with no
// shared key tile for a block-wide dS K, so it always takes the dQ pass. Nothing here synchronizes
// with the host and the scratch (delta, the float32 dQ) comes from the caching allocator, so the
// calls can be captured in a CUDA graph.
//
// Dropout is fused (attention_mma.cuh's DropoutMask): the forward reserves Philox draws for the
// B x L x S mask from the default generator and records them in rng_state (int64 [3], CPU: seed,
// offset, and the graph's device-side Philox state as an integer, 0 outside capture), from which
// every backward pass redraws the same mask. Kernels for p = 0 are compiled without it.
#include "ops/cuda/attention_simt.cuh"
#include "core/deterministic.h"
#include "core/random.h"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;
using namespace cuda::attention;

// delta[r] = sum over e of grad_out[r, e] * out[r, e] in float32, one warp a row.
template <class T>
__global__ void attention_delta_kernel(const T* __restrict__ grad_out, const T* __restrict__ out, float* delta,
                                       int64_t rows, int e) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  float sum = 0.f;
  for (int i = lane; i < e; i += 32) {
    if constexpr (std::is_same_v<T, float>) sum = fmaf(grad_out[row * e + i], out[row * e + i], sum);
    else sum = fmaf(to_float(grad_out[row * e + i]), to_float(out[row * e + i]), sum);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) delta[row] = sum;
}

// grad_q = dq_accum * scale in the dtype.
template <class T>
__global__ void attention_dq_kernel(const float* __restrict__ dq_accum, T* __restrict__ grad_q, int64_t n,
                                    float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) grad_q[i] = __float2bfloat16(dq_accum[i] * scale);
    else grad_q[i] = __float2half(dq_accum[i] * scale);
  }
}

// Launches pass P of the kernel for element type T (float or a cuda_bf16 / cuda_fp16 type).
template <class T, int E, Pass P, bool Dropout>
void launch_pass(const Params<T>& params, cudaStream_t stream) {
  const int n_rows = rows_are_keys(P) ? params.S : params.L;
  if constexpr (std::is_same_v<T, float>) {
    constexpr int bytes = simt_smem_bytes<E, P>();
    auto kernel = attention_simt_kernel<E, P, Dropout>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const int64_t blocks = int64_t(params.B) * ((n_rows + kSimtBlockRows<E> - 1) / kSimtBlockRows<E>);
    kernel<<<static_cast<unsigned>(blocks), kSimtThreads, bytes, stream>>>(params);
    CUDA_LAUNCH_CHECK(attention_simt_kernel);
  } else {
    constexpr int bytes = smem_bytes<E, P>();
    auto kernel = attention_mma_kernel<T, E, P, Dropout>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const int64_t blocks = int64_t(params.B) * ((n_rows + kRows - 1) / kRows);
    kernel<<<static_cast<unsigned>(blocks), kWarps * 32, bytes, stream>>>(params);
    CUDA_LAUNCH_CHECK(attention_mma_kernel);
  }
}

// Calls fn(tag) with tag of the head size: std::integral_constant<int, 32 | 64 | 128>.
template <class Fn>
void dispatch_head_size(int64_t e, Fn&& fn) {
  switch (e) {
    case 32: fn(std::integral_constant<int, 32>{}); break;
    case 64: fn(std::integral_constant<int, 64>{}); break;
    case 128: fn(std::integral_constant<int, 128>{}); break;
    default: MINIDL_FAIL("fused attention: expected a head size of 32, 64 or 128, got ", e);
  }
}

// Calls fn(tag) with tag = std::bool_constant<dropout>.
template <class Fn>
void dispatch_dropout(bool dropout, Fn&& fn) {
  if (dropout) fn(std::true_type{});
  else fn(std::false_type{});
}

// Calls fn(tag) with tag the kernel's element type for a supported dtype.
template <class Fn>
void dispatch_attention_dtype(DType dtype, Fn&& fn) {
  if (dtype == kFloat32) fn(float{});
  else if (dtype == kBFloat16) fn(__nv_bfloat16{});
  else if (dtype == kFloat16) fn(__half{});
  else MINIDL_FAIL("fused attention: expected float32, bfloat16 or float16, got ", dtype);
}

// cp.async reads 16-byte chunks: a contiguous view that starts off that alignment is copied.
Tensor aligned_16(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0 ? t : t.clone();
}

void check_tensor(const char* what, const Tensor& t, const Shape& shape, DType dtype, Device device) {
  MINIDL_CHECK(t.defined(), "fused attention: ", what, " is undefined");
  MINIDL_CHECK(t.shape() == shape, "fused attention: expected ", what, " of shape ", shape, ", got ", t.shape());
  MINIDL_CHECK(t.dtype() == dtype, "fused attention: expected ", what, " of dtype ", dtype, ", got ", t.dtype());
  MINIDL_CHECK(t.device() == device, "fused attention: expected ", what, " on ", device, ", got ", t.device());
  MINIDL_CHECK(t.is_contiguous(), "fused attention: expected a contiguous ", what);
}

// q [B, L, E], k [B, S, E], v [B, S, E]: the sizes, after checking them.
struct Sizes {
  int64_t B, L, S, E;
};
Sizes check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p) {
  MINIDL_CHECK(dropout_p >= 0 && dropout_p <= 1, "fused attention: expected dropout_p in [0, 1], got ", dropout_p);
  MINIDL_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, "fused attention: expected q, k, v of 3 dims, got ",
               q.shape(), ", ", k.shape(), ", ", v.shape());
  const Sizes s{q.size(0), q.size(1), k.size(1), q.size(2)};
  check_tensor("q", q, {s.B, s.L, s.E}, q.dtype(), q.device());
  check_tensor("k", k, {s.B, s.S, s.E}, q.dtype(), q.device());
  check_tensor("v", v, {s.B, s.S, s.E}, q.dtype(), q.device());
  MINIDL_CHECK(s.E == 32 || s.E == 64 || s.E == 128, "fused attention: expected a head size of 32, 64 or 128, got ",
               s.E);
  MINIDL_CHECK(s.L < (int64_t{1} << 31) && s.S < (int64_t{1} << 31) && s.B < (int64_t{1} << 31),
               "fused attention: expected B, L and S below 2^31, got ", s.B, ", ", s.L, ", ", s.S);
  const int64_t row_blocks = (std::max(s.L, s.S) + kSimtRows - 1) / kSimtRows;
  MINIDL_CHECK(s.B * row_blocks < (int64_t{1} << 31), "fused attention: too many blocks for one launch (B = ", s.B,
               ", L = ", s.L, ", S = ", s.S, ")");
  return s;
}

template <class T>
Params<T> make_params(const Sizes& s, double scale, bool causal) {
  Params<T> p{};
  p.B = static_cast<int>(s.B), p.L = static_cast<int>(s.L), p.S = static_cast<int>(s.S);
  p.scale = static_cast<float>(scale);
  p.causal = causal;
  return p;
}

void check_rng_state(const Tensor& rng_state) {
  MINIDL_CHECK(rng_state.defined() && rng_state.shape() == Shape{3} && rng_state.dtype() == kInt64 &&
                   rng_state.device() == Device::cpu() && rng_state.is_contiguous(),
               "fused attention with dropout: expected rng_state an int64 [3] CPU tensor (seed, offset, device "
               "state), got ",
               rng_state.defined() ? rng_state.shape() : Shape{}, " ", rng_state.defined() ? rng_state.dtype() : kInt64);
}

// The dropout fields of p from rng_state [seed, offset, device state].
template <class T>
void set_dropout(Params<T>& p, const Tensor& rng_state, double dropout_p) {
  const int64_t* state = static_cast<const int64_t*>(rng_state.raw_data());
  p.rng_seed = static_cast<uint64_t>(state[0]);
  p.rng_offset = static_cast<uint64_t>(state[1]);
  p.rng_device_state = reinterpret_cast<const uint64_t*>(static_cast<uintptr_t>(state[2]));
  p.keep_prob = static_cast<float>(1.0 - dropout_p);
  p.inv_keep = dropout_p < 1 ? static_cast<float>(1.0 / (1.0 - dropout_p)) : 0.f;
}

// The keep mask of attention_mma.cuh's DropoutMask as 1 / 0 floats [B, L, S].
__global__ void attention_dropout_mask_kernel(Params<float> p, float* mask) {
  const DropoutMask drop = DropoutMask::make(p);
  const int64_t n = int64_t(p.B) * p.L * p.S;
  for (int64_t x = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; x < n; x += int64_t(gridDim.x) * blockDim.x) {
    const int j = static_cast<int>(x % p.S);
    const int64_t bi = x / p.S;
    mask[x] = drop.keep(static_cast<int>(bi / p.L), static_cast<int>(bi % p.L), j) ? 1.f : 0.f;
  }
}

}  // namespace

bool CudaKernels::fused_attention_supports(DType dtype, int64_t e, int64_t ev, bool dropout) const {
  (void)dropout;  // fused for every supported size
  return e == ev && (e == 32 || e == 64 || e == 128) &&
         (dtype == kFloat32 || dtype == kBFloat16 || dtype == kFloat16);
}

void CudaKernels::attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, double scale,
                                    bool causal, double dropout_p, Tensor& out, Tensor& logsumexp, Tensor& rng_state) {
  const Sizes s = check_inputs(q_in, k_in, v_in, dropout_p);
  check_tensor("out", out, {s.B, s.L, s.E}, q_in.dtype(), q_in.device());
  check_tensor("logsumexp", logsumexp, {s.B, s.L}, kFloat32, q_in.device());
  const bool dropout = dropout_p > 0;
  if (dropout) {
    check_rng_state(rng_state);
    // Four draws (one Philox block) per four keys of a query: attention_mma.cuh's DropoutMask.
    const PhiloxDraw draw = default_generator().philox_draw(static_cast<uint64_t>(s.B * s.L * ((s.S + 3) / 4)) * 4);
    int64_t* state = static_cast<int64_t*>(rng_state.raw_data());
    state[0] = static_cast<int64_t>(draw.seed);
    state[1] = static_cast<int64_t>(draw.offset);
    state[2] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(draw.device_state));
  }
  if (s.B == 0 || s.L == 0) return;
  cuda::DeviceGuard guard(device_);
  if (s.S == 0) {  // every row sees no key
    fill(out, 0.0);
    fill(logsumexp, -INFINITY);
    return;
  }
  const Tensor q = aligned_16(q_in), k = aligned_16(k_in), v = aligned_16(v_in);
  MINIDL_CHECK(reinterpret_cast<uintptr_t>(out.raw_data()) % 16 == 0, "fused attention: expected out 16-byte aligned");
  dispatch_attention_dtype(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Params<T> p = make_params<T>(s, scale, causal);
    p.q = ptr<const T>(q), p.k = ptr<const T>(k), p.v = ptr<const T>(v);
    p.out = ptr<T>(out);
    p.lse = ptr<float>(logsumexp);
    if (dropout) set_dropout(p, rng_state, dropout_p);
    dispatch_head_size(s.E, [&](auto e) {
      dispatch_dropout(dropout, [&](auto drop) {
        launch_pass<T, decltype(e)::value, Pass::kForward, decltype(drop)::value>(p, stream_);
      });
    });
  });
}

void CudaKernels::attention_backward(const Tensor& grad_out_in, const Tensor& q_in, const Tensor& k_in,
                                     const Tensor& v_in, const Tensor& out, const Tensor& logsumexp,
                                     const Tensor& rng_state, double scale, bool causal, double dropout_p,
                                     Tensor& grad_q, Tensor& grad_k, Tensor& grad_v) {
  const Sizes s = check_inputs(q_in, k_in, v_in, dropout_p);
  const bool dropout = dropout_p > 0;
  if (dropout) check_rng_state(rng_state);
  const DType dtype = q_in.dtype();
  const Device device = q_in.device();
  check_tensor("grad_out", grad_out_in, {s.B, s.L, s.E}, dtype, device);
  check_tensor("out", out, {s.B, s.L, s.E}, dtype, device);
  check_tensor("logsumexp", logsumexp, {s.B, s.L}, kFloat32, device);
  check_tensor("grad_q", grad_q, q_in.shape(), dtype, device);
  check_tensor("grad_k", grad_k, k_in.shape(), dtype, device);
  check_tensor("grad_v", grad_v, v_in.shape(), dtype, device);
  for (const Tensor* g : {&grad_q, &grad_k, &grad_v})
    MINIDL_CHECK(reinterpret_cast<uintptr_t>(g->raw_data()) % 16 == 0,
                 "fused attention: expected the gradients 16-byte aligned");
  if (s.B == 0) return;
  cuda::DeviceGuard guard(device_);
  if (s.L == 0 || s.S == 0) {  // no score: every gradient is zero
    if (grad_q.numel()) fill(grad_q, 0.0);
    if (grad_k.numel()) fill(grad_k, 0.0);
    if (grad_v.numel()) fill(grad_v, 0.0);
    return;
  }
  const Tensor q = aligned_16(q_in), k = aligned_16(k_in), v = aligned_16(v_in), grad_out = aligned_16(grad_out_in);
  // Scratch from the caching allocator (a graph's private pool while capturing).
  Tensor delta = Tensor::empty({s.B, s.L}, kFloat32, device);
  dispatch_attention_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = s.B * s.L;
    constexpr int warps = 8;
    attention_delta_kernel<T><<<static_cast<unsigned>((rows + warps - 1) / warps), warps * 32, 0, stream_>>>(
        ptr<const T>(grad_out), ptr<const T>(out), ptr<float>(delta), rows, static_cast<int>(s.E));
    CUDA_LAUNCH_CHECK(attention_delta_kernel);
    Params<T> p = make_params<T>(s, scale, causal);
    p.q = ptr<const T>(q), p.k = ptr<const T>(k), p.v = ptr<const T>(v), p.grad_out = ptr<const T>(grad_out);
    p.lse = ptr<float>(logsumexp);
    p.delta = ptr<const float>(delta);
    if (dropout) set_dropout(p, rng_state, dropout_p);
    dispatch_head_size(s.E, [&](auto e) {
      dispatch_dropout(dropout, [&](auto drop) {
        constexpr int E = decltype(e)::value;
        constexpr bool D = decltype(drop)::value;
        Params<T> kv = p;
        kv.out = ptr<T>(grad_k), kv.out2 = ptr<T>(grad_v);
        if constexpr (!std::is_same_v<T, float>) {
          if (D && !is_deterministic()) {
            Tensor dq_accum = Tensor::empty({s.B, s.L, s.E}, kFloat32, device);
            CUDA_CHECK(cudaMemsetAsync(dq_accum.raw_data(), 0, dq_accum.nbytes(), stream_));
            kv.dq_accum = ptr<float>(dq_accum);
            launch_pass<T, E, Pass::kGradKVQ, D>(kv, stream_);
            attention_dq_kernel<T><<<blocks_for(dq_accum.numel()), kThreads, 0, stream_>>>(
                ptr<const float>(dq_accum), ptr<T>(grad_q), dq_accum.numel(), static_cast<float>(scale));
            CUDA_LAUNCH_CHECK(attention_dq_kernel);
            return;
          }
        }
        launch_pass<T, E, Pass::kGradKV, D>(kv, stream_);
        Params<T> dq = p;
        dq.out = ptr<T>(grad_q);
        launch_pass<T, E, Pass::kGradQ, D>(dq, stream_);
      });
    });
  });
}

namespace cuda {

Tensor attention_dropout_mask(int64_t B, int64_t L, int64_t S, const Tensor& rng_state, double dropout_p,
                              Device device) {
  check_rng_state(rng_state);
  MINIDL_CHECK(device.is_cuda(), "attention_dropout_mask: expected a CUDA device, got ", device);
  Tensor mask = Tensor::empty({B, L, S}, kFloat32, device);
  if (mask.numel() == 0) return mask;
  Params<float> p = make_params<float>(Sizes{B, L, S, 0}, 1.0, false);
  set_dropout(p, rng_state, dropout_p);
  DeviceGuard guard(device.index);
  attention_dropout_mask_kernel<<<blocks_for(mask.numel()), kThreads, 0, compute_stream(device.index)>>>(
      p, ptr<float>(mask));
  CUDA_LAUNCH_CHECK(attention_dropout_mask_kernel);
  return mask;
}

}  // namespace cuda

}  // namespace minidl
