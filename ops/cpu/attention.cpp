// Fused attention on the CPU (the kernel interface's "fused attention", ops/kernels.h). Per batch row,
// queries go in blocks of kQueryBlock: one GEMM gives the block's scores against the keys it can
// see, a stable softmax (max subtracted) turns them into probabilities in place, and a second GEMM
// multiplies them by v. Only a block's scores exist at a time ([64, S], in cache), never [L, S].
// The backward recomputes them, as FlashAttention does, from logsumexp, with D = rowsum(dO * O):
//   P = exp(scale q k^T - lse),  dV = P^T dO,  dP = dO v^T,  dS = P * (dP - D),
//   dQ = scale dS k,  dK = scale dS^T q.
// logsumexp is float32 by the interface; the recomputed rows are renormalized to sum to one, so a
// float64 gradient keeps float64 accuracy rather than logsumexp's. Dropout is not fused here: the
// op composes it (fused_attention_supports answers false).
// Threads: the forward splits (batch, query block) pairs, the backward batch rows (dK and dV sum
// over every query block of their row); each unit's arithmetic is independent of the thread count.
// The interface lets q, k, v and the outputs be strided [batch, heads] views (ops/kernels.h); the
// loops below read dense [B, rows, E] memory, so such views pass through contiguous copies here:
// the CPU path is the reference, and a copy costs little beside its GEMMs.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/cpu_kernels.h"
#include "ops/widen_16bit.h"

namespace minidl {

namespace {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const Mat<T>>;
template <class T>
using MutMap = Eigen::Map<Mat<T>>;

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kParallelWork = 1 << 15;  // multiply-adds below which a thread team costs more than it saves

struct Sizes {
  int64_t B, L, S, E, Ev;
  int64_t blocks() const { return (L + kQueryBlock - 1) / kQueryBlock; }
  bool parallel() const { return B * L * S * (E + Ev) > kParallelWork; }
};

// Keys that query i sees: all S, or under the (top-left) causal mask j <= i.
int64_t keys_seen(int64_t i, int64_t S, bool causal) { return causal ? std::min(S, i + 1) : S; }

// Probabilities of the query block [i0, i0 + rows) in `p` (rows x s_used, holding the scaled scores
// on entry; keys past a row's causal limit get 0, and a row that sees no key is all zeros). The
// forward (saved_lse null) subtracts each row's max and writes its logsumexp to new_lse; the
// backward subtracts the saved logsumexp, then renormalizes.
template <class T>
void probabilities(Mat<T>& p, int64_t i0, int64_t S, bool causal, const float* saved_lse, float* new_lse) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < p.rows(); ++r) {
    const int64_t seen = keys_seen(i0 + r, S, causal);
    auto row = p.row(r);
    row.tail(p.cols() - seen).setZero();
    if (seen == 0 || (saved_lse && saved_lse[i0 + r] == neg_inf)) {
      row.setZero();
      if (new_lse) new_lse[i0 + r] = neg_inf;
      continue;
    }
    auto head = row.head(seen).array();
    const T shift = saved_lse ? T(saved_lse[i0 + r]) : head.maxCoeff();
    head = (head - shift).exp();
    const T total = head.sum();
    head /= total;
    if (new_lse) new_lse[i0 + r] = static_cast<float>(shift + std::log(total));
  }
}

