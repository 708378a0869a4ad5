// Fused attention on the GPU (the kernel interface of ops/kernels.h): FlashAttention-2's tiling,
// with the scores and probabilities never leaving the chip, on tensor cores (attention_mma.cuh):
// bfloat16 and float16 directly, float32 to float32 accuracy as three TF32 products each, as
// PyTorch's float32 attention computes it; head sizes 32, 64 and 128.
//
// The kernels read q, k, v and dO in place, as PyTorch's flash attention does: any [B1, B2, rows, E]
// view with a unit last stride (attention_mma.cuh's HeadLayout), e.g. the [batch, heads] views of a
// packed qkv projection, with no copy before the launch. Their rows must start on 16 bytes (the
// cp.async and float4 loads); an input that does not is copied first. The outputs are written
// through their own layouts, so the op can give out, dQ, dK and dV PyTorch's [B1, rows, B2, E]
// memory, whose transpose(1, 2) (the heads merged back) is contiguous. logsumexp, delta and the
// float32 dQ buffer are contiguous [B, L] / [B, L, E].
//
// The backward first takes delta = rowsum(dO * O). Then one pass parallel over key blocks writes dK
// and dV, and dQ gets a pass of its own, parallel over query blocks, on the side stream beside it
// (on an H200, bfloat16 forward + backward at L = 256 went from 0.158 to 0.150 ms): two more
// products per tile pair, but every gradient is bit-reproducible, and on an H100 (bfloat16, 384
// heads of 64, causal, no dropout) it was the faster: 0.163 ms against 0.214 at L = 256, 1.46
// against 1.91 at L = 1024 (bench_ops attention, with and without --deterministic). The same holds
// with dropout, where the forward stores its mask for the backward (as the op has it): on an H200
// (bfloat16, dropout 0.2) 0.207 ms against 0.215 with atomics at L = 256, 2.00 against 2.04 at
// L = 1024. Where the
// backward must redraw the mask (no stored one: the kernels called directly), the 16-bit types run
// FlashAttention-2's single pass instead, which adds dQ into a float32 buffer with atomics (so dQ's
// last bits vary run to run; a last kernel rounds it to the dtype), and which draws the mask once
// fewer; set_deterministic(true) takes the dQ pass there too. Float32 always takes the dQ pass (the
// atomic dQ product, add_ds_times_keys, has no float32 form). Nothing here synchronizes with the
// host and the scratch (delta, the float32 dQ) comes from the caching allocator, so the calls can
// be captured in a CUDA graph.
//
// Dropout is fused (attention_mma.cuh's DropoutMask): the forward reserves Philox draws for the
// B x L x S mask from the default generator and records them in rng_state (int64 [3], CPU: seed,
// offset, and the graph's device-side Philox state as an integer, 0 outside capture). Given
// keep_mask, it also stores the mask it drew, a bit a score, and the backward passes read it;
// without, every backward pass redraws it from rng_state. Storing took bfloat16 forward + backward
// from 0.226 to 0.207 ms at L = 256 and from 2.14 to 2.00 at L = 1024 (the same H200, before the
// key-row passes' tiles went to 32 columns), for 3.1 MB a layer of char_gpt. Kernels for p = 0 are
// compiled without dropout.
#include "core/cuda/launch.cuh"
#include "ops/cuda/attention_mma.cuh"
#include "ops/cuda/cudnn_attention.h"
#include "core/deterministic.h"
#include "core/random.h"
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;
using namespace cuda::attention;

// 8 adjacent elements (16 bytes of a 16-bit type, 32 of float32) from 16-byte aligned memory, as float.
template <class T>
__device__ __forceinline__ void load8(const T* p, float (&f)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const T* h = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < 8; ++k) f[k] = to_float(h[k]);
  }
}

