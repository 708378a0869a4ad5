// dropout_add_layer_norm (residual + dropout(x), then its layer norm: a pre-norm transformer's seam)
// as layer_norm_rows.cuh's kernels with the dropout and the addition folded in, forward and backward;
// the op composes them where these decline (ops/normalization.cpp).
#include "ops/cuda/layer_norm_rows.cuh"
#include "ops/cuda/normalization_reduce.cuh"
#include "ops/cuda/random.cuh"

namespace minidl {

namespace {

using namespace cuda;
using namespace cuda::norm;

// A warp per row as in layer_norm_rows, in groups of G = kRandomPer<C> elements: one Philox draw
// covers a group, and element i takes the draw a dropout() launch gives it (thread i / G's), so the
// fused op and its composition drop the same elements from one generator state. The residual and
// sum are T (float or double); x is N and out O (T, or a 16-bit type beside float): a residual
// stream under autocast is a float32 sum of 16-bit branches whose norms feed 16-bit products, and
// its first seam (the embeddings, no residual) takes a float32 x to a 16-bit norm.
//
// The mask the backward reads is a bit an element: a row's kGroups * G words, word k * G + e holding
// in bit `lane` whether element e of the lane's group lane + 32 k was kept (the warp's ballot). A
// byte an element was 6.3 MB written and read again for each of a GPT's [16384, 384] seams.
template <class N>
constexpr int kGroupOf = kRandomPer<compute_t<N>>;

// Blocks of kRowsPerBlock warps an SM the forward is compiled for: five (48 registers) for a 16-bit
// x of up to 3 groups a lane, where that spills nothing. Left to the compiler, [16384, 384] took 52
// registers, four blocks an SM, and was bound by its loads' latency at 46% of an H200's memory
// speed; at five, char_gpt ran 0.5% faster (at six, 40 registers spilled and it ran slower).
template <class N, int kGroups>
constexpr int kAddNormBlocks = is_16bit_float_v<N> && kGroups <= 3 ? 5 : 1;

// Where a seam's x comes from: a tensor's rows (group `at` of the whole tensor), or, at a transformer's
// first seam, the sum of two embeddings' rows read from their tables (embedding_add's sum, whose
// [rows, d] tensor is then never written nor read again).
template <class N, int G>
struct TensorRows {
  const N* __restrict__ x;
  __device__ __forceinline__ VecPack<N, G> load(int64_t /*row*/, int /*g*/, int64_t at) const {
    return load_pack<G>(x, at);
  }
};

template <class N, int G>
struct EmbeddingRows {
  const N* __restrict__ a;  // [rows_a, d], taken at ids_a[row]
  const int64_t* __restrict__ ids_a;
  int64_t rows_a;
  const N* __restrict__ b;  // [rows_b, d], taken at ids_b[row % period]
  const int64_t* __restrict__ ids_b;
  int64_t rows_b, period;
  int groups;  // of a row
  DeviceErrorReport error;
  __device__ __forceinline__ VecPack<N, G> load(int64_t row, int g, int64_t /*at*/) const {
    using C = compute_t<N>;
    const int64_t ia = ids_a[row], ib = ids_b[row % period];
    VecPack<N, G> sum = filled<G>(N(0));
    if (ia < 0 || ia >= rows_a || ib < 0 || ib >= rows_b) {  // zeros, and the error at the next sync
      if (g == 0) {
        if (ia < 0 || ia >= rows_a) report_device_error(error, kIndexSelectIndex, row, ia, rows_a);
        else report_device_error(error, kIndexSelectIndex, row % period, ib, rows_b);
      }
      return sum;
    }
    const VecPack<N, G> pa = load_pack<G>(a, ia * groups + g), pb = load_pack<G>(b, ib * groups + g);
#pragma unroll
    for (int e = 0; e < G; ++e) sum.v[e] = static_cast<N>(static_cast<C>(pa.v[e]) + static_cast<C>(pb.v[e]));
    return sum;
  }
};

template <class T, class N, class O, int kGroups, class Src = TensorRows<N, kGroupOf<N>>>
__global__ void __launch_bounds__(kRowsPerBlock * 32, (kAddNormBlocks<N, kGroups>)) dropout_add_layer_norm_rows(
    const Src x, const T* __restrict__ residual, const T* __restrict__ w, const T* __restrict__ b,
    PhiloxDraw draw, compute_t<N> keep_prob, compute_t<N> scale, O* __restrict__ out, T* __restrict__ sum,
    uint32_t* __restrict__ mask, T* __restrict__ mean, T* __restrict__ invstd, int64_t rows, int d, double eps) {
  // Started early (launch_early): nothing is read or written before the kernel before is done.
  wait_for_earlier_kernels();
  let_next_kernel_start();
  using A = AccT<T>;
  using C = compute_t<N>;
  constexpr int G = kGroupOf<N>;
  const int lane = static_cast<int>(threadIdx.x) & 31, warps = static_cast<int>(blockDim.x) / 32;
  const int groups = d / G;
  for (int64_t row = blockIdx.x * int64_t(warps) + threadIdx.x / 32; row < rows; row += int64_t(gridDim.x) * warps) {
    VecPack<T, G> v[kGroups];
    A total = 0;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int g = lane + 32 * k;
      v[k] = filled<G>(T(0));
      bool kept[G] = {};
      if (g < groups) {
        const int64_t at = row * groups + g;  // the group's index in the whole tensor
        const VecPack<N, G> xk = x.load(row, g, at);
        const VecPack<T, G> rk = residual ? load_pack<G>(residual, at) : filled<G>(T(0));
        C u[G];
        if (mask) philox_values_at<C>(draw, static_cast<uint64_t>(at), u);
#pragma unroll
        for (int e = 0; e < G; ++e) {
          // The dropped branch is rounded to N before the addition, as dropout() then add would.
          kept[e] = !mask || u[e] <= keep_prob;
          const N xe = mask ? static_cast<N>(kept[e] ? static_cast<C>(xk.v[e]) * scale : C(0)) : xk.v[e];
          v[k].v[e] = rk.v[e] + static_cast<T>(xe);
          total += A(v[k].v[e]);
        }
        store_pack<G>(sum, at, v[k]);
      }
      if (mask) {  // the whole warp: its row's words for this k
#pragma unroll
        for (int e = 0; e < G; ++e) {
          const uint32_t word = __ballot_sync(0xffffffffu, kept[e]);
          if (lane == e) mask[(row * kGroups + k) * G + e] = word;
        }
      }
    }
    T m, r;
    row_stats(v, total, d, eps, m, r);
    if (lane == 0) mean[row] = m, invstd[row] = r;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int g = lane + 32 * k;
      if (g >= groups) continue;
      const VecPack<T, G> wk = w ? load_pack<G>(w, g) : filled<G>(T(1));
      const VecPack<T, G> bk = b ? load_pack<G>(b, g) : filled<G>(T(0));
      VecPack<O, G> ok;
#pragma unroll
      for (int e = 0; e < G; ++e) ok.v[e] = static_cast<O>((v[k].v[e] - m) * r * wk.v[e] + bk.v[e]);
      store_pack<G>(out, row * groups + g, ok);
    }
  }
}

