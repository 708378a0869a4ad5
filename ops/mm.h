#pragma once
// libtorch's BLAS-named products: matmul under stricter shape rules (mm, bmm, mv, dot, outer), and
// the ones that add a product to a tensor, beta * input + alpha * product (addmm, addbmm, baddbmm,
// addmv, addr). As in PyTorch, input broadcasts to the product's shape, and beta == 0 ignores it
// (NaN and infinity in it too); the operands of one call share a dtype.
#include <optional>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"

namespace minidl {

/// [n, m] @ [m, p] -> [n, p]; both exactly 2-D.   mm(a, b)
Tensor mm(const Tensor& a, const Tensor& b);
/// [b, n, m] @ [b, m, p] -> [b, n, p]; both exactly 3-D with one batch size.   bmm(q, k.transpose(1, 2))
Tensor bmm(const Tensor& a, const Tensor& b);
/// [n, m] @ [m] -> [n].   mv(w, x)
Tensor mv(const Tensor& mat, const Tensor& vec);
/// The 0-d inner product of two 1-D tensors of one size and dtype.   dot(a, b).item<float>()
Tensor dot(const Tensor& a, const Tensor& b);
/// [n] x [m] -> [n, m], a[i] * b[j], the dtypes promoted as mul promotes them.   outer(a, b)
Tensor outer(const Tensor& a, const Tensor& b);

/// beta * input + alpha * (mat1 @ mat2); mat1 [n, m], mat2 [m, p], input broadcast to [n, p]. The
/// GEMM adds the product to input's copy (cuBLAS's beta); a bias row with beta = alpha = 1 is
/// linear's bias epilogue.   addmm(bias, x, w.t())   addmm(c, a, b, 0.5, 2.0)
Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
             const Scalar& alpha = 1);
/// beta * input + alpha * bmm(batch1, batch2); batch1 [b, n, m], batch2 [b, m, p], input broadcast
/// to [b, n, p]: attention's scores with their additive mask in one GEMM.
///   baddbmm(mask, q, k.transpose(1, 2), 1, 1 / std::sqrt(head_size))
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
               const Scalar& alpha = 1);
/// beta * input + alpha * sum over i of batch1[i] @ batch2[i]; input broadcast to [n, p]. One GEMM
/// over the batch laid side by side along m.   addbmm(c, a, b)
Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
              const Scalar& alpha = 1);
/// beta * input + alpha * mv(mat, vec); input broadcast to [n].   addmv(b, w, x)
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const Scalar& beta = 1,
             const Scalar& alpha = 1);
/// beta * input + alpha * outer(vec1, vec2); input broadcast to [n, m].   addr(w, u, v, 1, -lr)
Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, const Scalar& beta = 1,
            const Scalar& alpha = 1);

// Products of several factors, made of the ones above and matmul (ops/mm_composed.cpp).

/// The sum over dims_a of a and dims_b of b (pairwise, of equal sizes): a's other dims, then b's.
///   tensordot(a, b, {1, 2}, {0, 1})
Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int64_t>& dims_a,
                 const std::vector<int64_t>& dims_b);
/// The cross product of 3-vectors along `dim` (of size 3), a and b broadcast, as
/// torch.linalg.cross.   linalg_cross(u, v)
Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim = -1);
/// torch.cross: without a dim, along the first dim of size 3.
Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim = std::nullopt);
/// The last `dims` dims of a with the first `dims` of b.   tensordot(a, b, 2)
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims);
/// The product of a chain of matrices in the order of fewest multiplications (the first may be 1-D,
/// a row; the last 1-D, a column), as torch.linalg.multi_dot.   multi_dot({a, b, c})
Tensor multi_dot(const std::vector<Tensor>& tensors);
/// multi_dot of 2-D matrices (PyTorch's older name).
Tensor chain_matmul(const std::vector<Tensor>& matrices);
/// x [..., m, m] to the n-th power (n >= 0; 0 gives the identity) by repeated squaring.
///   matrix_power(transition, 8)
Tensor matrix_power(const Tensor& x, int64_t n);

}  // namespace minidl
