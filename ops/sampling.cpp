// multinomial, composed of existing ops so that the CPU and CUDA share it and no kernel is needed.
// Shapes: probs [N, C] (or [C]) -> [N, S] (or [S]). Everything is computed in float64, where a
// weight of 1e-30 beside one of 1 still counts.
//  - With replacement: inverse-CDF sampling. u ~ U[0, total) per draw; the category is the number
//    of cumulative sums (the last excluded) at or below u. A zero weight never owns an interval.
//  - Without replacement: the exponential trick PyTorch uses. Key_c = p_c / E_c with E_c ~ Exp(1);
//    the num_samples largest keys are a draw without replacement, in sequential-draw order.
#include "ops/sampling.h"

#include <algorithm>
#include <vector>

#include "core/autograd.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/logical.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/slice.h"
#include "ops/sort.h"
#include "ops/view.h"

namespace minidl {

namespace {

// The data checks of torch.multinomial, one row flag each, read back in one copy.
void check_distribution(const Tensor& p, int64_t num_samples, bool replacement) {
  const Tensor bad_weight = any(logical_or(lt(p, 0.0), logical_not(isfinite(p))), 1);
  const Tensor zero_sum = le(sum(p, {1}), 0.0);
  const Tensor too_few = replacement ? zeros_like(zero_sum) : lt(sum(gt(p, 0.0), {1}), num_samples);
  const std::vector<int64_t> flags = stack({bad_weight, zero_sum, too_few}, 0).to(kInt64).to_vector<int64_t>();
  const int64_t rows = p.size(0);
  for (int64_t r = 0; r < rows; ++r) {
    MINIDL_CHECK(!flags[static_cast<size_t>(r)],
                 "multinomial: probability tensor contains either inf, nan or element < 0 (row ", r, ")");
    MINIDL_CHECK(!flags[static_cast<size_t>(rows + r)],
                 "multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row ", r);
    MINIDL_CHECK(!flags[static_cast<size_t>(2 * rows + r)], "multinomial: invalid multinomial distribution (with "
                 "replacement=False, not enough nonzero categories to sample ", num_samples, ") in row ", r);
  }
}

Tensor with_replacement(const Tensor& p, int64_t num_samples) {
  const int64_t rows = p.size(0), categories = p.size(1);
  const Tensor cdf = cumsum(p, 1);
  const Tensor total = narrow(cdf, 1, categories - 1, 1);                        // [N, 1]
  const Tensor bounds = unsqueeze(narrow(cdf, 1, 0, categories - 1), 1);       // [N, 1, C-1]
  // The comparison is [N, S, C-1]: draws go in chunks of about 4M comparisons to bound memory.
  const int64_t per_chunk = std::max<int64_t>(1, (int64_t(1) << 22) / std::max<int64_t>(1, rows * categories));
  std::vector<Tensor> chunks;
  for (int64_t start = 0; start < num_samples; start += per_chunk) {
    const int64_t n = std::min(per_chunk, num_samples - start);
    const Tensor u = rand({rows, n}, kFloat64, p.device()) * total;             // [N, n] in [0, total)
    chunks.push_back(sum(le(bounds, unsqueeze(u, 2)), {2}));                   // int64 [N, n]
  }
  return chunks.size() == 1 ? chunks[0] : cat(chunks, 1);
}

Tensor without_replacement(const Tensor& p, int64_t num_samples) {
  // E = -log(1 - u) with u in [0, 1): E may be 0 (key inf, a sure first pick for a nonzero weight);
  // zero weights get key -1 (not 0 / E, which would be NaN at E = 0) and so come last.
  const Tensor exponential = neg(log1p(neg(rand(p.shape(), kFloat64, p.device()))));
  const Tensor keys = where(gt(p, 0.0), p / exponential, -1.0);
  return std::get<1>(topk(keys, num_samples, 1));
}

}  // namespace

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  MINIDL_CHECK(probs.dim() == 1 || probs.dim() == 2, "multinomial: expected probs of 1 or 2 dims, got shape ",
               probs.shape());
  MINIDL_CHECK(is_floating(probs.dtype()), "multinomial: expected floating probabilities, got ", probs.dtype());
  const int64_t categories = probs.size(-1);
  MINIDL_CHECK(categories > 0, "multinomial: expected at least one category, got shape ", probs.shape());
  MINIDL_CHECK(categories <= (int64_t(1) << 24), "multinomial: number of categories cannot exceed 2^24, got ",
               categories);
  MINIDL_CHECK(num_samples > 0, "multinomial: cannot sample num_samples <= 0 samples, got ", num_samples);
  MINIDL_CHECK(replacement || num_samples <= categories, "multinomial: cannot sample num_samples=", num_samples,
               " > ", categories, " categories without replacement");
  NoGradGuard no_grad;  // indices: nothing to differentiate
  Tensor p = probs.to(kFloat64);
  if (probs.dim() == 1) p = unsqueeze(p, 0);
  if (p.size(0) == 0) return Tensor::empty(probs.dim() == 1 ? Shape{num_samples} : Shape{0, num_samples}, kInt64,
                                           probs.device());
  check_distribution(p, num_samples, replacement);
  Tensor out = replacement ? with_replacement(p, num_samples) : without_replacement(p, num_samples);
  return probs.dim() == 1 ? squeeze(out, 0) : out;
}

}  // namespace minidl