// Its backward, as layer_norm_rows_backward (the weight and bias gradients summed by chunks of rows
// in a fixed order), with the sum's own gradient added and the result passed back through the
// dropout to x. Everything a row reads (g, sum, the sum's gradient, the mask) is loaded a row ahead,
// and the blocks are of kAddNormWarps warps, three to an SM: at one block of 8 warps an SM, with the
// sum's gradient and the mask loaded when their row came, [16384, 384] took 106 us on an H200.
constexpr int kAddNormWarps = 4;
// Chunks of rows for the weight and bias sums: about three blocks an SM on an H100 or H200, a count
// fixed by the shape alone (so is the summation order).
constexpr int64_t kAddNormChunks = 384;

template <class T, class N, class O, int kGroups>
struct AddNormRow {
  VecPack<O, kGroupOf<N>> g[kGroups];
  VecPack<T, kGroupOf<N>> s[kGroups], gs[kGroups];
  uint32_t mask_word;  // lane i < kGroups * G holds the row's mask word i (all bits set without a mask)
  T mean, invstd;
};

template <class T, class N, class O, int kGroups, bool kParamSums>
__global__ void __launch_bounds__(kAddNormWarps * 32, 3) dropout_add_layer_norm_rows_backward(
    const O* __restrict__ g, const T* __restrict__ g_sum, const T* __restrict__ sum, const T* __restrict__ mean,
    const T* __restrict__ invstd, const T* __restrict__ w, const uint32_t* __restrict__ mask, compute_t<N> scale,
    N* __restrict__ grad_x, T* __restrict__ grad_residual, int64_t rows, int d, int64_t chunk_rows,
    Sums<AccT<T>>* __restrict__ chunk_sums) {
  wait_for_earlier_kernels();  // started early, as the forward
  let_next_kernel_start();
  using A = AccT<T>;
  using C = compute_t<N>;
  constexpr int G = kGroupOf<N>;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int groups = d / G;
  auto [row, end, step] = warp_rows<kParamSums>(rows, chunk_rows);
  // A chunk's few rows summed in T (float: half the registers of AccT's double), the chunks in AccT.
  Sums<T> column[kParamSums ? kGroups * G : 1] = {};
  AddNormRow<T, N, O, kGroups> next;
  auto load = [&](int64_t r) {
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int gi = lane + 32 * k;
      const bool in_row = gi < groups;
      const int64_t at = r * groups + gi;
      next.g[k] = in_row ? load_pack<G>(g, at) : filled<G>(O(0));
      next.s[k] = in_row ? load_pack<G>(sum, at) : filled<G>(T(0));
      next.gs[k] = in_row && g_sum ? load_pack<G>(g_sum, at) : filled<G>(T(0));
    }
    next.mask_word = mask && lane < kGroups * G ? mask[r * (kGroups * G) + lane] : 0xffffffffu;
    next.mean = mean[r], next.invstd = invstd[r];
  };
  if (row < end) load(row);
  for (; row < end; row += step) {
    const AddNormRow<T, N, O, kGroups> cur = next;
    if (row + step < end) load(row + step);
    const T m = cur.mean, r = cur.invstd;
    A s1 = 0, s2 = 0;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int gi = lane + 32 * k;
      const bool in_row = gi < groups;
      const VecPack<T, G> wk = w && in_row ? load_pack<G>(w, gi) : filled<G>(T(1));
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const T gv = static_cast<T>(cur.g[k].v[e]), gw = gv * wk.v[e];
        const T xhat = in_row ? (cur.s[k].v[e] - m) * r : T(0);
        s1 += A(gw);
        s2 += A(gw) * A(xhat);
        if constexpr (kParamSums) {
          column[k * G + e].a += gv;
          column[k * G + e].b += gv * xhat;
        }
      }
    }
    const T m1 = T(warp_sum(s1) / A(d)), m2 = T(warp_sum(s2) / A(d));
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int gi = lane + 32 * k;
      bool kept[G];