template <class T>
void forward(const T* q, const T* k, const T* v, const Sizes& n, T scale, bool causal, T* out, float* lse) {
#pragma omp parallel if (n.parallel())
  {
    Mat<T> p;  // one block's scores, then probabilities: reused by every block of this thread
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < n.B; ++b) {
      for (int64_t blk = 0; blk < n.blocks(); ++blk) {
        const int64_t i0 = blk * kQueryBlock, rows = std::min(kQueryBlock, n.L - i0);
        const int64_t s_used = causal ? std::min(n.S, i0 + rows) : n.S;  // keys any row of the block sees
        ConstMap<T> Q(q + (b * n.L + i0) * n.E, rows, n.E), K(k + b * n.S * n.E, s_used, n.E);
        ConstMap<T> V(v + b * n.S * n.Ev, s_used, n.Ev);
        MutMap<T> O(out + (b * n.L + i0) * n.Ev, rows, n.Ev);
        p.resize(rows, s_used);
        p.noalias() = Q * K.transpose();
        p *= scale;
        probabilities<T>(p, i0, n.S, causal, nullptr, lse + b * n.L);
        O.noalias() = p * V;
      }
    }
  }
}

template <class T>
void backward(const T* dout, const T* q, const T* k, const T* v, const T* out, const float* lse_in, const Sizes& n,
              T scale, bool causal, T* dq, T* dk, T* dv) {
#pragma omp parallel if (n.parallel() && n.B > 1)
  {
    Mat<T> p, ds;
    Eigen::Array<T, Eigen::Dynamic, 1> d;
#pragma omp for schedule(static)
    for (int64_t b = 0; b < n.B; ++b) {
      ConstMap<T> O(out + b * n.L * n.Ev, n.L, n.Ev), dO_all(dout + b * n.L * n.Ev, n.L, n.Ev);
      d = (O.array() * dO_all.array()).rowwise().sum();  // D_i = dO_i . O_i
      MutMap<T> dK(dk + b * n.S * n.E, n.S, n.E), dV(dv + b * n.S * n.Ev, n.S, n.Ev);
      dK.setZero();
      dV.setZero();
      const float* lse = lse_in + b * n.L;
      for (int64_t blk = 0; blk < n.blocks(); ++blk) {
        const int64_t i0 = blk * kQueryBlock, rows = std::min(kQueryBlock, n.L - i0);
        const int64_t s_used = causal ? std::min(n.S, i0 + rows) : n.S;
        ConstMap<T> Q(q + (b * n.L + i0) * n.E, rows, n.E), K(k + b * n.S * n.E, s_used, n.E);
        ConstMap<T> V(v + b * n.S * n.Ev, s_used, n.Ev), dO(dout + (b * n.L + i0) * n.Ev, rows, n.Ev);
        MutMap<T> dQ(dq + (b * n.L + i0) * n.E, rows, n.E);
        p.resize(rows, s_used);
        p.noalias() = Q * K.transpose();
        p *= scale;
        probabilities<T>(p, i0, n.S, causal, lse, nullptr);
        dV.topRows(s_used).noalias() += p.transpose() * dO;
        ds.resize(rows, s_used);
        ds.noalias() = dO * V.transpose();  // dP
        ds.array() = p.array() * (ds.array().colwise() - d.segment(i0, rows));
        dQ.noalias() = scale * ds * K;
        dK.topRows(s_used).noalias() += scale * ds.transpose() * Q;
      }
    }
  }
}

// q [..., L, E], k [..., S, E], v [..., S, Ev] with one batch shape (3-D or 4-D).
Sizes sizes_of(const Tensor& q, const Tensor& k, const Tensor& v) {
  MINIDL_CHECK((q.dim() == 3 || q.dim() == 4) && k.dim() == q.dim() && v.dim() == q.dim(),
               "fused attention (CPU): expected q, k, v all [B, rows, E] or all [B1, B2, rows, E], got ", q.shape(),
               ", ", k.shape(), ", ", v.shape());
  return {shape_numel(Shape(q.shape().begin(), q.shape().end() - 2)), q.size(-2), k.size(-2), q.size(-1), v.size(-1)};
}

// t itself where contiguous, else a contiguous copy.
Tensor dense(Kernels& kernels, const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor copy = Tensor::empty(t.shape(), t.dtype(), t.device());
  kernels.copy(t, copy);
  return copy;
}

