#pragma once
// Tensors built from several others, as PyTorch's: meshgrid and cartesian_prod from 1-D tensors,
// block_diag from matrices, kron from two tensors. Each is composed of views, products and copies,
// so each is differentiable.
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// For 1-D (or 0-d) tensors of sizes n0, n1, ...: one tensor per input, of shape [n0, n1, ...]
/// ("ij") or with the first two sizes swapped ("xy", as NumPy), each input repeated along the other
/// dims (expanded views).   auto grid = meshgrid({ys, xs}, "ij");  // grid[0][i][j] == ys[i]
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "ij");
/// [n0 * n1 * ..., k]: every combination of the k 1-D inputs' elements, the last varying fastest.
///   cartesian_prod({a, b})
Tensor cartesian_prod(const std::vector<Tensor>& tensors);
/// [count, r]: every r-element combination of the 1-D x's elements, by position, in itertools'
/// order (with_replacement: positions may repeat); r = 0 gives an empty 1-D tensor, as
/// torch.combinations.   combinations(players, 2)  // every pairing
Tensor combinations(const Tensor& x, int64_t r = 2, bool with_replacement = false);
/// The block-diagonal matrix of 0-d, 1-D (one row) and 2-D tensors, dtypes promoted.
///   block_diag({a, b})  // [[a, 0], [0, b]]
Tensor block_diag(const std::vector<Tensor>& tensors);
/// At least 1, 2 or 3 dims, as NumPy adds them: 0-d -> [1], [1, 1], [1, 1, 1]; [n] -> [1, n] and
/// [1, n, 1]; [m, n] -> [m, n, 1]. Views.   atleast_2d(v)
Tensor atleast_1d(const Tensor& x);
Tensor atleast_2d(const Tensor& x);
Tensor atleast_3d(const Tensor& x);
/// Joined as NumPy joins: hstack along dim 1 (dim 0 for 1-D tensors), vstack (row_stack) along dim 0
/// after atleast_2d, dstack along dim 2 after atleast_3d, column_stack with 0-d and 1-D tensors as
/// columns.   vstack({row_a, row_b})  // [2, n]
Tensor hstack(const std::vector<Tensor>& tensors);
Tensor vstack(const std::vector<Tensor>& tensors);
Tensor row_stack(const std::vector<Tensor>& tensors);
Tensor dstack(const std::vector<Tensor>& tensors);
Tensor column_stack(const std::vector<Tensor>& tensors);
/// The Kronecker product: out[i * b.size + j] = a[i] * b[j] in every dim (the fewer dims padded
/// with leading 1s).   kron(eye(2), m)  // [[m, 0], [0, m]]
Tensor kron(const Tensor& a, const Tensor& b);

}  // namespace minidl
