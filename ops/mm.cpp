// The BLAS-named products. mm, bmm, mv and dot check their stricter shapes, then run matmul (and
// take its gradient). addmm and baddbmm are one GEMM each: input, broadcast, is copied into the
// output and the kernel adds alpha * product to beta times it, as cuBLAS's beta does; their backward
// is made of recorded ops (matmul, sum_to_shape, mul), so it is differentiable again. addbmm and
// addmv reshape their operands into addmm's; addr and outer are elementwise.
#include "ops/mm.h"

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/autocast_policy.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/matmul.h"
#include "ops/matmul_operand.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

namespace {

bool is_zero(const Scalar& s) { return s.to_double() == 0; }
bool is_one(const Scalar& s) { return s.to_double() == 1; }
Tensor scaled(const Tensor& t, const Scalar& s) { return is_one(s) ? t : mul(t, s); }

// The checks every add-a-product op makes: one device, one dtype, input broadcasting to `out`.
void check_add_product(const char* op, const Tensor& input, const Tensor& a, const Tensor& b, const Shape& out) {
  check_same_device(op, {input, a, b});
  MINIDL_CHECK(input.dtype() == a.dtype() && a.dtype() == b.dtype(), op,
               ": expected input and both operands to have one dtype, got ", input.dtype(), ", ", a.dtype(), " and ",
               b.dtype());
  MINIDL_CHECK(broadcasts_to(input.shape(), out), op, ": the input of shape ", input.shape(), " does not broadcast to the product's shape ",
               out);
}

void check_floating(const char* op, const Tensor& a) {
  MINIDL_CHECK(is_floating(a.dtype()), op, ": expected floating tensors, got ", a.dtype());
}

// beta * input + alpha * (a @ b) for 2-D a, b (addmm) and 3-D a, b of one batch (baddbmm): one GEMM
// into a copy of input.
Tensor add_product(const char* op, const Tensor& input, const Tensor& a, const Tensor& b, const Scalar& beta,
                   const Scalar& alpha) {
  check_floating(op, a);
  Shape out_shape = a.shape();
  out_shape.back() = b.size(-1);
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  if (out.numel() > 0) {
    GemmOperand oa, ob;
    {
      NoGradGuard no_grad;
      if (!is_zero(beta)) copy_(out, input);
      oa = as_operand(a);
      ob = as_operand(b);
    }
    if (a.size(-1) == 0) {  // an empty sum: the kernels need not scale c for it
      NoGradGuard no_grad;
      out = is_zero(beta) ? zeros_like(out) : scaled(out, beta);
    } else {
      kernels_for(out.device()).gemm(oa.data, oa.trans, ob.data, ob.trans, out, alpha.to_double(),
                                     is_zero(beta) ? 0.0 : beta.to_double());
    }
  }
  if (autograd::needs_recording({input, a, b})) {
    // Each operand is kept, as given, for the other's gradient.
    Tensor a_given = b.requires_grad() ? a : Tensor(), b_given = a.requires_grad() ? b : Tensor();
    autograd::record(op, out, {input, a, b}, {a_given, b_given},
                     [a_given, b_given, beta, alpha, input_shape = input.shape()](const Tensor& g,
                                                                                 const std::vector<bool>& needs) {
                       return std::vector<Tensor>{
                           needs[0] ? sum_to_shape(scaled(g, beta), input_shape) : Tensor(),
                           needs[1] ? scaled(matmul(g, transpose(b_given, -2, -1)), alpha) : Tensor(),
                           needs[2] ? scaled(matmul(transpose(a_given, -2, -1), g), alpha) : Tensor()};
                     },
                     true);
  }
  return out;
}

void check_mm_shapes(const char* op, const Tensor& a, const Tensor& b) {
  MINIDL_CHECK(a.dim() == 2, op, ": expected mat1 to be a 2-D matrix, got a ", a.dim(), "-d tensor of shape ",
               a.shape());
  MINIDL_CHECK(b.dim() == 2, op, ": expected mat2 to be a 2-D matrix, got a ", b.dim(), "-d tensor of shape ",
               b.shape());
  MINIDL_CHECK(a.size(1) == b.size(0), op, ": mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
               a.size(1), " and ", b.size(0), "x", b.size(1), ")");
}

void check_bmm_shapes(const char* op, const Tensor& a, const Tensor& b) {
  MINIDL_CHECK(a.dim() == 3, op, ": expected batch1 to be a 3-D tensor, got ", a.dim(), "-d of shape ", a.shape());
  MINIDL_CHECK(b.dim() == 3, op, ": expected batch2 to be a 3-D tensor, got ", b.dim(), "-d of shape ", b.shape());
  MINIDL_CHECK(a.size(0) == b.size(0), op, ": expected one batch size, got ", a.size(0), " and ", b.size(0));
  MINIDL_CHECK(a.size(2) == b.size(1), op, ": expected batch2's size 1 (", b.size(1), ") to equal batch1's size 2 (",
               a.size(2), "), got shapes ", a.shape(), " and ", b.shape());
}

void check_mv_shapes(const char* op, const Tensor& mat, const Tensor& vec) {
  MINIDL_CHECK(mat.dim() == 2 && vec.dim() == 1, op, ": expected a 2-D matrix and a 1-D vector, got shapes ",
               mat.shape(), " and ", vec.shape());
  MINIDL_CHECK(mat.size(1) == vec.size(0), op, ": size mismatch, got a matrix of shape ", mat.shape(),
               " and a vector of ", vec.size(0), " elements");
}

void check_vectors(const char* op, const Tensor& a, const Tensor& b) {
  MINIDL_CHECK(a.dim() == 1 && b.dim() == 1, op, ": expected 1-D tensors, got shapes ", a.shape(), " and ",
               b.shape());
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(mm, mm, a, b);
  check_mm_shapes("mm", a, b);
  return matmul(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(bmm, bmm, a, b);
  check_bmm_shapes("bmm", a, b);
  return matmul(a, b);
}

Tensor mv(const Tensor& mat, const Tensor& vec) {
  MINIDL_AUTOCAST(mv, mv, mat, vec);
  autocast::ExcludeGuard as_given;  // not on PyTorch's CPU list: its GEMM runs in the dtype given
  check_mv_shapes("mv", mat, vec);
  return matmul(mat, vec);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(dot, dot, a, b);
  autocast::ExcludeGuard as_given;  // promoted on CUDA, as given on the CPU (its GEMM too)
  check_vectors("dot", a, b);
  MINIDL_CHECK(a.size(0) == b.size(0), "dot: expected tensors of one size, got ", a.size(0), " and ", b.size(0),
               " elements");
  MINIDL_CHECK(a.dtype() == b.dtype(), "dot: expected both vectors to have one dtype, got ", a.dtype(), " and ",
               b.dtype());
  return matmul(a, b);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  check_vectors("outer", a, b);
  return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) {
  MINIDL_AUTOCAST(addmm, addmm, input, mat1, mat2, beta, alpha);
  check_mm_shapes("addmm", mat1, mat2);
  check_add_product("addmm", input, mat1, mat2, {mat1.size(0), mat2.size(1)});
  // nn.Linear's form in PyTorch: a bias row added once is the GEMM's bias epilogue.
  if (input.dim() == 1 && input.size(0) == mat2.size(1) && is_one(beta) && is_one(alpha) && is_floating(input.dtype()))
    return linear(mat1, transpose(mat2, 0, 1), input);
  return add_product("addmm", input, mat1, mat2, beta, alpha);
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  MINIDL_AUTOCAST(baddbmm, baddbmm, input, batch1, batch2, beta, alpha);
  check_bmm_shapes("baddbmm", batch1, batch2);
  check_add_product("baddbmm", input, batch1, batch2, {batch1.size(0), batch1.size(1), batch2.size(2)});
  return add_product("baddbmm", input, batch1, batch2, beta, alpha);
}

Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
              const Scalar& alpha) {
  MINIDL_AUTOCAST(addbmm, addbmm, input, batch1, batch2, beta, alpha);
  check_bmm_shapes("addbmm", batch1, batch2);
  const int64_t batch = batch1.size(0), n = batch1.size(1), m = batch1.size(2), p = batch2.size(2);
  check_add_product("addbmm", input, batch1, batch2, {n, p});
  // sum_i A_i @ B_i = [A_0 A_1 ...] @ [B_0; B_1; ...]: batch1 laid side by side (one copy), batch2 stacked (a view).
  const Tensor wide = reshape(permute(batch1, {1, 0, 2}), {n, batch * m});
  return add_product("addbmm", input, wide, reshape(batch2, {batch * m, p}), beta, alpha);
}

Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha) {
  MINIDL_AUTOCAST(addmv, addmv, input, mat, vec, beta, alpha);
  autocast::ExcludeGuard as_given;  // as mv
  check_mv_shapes("addmv", mat, vec);
  check_add_product("addmv", input, mat, vec, {mat.size(0)});
  const Tensor column = input.dim() == 0 ? input : unsqueeze(input, -1);
  return squeeze(add_product("addmv", column, mat, unsqueeze(vec, 1), beta, alpha), 1);
}

Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, const Scalar& beta, const Scalar& alpha) {
  MINIDL_AUTOCAST(addr, addr, input, vec1, vec2, beta, alpha);
  check_vectors("addr", vec1, vec2);
  check_add_product("addr", input, vec1, vec2, {vec1.size(0), vec2.size(0)});
  MINIDL_CHECK(input.dtype() != kBool, "addr: expected numeric tensors, got bool");
  MINIDL_CHECK(is_floating(input.dtype()) || (!beta.is_floating_point() && !alpha.is_floating_point()),
               "addr: for integral tensors, beta and alpha must be integers, got ", beta, " and ", alpha);
  const Tensor product = scaled(outer(vec1, vec2), alpha);
  if (is_zero(beta)) return product;
  return add(product, scaled(input, beta));
}

}  // namespace minidl