#pragma unroll
      for (int e = 0; e < G; ++e) kept[e] = (__shfl_sync(0xffffffffu, cur.mask_word, k * G + e) >> lane) & 1u;
      if (gi >= groups) continue;
      const int64_t at = row * groups + gi;
      const VecPack<T, G> wk = w ? load_pack<G>(w, gi) : filled<G>(T(1));
      VecPack<T, G> gs = cur.gs[k];
      VecPack<N, G> gx;
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const T xhat = (cur.s[k].v[e] - m) * r;
        gs.v[e] += r * (static_cast<T>(cur.g[k].v[e]) * wk.v[e] - m1 - xhat * m2);
        gx.v[e] = static_cast<N>(kept[e] ? static_cast<C>(gs.v[e]) * scale : C(0));
      }
      if (grad_residual) store_pack<G>(grad_residual, at, gs);
      if (grad_x) store_pack<G>(grad_x, at, gx);
    }
  }
  if constexpr (kParamSums) write_chunk_sums<G>(column, d, chunk_sums);
}

// Calls fn(T{}, N{}, O{}) for the sum's, x's and out's dtypes where a kernel takes them: a float32
// sum beside a float32, bfloat16 or float16 x and out of x's dtype, or a float32 x and a 16-bit out;
// float64 throughout. False otherwise.
template <class Fn>
bool dispatch_add_norm_types(DType sum, DType x, DType out, Fn&& fn) {
  if (sum == kFloat64 && x == kFloat64 && out == kFloat64) fn(double{}, double{}, double{});
  else if (sum != kFloat32) return false;
  else if (x == kFloat32 && out == kFloat32) fn(float{}, float{}, float{});
  else if (x == kBFloat16 && out == kBFloat16) fn(float{}, BFloat16{}, BFloat16{});
  else if (x == kFloat16 && out == kFloat16) fn(float{}, Half{}, Half{});
  else if (x == kFloat32 && out == kBFloat16) fn(float{}, float{}, BFloat16{});
  else if (x == kFloat32 && out == kFloat16) fn(float{}, float{}, Half{});
  else return false;
  return true;
}

