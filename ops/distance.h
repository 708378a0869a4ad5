#pragma once
// Vector normalization and distances along a dim, as torch.nn.functional has them.
#include <string>

#include "core/tensor.h"

namespace minidl {

/// x / max(||x||_p, eps) along `dim` (each slice scaled to unit p-norm).   normalize(x, 2, 1)
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);

/// The cosine of the angle between x1 and x2 along `dim`: sum(x1 * x2) / (||x1|| ||x2||), each norm
/// at least eps; x1 and x2 broadcast, `dim` is dropped.   cosine_similarity(a, b)  // [N, D] -> [N]
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);

/// ||x1 - x2 + eps||_p along the last dim.   pairwise_distance(a, b)  // [N, D] -> [N]
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false);

/// The p-norm distance between every row of x1 [..., P, M] and every row of x2 [..., R, M]:
/// [..., P, R], batch dims broadcast, as torch.cdist. For p = 2 with more than 25 rows on a side
/// ("use_mm_for_euclid_dist_if_necessary"; "use_mm_for_euclid_dist" always) it is computed from
/// one product, sqrt(|a|^2 + |b|^2 - 2 a.b) clamped at 1e-30, as PyTorch does; otherwise from the
/// differences ("donot_use_mm_for_euclid_dist" always).   cdist(queries, keys)
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0,
             const std::string& compute_mode = "use_mm_for_euclid_dist_if_necessary");

/// The p-norm of a - b (broadcast), 0-d.   dist(a, b), dist(a, b, 1)
Tensor dist(const Tensor& a, const Tensor& b, double p = 2.0);
/// The p-norm distances between the rows of x [N, M], i < j, row by row: [N (N - 1) / 2].
///   pdist(points)
Tensor pdist(const Tensor& x, double p = 2.0);
/// x with each slice along `dim` whose p-norm exceeds maxnorm scaled down to it (by
/// maxnorm / (norm + 1e-7), as PyTorch).   renorm(embedding_weight, 2, 0, 1.0)
Tensor renorm(const Tensor& x, double p, int64_t dim, double maxnorm);

}  // namespace minidl