// delta[r] = sum over e of grad_out[r, e] * out[r, e] in float32, r = bh L + i (bh the batch, i the
// query). E / 8 adjacent lanes share a row, each reading 8 elements of both with one vector load
// (rows start on 16 bytes: the op copies an input whose rows do not), then sum by shuffles. One warp
// a row, 2-byte loads and a 64-bit division per row took 27 us for bf16 [384, 256, 64] on an H100.
template <class T, int E>
__global__ void attention_delta_kernel(const T* __restrict__ grad_out, HeadLayout grad_out_at,
                                       const T* __restrict__ out, HeadLayout out_at, float* __restrict__ delta,
                                       int64_t rows, int L) {
  constexpr int kLanes = E / 8;  // 4, 8 or 16: a divisor of the warp
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, row = t / kLanes;
  const int part = static_cast<int>(t % kLanes);
  float sum = 0.f;
  if (row < rows) {
    const int bh = static_cast<int>(row / L), i = static_cast<int>(row - int64_t(bh) * L);
    float go[8], o[8];
    load8(grad_out + grad_out_at.batch(bh) + int64_t(i) * grad_out_at.row + part * 8, go);
    load8(out + out_at.batch(bh) + int64_t(i) * out_at.row + part * 8, o);
#pragma unroll
    for (int k = 0; k < 8; ++k) sum = fmaf(go[k], o[k], sum);
  }
  for (int offset = kLanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (row < rows && part == 0) delta[row] = sum;
}

// grad_q = dq_accum * scale in the dtype, 8 elements a thread: dq_accum contiguous [B, L, E],
// grad_q where grad_q_at says (rows on 16 bytes, as every output's).
template <class T, int E>
__global__ void attention_dq_kernel(const float* __restrict__ dq_accum, T* __restrict__ grad_q, HeadLayout grad_q_at,
                                    int L, int64_t packs, float scale) {
  constexpr int kPacks = E / 8;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < packs; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = t / kPacks;
    const int part = static_cast<int>(t % kPacks), bh = static_cast<int>(row / L);
    const int i = static_cast<int>(row - int64_t(bh) * L);
    float f[8];
    load8(dq_accum + t * 8, f);
    uint4 raw;
    T* h = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) h[k] = __float2bfloat16(f[k] * scale);
      else h[k] = __float2half(f[k] * scale);
    }
    *reinterpret_cast<uint4*>(grad_q + grad_q_at.batch(bh) + int64_t(i) * grad_q_at.row + part * 8) = raw;
  }
}

// Launches pass P of the kernel for element type T (float or a cuda_bf16 / cuda_fp16 type).
template <class T, int E, Pass P, bool Dropout>
void launch_pass(const Params<T>& params, cudaStream_t stream) {
  const int n_rows = rows_are_keys(P) ? params.S : params.L;
  constexpr int bytes = smem_bytes<T, E, P>();
  auto kernel = attention_mma_kernel<T, E, P, Dropout>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  // All of the SM's memory as shared memory, so that kMinBlocks' four blocks fit.
  CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  const int64_t blocks = int64_t(params.B) * ((n_rows + kRows - 1) / kRows);
  kernel<<<static_cast<unsigned>(blocks), kWarps * 32, bytes, stream>>>(params);
  CUDA_LAUNCH_CHECK(attention_mma_kernel);
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

// Whether the kernels' 16-byte loads (cp.async, float4) can read t's rows where they are: its start
// and every stride but the last (1) a multiple of 16 bytes; a size-1 dim's stride never moves a pointer.
bool rows_aligned_16(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.raw_data()) % 16 != 0) return false;
  const int64_t bytes = static_cast<int64_t>(element_size(t.dtype()));
  for (int64_t d = 0; d + 1 < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) * bytes % 16 != 0) return false;
  return true;
}

// An input as the kernels can read it: itself, or a contiguous copy where its rows are not 16-byte
// aligned (an odd view; the op passes its inputs in place only where they are).
Tensor readable(Kernels& kernels, const Tensor& t) {
  if (rows_aligned_16(t)) return t;
  Tensor dense = Tensor::empty(t.shape(), t.dtype(), t.device());
  kernels.copy(t, dense);
  return dense;
}