// Calls fn(std::integral_constant<int, K>{}) with the fewest groups a lane K (1, 2, 3, 4, 6 or 8) that
// hold a row of `groups` groups; false where the row is longer (the op then composes).
template <class Fn>
bool dispatch_groups_per_lane(int64_t groups, Fn&& fn) {
  if (groups <= 32) fn(std::integral_constant<int, 1>{});
  else if (groups <= 64) fn(std::integral_constant<int, 2>{});
  else if (groups <= 96) fn(std::integral_constant<int, 3>{});
  else if (groups <= 128) fn(std::integral_constant<int, 4>{});
  else if (groups <= 192) fn(std::integral_constant<int, 6>{});
  else if (groups <= 256) fn(std::integral_constant<int, 8>{});
  else return false;
  return true;
}

// The seam's forward over rows of d, its x of x_dtype read through make_x(N{}, G) (a TensorRows or
// EmbeddingRows of groups of G), each of x_pointers aligned for a group's loads. False where no kernel
// takes these dtypes, this width or these pointers (the op then composes).
template <class MakeX>
bool launch_dropout_add_layer_norm(cudaStream_t stream, DType x_dtype, std::initializer_list<const void*> x_pointers,
                                   int64_t rows, int64_t d, const Tensor& residual, const Tensor* weight,
                                   const Tensor* bias, double keep_prob, double eps, Tensor& out, Tensor& sum,
                                   Tensor& mask, Tensor& save_mean, Tensor& save_invstd, MakeX make_x) {
  bool ran = false;
  dispatch_add_norm_types(sum.dtype(), x_dtype, out.dtype(), [&](auto t_tag, auto n_tag, auto o_tag) {
    using T = decltype(t_tag);
    using N = decltype(n_tag);
    using O = decltype(o_tag);
    using C = compute_t<N>;
    constexpr int G = kGroupOf<N>;
    // Rows of whole groups, up to 16 elements a lane (the backward's weight and bias sums ride in
    // registers, as layer norm's), on pointers aligned for a group's loads.
    if (d == 0 || d % G != 0 || d > 32 * kMaxPerLaneWithSums || rows == 0) return;
    if ((weight && weight->dtype() != sum.dtype()) || (bias && bias->dtype() != sum.dtype())) return;
    if (residual.defined() && residual.dtype() != sum.dtype()) return;
    const T *w = cptr_or_null<T>(weight), *b = cptr_or_null<T>(bias);
    const T* r = residual.defined() ? ptr<const T>(residual) : nullptr;
    if (!aligned_to(sizeof(T) * G, {r, sum.raw_data(), w, b}) || !aligned_to(sizeof(N) * G, x_pointers) ||
        !aligned_to(sizeof(O) * G, {out.raw_data()}))
      return;
    const bool dropping = keep_prob < 1;
    dispatch_groups_per_lane(d / G, [&](auto groups) {
      if constexpr (groups() * G <= kMaxPerLaneWithSums) {
        // The mask's words (the comment above the kernel), for the backward alone.
        mask = dropping ? Tensor::empty({rows, groups() * G}, kInt32, sum.device()) : Tensor();
        const PhiloxDraw draw = dropping ? reserve_philox<C>(rows * d) : PhiloxDraw{};
        const auto x = make_x(N{}, std::integral_constant<int, G>{});
        launch_early("dropout_add_layer_norm_rows", dropout_add_layer_norm_rows<T, N, O, groups(), decltype(x)>,
                     dim3(blocks_for(rows, kRowsPerBlock)), dim3(kRowsPerBlock * 32), 0, stream, x, r, w, b, draw,
                     static_cast<C>(keep_prob), static_cast<C>(1.0 / keep_prob), ptr<O>(out), ptr<T>(sum),
                     dropping ? ptr<uint32_t>(mask) : nullptr, ptr<T>(save_mean), ptr<T>(save_invstd), rows,
                     static_cast<int>(d), eps);
        ran = true;
      }
    });
  });
  return ran;
}

}  // namespace

bool CudaKernels::dropout_add_layer_norm(const Tensor& x, const Tensor& residual, const Tensor* weight,
                                         const Tensor* bias, double keep_prob, double eps, Tensor& out, Tensor& sum,
                                         Tensor& mask, Tensor& save_mean, Tensor& save_invstd) {
  const int64_t d = x.size(-1), rows = d > 0 ? x.numel() / d : 0;
  cuda::DeviceGuard guard(device_);
  return launch_dropout_add_layer_norm(
      stream_, x.dtype(), {x.raw_data()}, rows, d, residual, weight, bias, keep_prob, eps, out, sum, mask, save_mean,
      save_invstd, [&](auto n_tag, auto g) { return TensorRows<decltype(n_tag), g()>{ptr<const decltype(n_tag)>(x)}; });
}

