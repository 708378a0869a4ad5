#pragma once
// Runs a kernel on bfloat16 / float16 tensors through float32 copies: the 16-bit inputs are widened
// to float32, the float32 kernel computes, and each 16-bit output is rounded once when copied back.
// This is what a kernel that computes in compute_t<T> would give, for the kernels that are not hot
// enough to need their own 16-bit code (softmax, losses, norms, the rarer pools, upsample); mixed
// precision runs most of these in float32 anyway. A kernel that is hot on the GPU (elementwise, sums,
// max_pool2d, dropout) has a native 16-bit path instead. The op wraps its kernel call, once for every
// device; for other dtypes every call below passes its tensor through untouched:
//   Widened w(kernels_for(x.device()));
//   Tensor out32 = w.output(out);
//   w.kernels().softmax(w.input(x), ..., out32);
//   w.finish();
#include <utility>
#include <vector>

#include "ops/kernels.h"

namespace minidl {

/// The float32 stand-ins of one kernel call; see the example above.
class Widened {
 public:
  explicit Widened(Kernels& kernels) : kernels_(kernels) {}
  Widened(const Widened&) = delete;
  Widened& operator=(const Widened&) = delete;

  Kernels& kernels() { return kernels_; }

  /// A float32 copy of a 16-bit tensor; any other tensor (float32 params, int64 indices) unchanged.
  Tensor input(const Tensor& t) {
    if (!t.defined() || !is_reduced_floating(t.dtype())) return t;
    Tensor wide = Tensor::empty(t.shape(), kFloat32, t.device());
    kernels_.copy(t, wide);
    return wide;
  }
  /// A float32 stand-in for an output (its values copied, for kernels that accumulate into it); the
  /// 16-bit tensor receives the stand-in's values, rounded, at finish().
  Tensor output(Tensor& t) {
    if (!t.defined() || !is_reduced_floating(t.dtype())) return t;
    Tensor wide = input(t);
    pending_.emplace_back(&t, wide);
    return wide;
  }
  /// Copies every stand-in back into its 16-bit output.
  void finish() {
    for (auto& [narrow, wide] : pending_) kernels_.copy(wide, *narrow);
    pending_.clear();
  }

 private:
  Kernels& kernels_;
  std::vector<std::pair<Tensor*, Tensor>> pending_;
};

/// For optional tensors (Tensor*): the widened tensor, or nullptr.
struct OptionalWide {
  Tensor value;
  Tensor* get() { return value.defined() ? &value : nullptr; }
};
inline OptionalWide widen_input(Widened& w, const Tensor* t) { return {t ? w.input(*t) : Tensor()}; }
inline OptionalWide widen_output(Widened& w, Tensor* t) { return {t ? w.output(*t) : Tensor()}; }

/// Kernels::cross_entropy on 16-bit logits through float32, for a backend whose kernel computes in
/// the logits' own type: each output (loss, count, gradient) rounded once to its dtype.
inline void cross_entropy_widened(Kernels& k, const Tensor& logits, const Tensor& target, int64_t ignore_index,
                                  Tensor& loss, Tensor& count, Tensor* grad_logits) {
  Widened wide(k);
  Tensor loss32 = wide.output(loss), count32 = wide.output(count);
  OptionalWide grad32 = widen_output(wide, grad_logits);
  k.cross_entropy(wide.input(logits), target, ignore_index, loss32, count32, grad32.get());
  wide.finish();
}

}  // namespace minidl