// t = value through any layout (Kernels::fill writes contiguous memory).
void fill_any_layout(Kernels& kernels, Tensor& t, double value) {
  if (t.numel() == 0) return;
  if (t.is_contiguous()) return kernels.fill(t, value);
  Tensor dense = Tensor::empty(t.shape(), t.dtype(), t.device());
  kernels.fill(dense, value);
  kernels.copy(dense, t);
}

// Where t's rows are (attention_mma.cuh): 4-D [B1, B2, rows, E], or 3-D [B, rows, E] as B2 = 1.
HeadLayout layout_of(const Tensor& t) {
  if (t.dim() == 3) return {1, t.stride(0), 0, t.stride(1)};
  return {std::max<int64_t>(t.size(1), 1), t.stride(0), t.stride(1), t.stride(2)};
}

// q [..., L, E], k and v [..., S, E] with one batch shape `batch` ([B] or [B1, B2], B its product).
struct Sizes {
  int64_t B, L, S, E;
  Shape batch;
};

// A kernel operand of shape batch + [rows, cols] with a unit last stride (any other strides).
void check_tensor(const char* what, const Tensor& t, const Shape& batch, int64_t rows, int64_t cols, DType dtype,
                  Device device) {
  MINIDL_CHECK(t.defined(), "fused attention: ", what, " is undefined");
  Shape shape = batch;
  shape.push_back(rows);
  shape.push_back(cols);
  MINIDL_CHECK(t.shape() == shape, "fused attention: expected ", what, " of shape ", shape, ", got ", t.shape());
  MINIDL_CHECK(t.dtype() == dtype, "fused attention: expected ", what, " of dtype ", dtype, ", got ", t.dtype());
  MINIDL_CHECK(t.device() == device, "fused attention: expected ", what, " on ", device, ", got ", t.device());
  MINIDL_CHECK(t.stride(-1) == 1, "fused attention: expected ", what, " with a unit last stride, got strides ",
               t.strides());
}

// An output: an operand whose rows the kernels' vector stores can write in place.
void check_output(const char* what, const Tensor& t, const Shape& batch, int64_t rows, int64_t cols, DType dtype,
                  Device device) {
  check_tensor(what, t, batch, rows, cols, dtype, device);
  MINIDL_CHECK(t.numel() == 0 || rows_aligned_16(t), "fused attention: expected ", what,
               " to start and have its row and batch strides on 16 bytes, got strides ", t.strides(), " of ",
               t.dtype());
}

void check_logsumexp(const Tensor& lse, const Sizes& s, Device device) {
  Shape batch_shape = s.batch;
  batch_shape.push_back(s.L);
  MINIDL_CHECK(lse.defined() && (lse.shape() == Shape{s.B, s.L} || lse.shape() == batch_shape) &&
                   lse.dtype() == kFloat32 && lse.device() == device && lse.is_contiguous(),
               "fused attention: expected logsumexp a contiguous float32 [", s.B, ", ", s.L, "] or ", batch_shape,
               " on ", device, ", got ", lse.defined() ? lse.shape() : Shape{}, " ",
               lse.defined() ? lse.dtype() : kFloat32);
}