bool CudaKernels::embedding_dropout_layer_norm(const Tensor& table, const Tensor& ids, const Tensor& other_table,
                                               const Tensor& other_ids, const Tensor* weight, const Tensor* bias,
                                               double keep_prob, double eps, Tensor& out, Tensor& sum, Tensor& mask,
                                               Tensor& save_mean, Tensor& save_invstd) {
  const int64_t d = table.size(1), rows = ids.numel();
  if (other_table.dtype() != table.dtype() || other_table.size(1) != d || other_ids.numel() == 0 ||
      rows % other_ids.numel() != 0)
    return false;
  cuda::DeviceGuard guard(device_);
  const DeviceErrorReport error = device_error_report(device_);
  return launch_dropout_add_layer_norm(
      stream_, table.dtype(), {table.raw_data(), other_table.raw_data()}, rows, d, Tensor(), weight, bias, keep_prob,
      eps, out, sum, mask, save_mean, save_invstd, [&](auto n_tag, auto g) {
        using N = decltype(n_tag);
        return EmbeddingRows<N, g()>{ptr<const N>(table), ptr<const int64_t>(ids), table.size(0),
                                     ptr<const N>(other_table), ptr<const int64_t>(other_ids), other_table.size(0),
                                     other_ids.numel(), static_cast<int>(d / g()), error};
      });
}

void CudaKernels::dropout_add_layer_norm_backward(const Tensor& grad_out, const Tensor* grad_sum, const Tensor& sum,
                                                  const Tensor& save_mean, const Tensor& save_invstd,
                                                  const Tensor* weight, const Tensor& mask, double keep_prob,
                                                  Tensor* grad_x, Tensor* grad_residual, Tensor* grad_weight,
                                                  Tensor* grad_bias) {
  const int64_t d = sum.size(-1), rows = sum.numel() / d;
  cuda::DeviceGuard guard(device_);
  // x's dtype from its gradient; without one, the sum's, and no mask to read (it applies to x's
  // gradient alone).
  const DType x_dtype = grad_x ? grad_x->dtype() : sum.dtype();
  const bool dispatched = dispatch_add_norm_types(sum.dtype(), x_dtype, grad_out.dtype(), [&](auto t_tag, auto n_tag,
                                                                                               auto o_tag) {
    using T = decltype(t_tag);
    using N = decltype(n_tag);
    using O = decltype(o_tag);
    using A = AccT<T>;
    using C = compute_t<N>;
    constexpr int G = kGroupOf<N>;
    const O* g = ptr<const O>(grad_out);
    const T* gs = cptr_or_null<T>(grad_sum);
    const T *s = ptr<const T>(sum), *mean = ptr<const T>(save_mean), *invstd = ptr<const T>(save_invstd);
    const T* w = cptr_or_null<T>(weight);
    const uint32_t* m = mask.defined() && grad_x ? ptr<const uint32_t>(mask) : nullptr;
    N* gx = ptr_or_null<N>(grad_x);
    T* gr = ptr_or_null<T>(grad_residual);
    const C scale = static_cast<C>(1.0 / keep_prob);
    dispatch_groups_per_lane(d / G, [&](auto groups) {
      if constexpr (groups() * G <= kMaxPerLaneWithSums) {
        if (grad_weight || grad_bias) {
          const RowChunks<A> c = row_chunks<A>(rows, d, kAddNormChunks, kAddNormWarps, sum.device());
          auto* kernel = dropout_add_layer_norm_rows_backward<T, N, O, groups(), true>;
          launch_early("dropout_add_layer_norm_rows_backward", kernel, dim3(static_cast<unsigned>(c.chunks)),
                       dim3(kAddNormWarps * 32), 0, stream_, g, gs, s, mean, invstd, w, m, scale, gx, gr, rows,
                       static_cast<int>(d), c.chunk_rows, c.sums);
          finish_row_chunks_beside<T>(c, d, grad_weight, grad_bias, device_, stream_);
          return;
        }
        auto* kernel = dropout_add_layer_norm_rows_backward<T, N, O, groups(), false>;
        launch_early("dropout_add_layer_norm_rows_backward", kernel, dim3(blocks_for(rows, kAddNormWarps)),
                     dim3(kAddNormWarps * 32), 0, stream_, g, gs, s, mean, invstd, w, m, scale, gx, gr, rows,
                     static_cast<int>(d), int64_t(0), static_cast<Sums<A>*>(nullptr));
      }
    });
  });
  MINIDL_CHECK(dispatched, "dropout_add_layer_norm_backward: no kernel for a ", sum.dtype(), " sum, ", x_dtype,
               " x and ", grad_out.dtype(), " gradient (the forward's check and this one disagree)");
}

}  // namespace minidl