// A contiguous stand-in for an output of another layout, copied into it by finish().
class DenseOutput {
 public:
  DenseOutput(Kernels& kernels, Tensor& target)
      : kernels_(kernels), target_(target),
        dense_(target.is_contiguous() ? target : Tensor::empty(target.shape(), target.dtype(), target.device())) {}
  Tensor& get() { return dense_; }
  void finish() {
    if (!dense_.is_same(target_)) kernels_.copy(dense_, target_);
  }

 private:
  Kernels& kernels_;
  Tensor& target_;
  Tensor dense_;
};

}  // namespace

bool CpuKernels::fused_attention_supports(DType dtype, int64_t e, int64_t ev, bool dropout) const {
  return is_floating(dtype) && e > 0 && ev > 0 && !dropout;
}

void CpuKernels::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                   double dropout_p, Tensor& out, Tensor& logsumexp, Tensor& rng_state,
                                   Tensor* keep_mask) {
  (void)rng_state, (void)keep_mask;  // no dropout here, so no generator state or mask to record
  MINIDL_CHECK(dropout_p == 0, "attention_forward (CPU): no fused dropout (the op composes it), got dropout_p=",
               dropout_p);
  if (is_reduced_floating(q.dtype())) {  // in float32, rounded once into out (ops/widen_16bit.h)
    Widened wide(*this);
    Tensor out32 = wide.output(out);
    attention_forward(wide.input(q), wide.input(k), wide.input(v), scale, causal, 0, out32, logsumexp, rng_state,
                      nullptr);
    wide.finish();
    return;
  }
  const Sizes n = sizes_of(q, k, v);
  MINIDL_CHECK(logsumexp.is_contiguous() && logsumexp.dtype() == kFloat32 && logsumexp.numel() == n.B * n.L,
               "attention_forward (CPU): expected logsumexp a contiguous float32 of ", n.B, " x ", n.L,
               " elements, got ", logsumexp.shape(), " ", logsumexp.dtype());
  const Tensor qd = dense(*this, q), kd = dense(*this, k), vd = dense(*this, v);
  DenseOutput o(*this, out);
  dispatch_floating(q.dtype(), "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    forward<T>(qd.data<T>(), kd.data<T>(), vd.data<T>(), n, T(scale), causal, o.get().data<T>(),
               logsumexp.data<float>());
  });
  o.finish();
}

void CpuKernels::attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& out, const Tensor& logsumexp, const Tensor& rng_state,
                                    const Tensor& keep_mask, double scale, bool causal, double dropout_p,
                                    Tensor& grad_q, Tensor& grad_k, Tensor& grad_v) {
  MINIDL_CHECK(dropout_p == 0, "attention_backward (CPU): no fused dropout (the op composes it), got dropout_p=",
               dropout_p);
  if (is_reduced_floating(q.dtype())) {
    Widened wide(*this);
    Tensor gq = wide.output(grad_q), gk = wide.output(grad_k), gv = wide.output(grad_v);
    attention_backward(wide.input(grad_out), wide.input(q), wide.input(k), wide.input(v), wide.input(out), logsumexp,
                       rng_state, keep_mask, scale, causal, 0, gq, gk, gv);
    wide.finish();
    return;
  }
  const Sizes n = sizes_of(q, k, v);
  const Tensor dod = dense(*this, grad_out), qd = dense(*this, q), kd = dense(*this, k), vd = dense(*this, v);
  const Tensor od = dense(*this, out), lse = dense(*this, logsumexp);
  DenseOutput gq(*this, grad_q), gk(*this, grad_k), gv(*this, grad_v);
  dispatch_floating(q.dtype(), "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    backward<T>(dod.data<T>(), qd.data<T>(), kd.data<T>(), vd.data<T>(), od.data<T>(), lse.data<float>(), n, T(scale),
                causal, gq.get().data<T>(), gk.get().data<T>(), gv.get().data<T>());
  });
  gq.finish(), gk.finish(), gv.finish();
}

}  // namespace minidl