// The sizes of q, k, v, after checking them.
Sizes check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p) {
  MINIDL_CHECK(dropout_p >= 0 && dropout_p <= 1, "fused attention: expected dropout_p in [0, 1], got ", dropout_p);
  MINIDL_CHECK((q.dim() == 3 || q.dim() == 4) && k.dim() == q.dim() && v.dim() == q.dim(),
               "fused attention: expected q, k, v all [B, rows, E] or all [B1, B2, rows, E], got ", q.shape(), ", ",
               k.shape(), ", ", v.shape());
  Sizes s{0, q.size(-2), k.size(-2), q.size(-1), Shape(q.shape().begin(), q.shape().end() - 2)};
  s.B = shape_numel(s.batch);
  check_tensor("q", q, s.batch, s.L, s.E, q.dtype(), q.device());
  check_tensor("k", k, s.batch, s.S, s.E, q.dtype(), q.device());
  check_tensor("v", v, s.batch, s.S, s.E, q.dtype(), q.device());
  MINIDL_CHECK(s.E == 32 || s.E == 64 || s.E == 128, "fused attention: expected a head size of 32, 64 or 128, got ",
               s.E);
  MINIDL_CHECK(s.L < (int64_t{1} << 31) && s.S < (int64_t{1} << 31) && s.B < (int64_t{1} << 31),
               "fused attention: expected B, L and S below 2^31, got ", s.B, ", ", s.L, ", ", s.S);
  const int64_t row_blocks = (std::max(s.L, s.S) + kRows - 1) / kRows;
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
                                    bool causal, double dropout_p, Tensor& out, Tensor& logsumexp, Tensor& rng_state,
                                    Tensor* keep_mask) {
  const Sizes s = check_inputs(q_in, k_in, v_in, dropout_p);
  const DType dtype = q_in.dtype();
  const Device device = q_in.device();
  check_output("out", out, s.batch, s.L, s.E, dtype, device);
  check_logsumexp(logsumexp, s, device);
  const bool dropout = dropout_p > 0;
  if (dropout) {
    check_rng_state(rng_state);
    // attention_mma.cuh's DropoutMask: a Philox block per four scores, L and S padded to 16.
    const PhiloxDraw draw = default_generator().philox_draw(DropoutMask::draws(s.B, s.L, s.S));
    int64_t* state = static_cast<int64_t*>(rng_state.raw_data());
    state[0] = static_cast<int64_t>(draw.seed);
    state[1] = static_cast<int64_t>(draw.offset);
    state[2] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(draw.device_state));
    if (keep_mask) {
      const int64_t bytes = DropoutMask::stored_bytes(s.B, s.L, s.S);
      *keep_mask = Tensor::empty({bytes}, kUInt8, device);
    }
  }
  if (s.B == 0 || s.L == 0) return;
  cuda::DeviceGuard guard(device_);
  if (s.S == 0) {  // every row sees no key
    fill_any_layout(*this, out, 0.0);
    fill(logsumexp, -INFINITY);
    return;
  }
  const Tensor q = readable(*this, q_in), k = readable(*this, k_in), v = readable(*this, v_in);
  dispatch_attention_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    Params<T> p = make_params<T>(s, scale, causal);
    p.q = ptr<const T>(q), p.k = ptr<const T>(k), p.v = ptr<const T>(v);
    p.q_at = layout_of(q), p.k_at = layout_of(k), p.v_at = layout_of(v);
    p.out = ptr<T>(out), p.out_at = layout_of(out);
    p.lse = ptr<float>(logsumexp);
    if (dropout) {
      set_dropout(p, rng_state, dropout_p);
      if (keep_mask) p.keep_bits = ptr<uint8_t>(*keep_mask);
    }
    dispatch_head_size(s.E, [&](auto e) {
      dispatch_dropout(dropout, [&](auto drop) {
        launch_pass<T, decltype(e)::value, Pass::kForward, decltype(drop)::value>(p, stream_);
      });
    });
  });
}

void CudaKernels::attention_backward(const Tensor& grad_out_in, const Tensor& q_in, const Tensor& k_in,
                                     const Tensor& v_in, const Tensor& out_in, const Tensor& logsumexp,
                                     const Tensor& rng_state, const Tensor& keep_mask, double scale, bool causal,
                                     double dropout_p, Tensor& grad_q, Tensor& grad_k, Tensor& grad_v) {
  const Sizes s = check_inputs(q_in, k_in, v_in, dropout_p);
  const bool dropout = dropout_p > 0;
  if (dropout) check_rng_state(rng_state);
  const bool stored_mask = dropout && keep_mask.defined();
  if (stored_mask) {
    const int64_t bytes = DropoutMask::stored_bytes(s.B, s.L, s.S);
    MINIDL_CHECK(keep_mask.shape() == Shape{bytes} && keep_mask.dtype() == kUInt8 &&
                     keep_mask.device() == q_in.device() && keep_mask.is_contiguous(),
                 "fused attention: expected keep_mask the uint8 [", bytes, "] the forward stored on ", q_in.device(),
                 ", got ", keep_mask.shape(), " ", keep_mask.dtype(), " on ", keep_mask.device());
  }
  const DType dtype = q_in.dtype();
  const Device device = q_in.device();
  check_tensor("grad_out", grad_out_in, s.batch, s.L, s.E, dtype, device);
  check_tensor("out", out_in, s.batch, s.L, s.E, dtype, device);
  check_logsumexp(logsumexp, s, device);
  check_output("grad_q", grad_q, s.batch, s.L, s.E, dtype, device);
  check_output("grad_k", grad_k, s.batch, s.S, s.E, dtype, device);
  check_output("grad_v", grad_v, s.batch, s.S, s.E, dtype, device);
  if (s.B == 0) return;
  cuda::DeviceGuard guard(device_);
  if (s.L == 0 || s.S == 0) {  // no score: every gradient is zero
    fill_any_layout(*this, grad_q, 0.0);
    fill_any_layout(*this, grad_k, 0.0);
    fill_any_layout(*this, grad_v, 0.0);
    return;
  }
  const Tensor q = readable(*this, q_in), k = readable(*this, k_in), v = readable(*this, v_in);
  const Tensor grad_out = readable(*this, grad_out_in), out = readable(*this, out_in);
  // Scratch from the caching allocator (a graph's private pool while capturing).
  Tensor delta = Tensor::empty({s.B, s.L}, kFloat32, device);
  dispatch_attention_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = s.B * s.L;
    dispatch_head_size(s.E, [&](auto e) {
      constexpr int E = e();
      const int64_t threads = rows * (E / 8);
      attention_delta_kernel<T, E><<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0,
                                     stream_>>>(ptr<const T>(grad_out), layout_of(grad_out), ptr<const T>(out),
                                                layout_of(out), ptr<float>(delta), rows, static_cast<int>(s.L));
      CUDA_LAUNCH_CHECK(attention_delta_kernel);
    });
    Params<T> p = make_params<T>(s, scale, causal);
    p.q = ptr<const T>(q), p.k = ptr<const T>(k), p.v = ptr<const T>(v), p.grad_out = ptr<const T>(grad_out);
    p.q_at = layout_of(q), p.k_at = layout_of(k), p.v_at = layout_of(v), p.grad_out_at = layout_of(grad_out);
    p.lse = ptr<float>(logsumexp);
    p.delta = ptr<const float>(delta);
    if (dropout) set_dropout(p, rng_state, dropout_p);
    if (stored_mask) p.keep_bits = const_cast<uint8_t*>(ptr<const uint8_t>(keep_mask));  // read only here
    dispatch_head_size(s.E, [&](auto e) {
      dispatch_dropout(dropout, [&](auto drop) {
        constexpr int E = decltype(e)::value;
        constexpr bool D = decltype(drop)::value;
        Params<T> kv = p;
        kv.out = ptr<T>(grad_k), kv.out_at = layout_of(grad_k);
        kv.out2 = ptr<T>(grad_v), kv.out2_at = layout_of(grad_v);
        if constexpr (!std::is_same_v<T, float>) {
          if (D && !stored_mask && !is_deterministic()) {
            Tensor dq_accum = Tensor::empty({s.B, s.L, s.E}, kFloat32, device);
            CUDA_CHECK(cudaMemsetAsync(dq_accum.raw_data(), 0, dq_accum.nbytes(), stream_));
            kv.dq_accum = ptr<float>(dq_accum);
            launch_pass<T, E, Pass::kGradKVQ, D>(kv, stream_);
            const int64_t packs = dq_accum.numel() / 8;
            attention_dq_kernel<T, E><<<blocks_for(packs), kThreads, 0, stream_>>>(
                ptr<const float>(dq_accum), ptr<T>(grad_q), layout_of(grad_q), static_cast<int>(s.L), packs,
                static_cast<float>(scale));
            CUDA_LAUNCH_CHECK(attention_dq_kernel);
            return;
          }
        }
        Params<T> dq = p;
        dq.out = ptr<T>(grad_q), dq.out_at = layout_of(grad_q);
        // The two passes read the same inputs and write different outputs: the dQ pass runs on the
        // side stream beside the key pass, its blocks filling the SMs the key pass's last ones leave.
        const cudaStream_t side = cuda::side_stream(device_);
        cuda::stream_wait(device_, side, stream_);
        launch_pass<T, E, Pass::kGradKV, D>(kv, stream_);
        launch_pass<T, E, Pass::kGradQ, D>(dq, side);
        cuda::stream_wait(device_, stream_, side);
      });
    });
  });
}

namespace cuda {

namespace {

__global__ void philox_seed_offset_kernel(uint64_t seed, uint64_t offset, const uint64_t* device_state,
                                          int64_t* out) {
  wait_for_earlier_kernels();  // started early, ahead of cuDNN's attention that reads it
  out[0] = static_cast<int64_t>(device_state ? device_state[0] : seed);
  out[2] = static_cast<int64_t>(offset + (device_state ? device_state[1] : 0));
}

}  // namespace

uint64_t attention_dropout_draws(int64_t B, int64_t L, int64_t S) { return DropoutMask::draws(B, L, S); }

void write_philox_seed_offset(const Tensor& rng_state, Tensor& seed_offset, cudaStream_t stream) {
  check_rng_state(rng_state);
  MINIDL_CHECK(seed_offset.dtype() == kInt64 && seed_offset.numel() == 4 && seed_offset.device().is_cuda() &&
                   seed_offset.is_contiguous(),
               "write_philox_seed_offset: expected a contiguous int64 [2, 2] tensor on a CUDA device, got ",
               seed_offset.dtype(), " ", seed_offset.shape(), " on ", seed_offset.device());
  const int64_t* state = static_cast<const int64_t*>(rng_state.raw_data());
  launch_early("philox_seed_offset_kernel", philox_seed_offset_kernel, 1, 1, 0, stream,
               static_cast<uint64_t>(state[0]), static_cast<uint64_t>(state[1]),
               reinterpret_cast<const uint64_t*>(static_cast<uintptr_t>(state[2])), ptr<int64_t>(seed_offset));
}

Tensor attention_dropout_mask(int64_t B, int64_t L, int64_t S, const Tensor& rng_state, double dropout_p,
                              Device device) {
  check_rng_state(rng_state);
  MINIDL_CHECK(device.is_cuda(), "attention_dropout_mask: expected a CUDA device, got ", device);
  Tensor mask = Tensor::empty({B, L, S}, kFloat32, device);
  if (mask.numel() == 0) return mask;
  Params<float> p = make_params<float>(Sizes{B, L, S, 0, {}}, 1.0, false);
  set_dropout(p, rng_state, dropout_p);
  DeviceGuard guard(device.index);
  attention_dropout_mask_kernel<<<blocks_for(mask.numel()), kThreads, 0, compute_stream(device.index)>>>(
      p, ptr<float>(mask));
  CUDA_LAUNCH_CHECK(attention_dropout_mask_kernel);
  return mask;
}

}  // namespace cuda

}  // namespace minidl
