// GEMM on cuBLAS. cuBLAS is column-major and our tensors are row-major; a row-major [R, C] buffer is
// the column-major [C, R] matrix, its transpose. So C = op(A) op(B) is computed as
// C^T = op(B)^T op(A)^T in column-major terms: swap the operands and the dimensions M and N, keep
// each operand's own transpose flag. No data is copied or transposed.
// A batch is one strided-batched call; a 2-D operand shared by every batch has stride 0.
// Float32 products of 2-D operands go to cuBLASLt (ops/cuda/cublaslt.h), whose algorithm is chosen
// per shape by timing, with the bias and ReLU of linear layers in the epilogue. The products of a
// layer with at most 16 outputs, and any 2-D product over k <= 16, run on minidl's own kernels
// instead (ops/cuda/linear_narrow.cu says why).
// bfloat16 and float16 products run on cuBLASLt, or cublasGemmEx, with every operand in the 16-bit
// type and float32 accumulation (CUBLAS_COMPUTE_32F, float alpha and beta); float32 on
// CUBLAS_COMPUTE_32F_FAST_TF32 where allow_tf32_matmul() (ops/backend_setting.h). A large 16-bit
// product whose rows are not 16 bytes long runs on zero-padded copies (gemm_padded says why).
#include <cublas_v2.h>

#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/cuda/check.h"
#include "core/deterministic.h"
#include "ops/backend_setting.h"
#include "ops/cuda/cublaslt.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/timing.h"

namespace minidl {

namespace {

int to_int(int64_t v, const char* what) {
  MINIDL_CHECK(v <= std::numeric_limits<int>::max(), "gemm on CUDA: ", what, " = ", v, " exceeds cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

// Whether a GemmCall has the layout of a weight gradient g^T x, which narrow_weight_grad computes
// with its bias gradient for a layer with at most 16 outputs (ops/cuda/linear_narrow.cu), and
// short_k_weight_grad in float32 over at most 64 rows (ops/cuda/linear_short_k.cu).
bool weight_grad_layout(const Kernels::GemmCall& call) {
  return call.trans_a && !call.trans_b && call.a.dim() == 2 && call.b.dim() == 2 && call.c.dim() == 2;
}

// The element types and compute type of a product of a (and b, of a's dtype) into c, for cuBLASLt.
cuda::LtTypes lt_types(const Tensor& a, const Tensor& c) {
  return {a.dtype(), a.dtype() == kFloat32 && allow_tf32_matmul(), c.dtype()};
}

// Whether cuBLASLt takes products of this dtype.
bool lt_dtype(DType dtype) { return dtype == kFloat32 || is_reduced_floating(dtype); }

// Whether a and b (of one dtype) multiply into c: of their dtype, or float32 from 16-bit inputs
// (the gradient of a master weight under autocast, ops/autocast_masters.h).
bool mixed_product(const Tensor& a, const Tensor& c) { return a.dtype() != c.dtype(); }

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float16: return CUDA_R_16F;
    default: MINIDL_FAIL("gemm on CUDA: expected float32, bfloat16 or float16, got ", dtype);
  }
}

// cublasGemmStridedBatchedEx (one product where batches is 1) in column-major terms, for float32 with
// TF32 and for the 16-bit types: a and b in `dtype`, c in `c_dtype` (dtype, or float32 from 16-bit
// inputs), float32 accumulation, float alpha and beta.
void gemm_ex(cublasHandle_t handle, DType dtype, DType c_dtype, cublasOperation_t op_a, cublasOperation_t op_b, int m,
             int n, int k, float alpha, const void* a, int lda, long long stride_a, const void* b, int ldb,
             long long stride_b, float beta, void* c, int ldc, long long stride_c, int batches) {
  const cudaDataType_t type = cuda_data_type(dtype), c_type = cuda_data_type(c_dtype);
  const cublasComputeType_t compute =
      dtype == kFloat32 && allow_tf32_matmul() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (batches == 1) {
    CUBLAS_CHECK(cublasGemmEx(handle, op_a, op_b, m, n, k, &alpha, a, type, lda, b, type, ldb, &beta, c, c_type, ldc,
                              compute, CUBLAS_GEMM_DEFAULT));
  } else {
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, op_a, op_b, m, n, k, &alpha, a, type, lda, stride_a, b, type, ldb,
                                            stride_b, &beta, c, c_type, ldc, stride_c, batches, compute,
                                            CUBLAS_GEMM_DEFAULT));
  }
}

// Work just queued on the side stream, which read `reads` and wrote the non-null `writes`, joins
// the compute stream only where those are next used (core/cuda/side_stream.cpp).
void join_later(int device, std::vector<Tensor> reads, std::initializer_list<const Tensor*> writes) {
  std::vector<const void*> written;
  for (const Tensor* t : writes)
    if (t) written.push_back(t->impl().storage->data());
  cuda::join_side_stream_later(device, std::move(reads), written);
}

// cuBLAS(Lt)'s tensor-core kernels want every row of every operand to start on 16 bytes. A 16-bit
// product with rows of another length (a language model's head over a vocabulary of 113 characters:
// logits [16384, 113], its input gradient over k = 113, its weight gradient [113, 384]) falls to
// unaligned (align1) tiles: 147 us a step in char_gpt on an H100 for those three. Such a product
// runs on copies whose rows are padded with zeros to a multiple of 16 bytes, as PyTorch's compiler
// pads matmuls: zero columns of the reduced dimension add nothing, and the result's padding is dropped.
struct PaddedDims {
  int64_t m, n, k;  // the product's sizes, rounded up where they pad
};

// The padded sizes of c [m, n] = op(a) op(b), or nothing to pad (then false). Only a 2-D 16-bit
// product large enough for the copies to be cheap beside it, with beta = 0.
bool padded_dims(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c, double beta,
                 PaddedDims& dims) {
  if (c.dim() != 2 || a.dim() != 2 || b.dim() != 2 || !is_reduced_floating(a.dtype()) || beta != 0) return false;
  // In units of the 16-bit inputs: 8 of them are 16 bytes, and so are 8 of a float32 c's elements.
  const int64_t unit = 16 / static_cast<int64_t>(element_size(a.dtype()));
  const int64_t m = c.size(0), n = c.size(1), k = trans_a ? a.size(0) : a.size(1);
  if (m * n * k < (int64_t{1} << 24)) return false;
  // A size pads where it is the row length of some operand: a's (m or k), b's (k or n), c's (n).
  const bool pad_m = trans_a && m % unit != 0;
  const bool pad_n = n % unit != 0;
  const bool pad_k = (!trans_a || trans_b) && k % unit != 0;
  if (!pad_m && !pad_n && !pad_k) return false;
  const auto up = [unit](int64_t v) { return (v + unit - 1) / unit * unit; };
  dims = {pad_m ? up(m) : m, pad_n ? up(n) : n, pad_k ? up(k) : k};
  return true;
}

bool same_view(const Tensor& x, const Tensor& y) {
  return x.raw_data() == y.raw_data() && x.dtype() == y.dtype() && x.shape() == y.shape() &&
         x.strides() == y.strides();
}

// t [rows', cols'] into the top-left corner of a zero [rows, cols]. With `shared`, the first copy
// made is kept there, and a later call for the same view and size takes it.
Tensor zero_padded(CudaKernels& kernels, const Tensor& t, int64_t rows, int64_t cols,
                   CudaKernels::PaddedCopy* shared) {
  if (t.size(0) == rows && t.size(1) == cols) return t;
  if (shared && shared->padded.defined() && same_view(shared->source, t) && shared->padded.size(0) == rows &&
      shared->padded.size(1) == cols)
    return shared->padded;
  Tensor padded = Tensor::empty({rows, cols}, t.dtype(), t.device());
  if (!kernels.copy_rows(t, padded)) {
    kernels.fill(padded, 0.0);
    Tensor corner = Tensor::make_view(padded, t.shape(), {cols, 1}, padded.offset());
    kernels.copy(t, corner);
  }
  if (shared && !shared->padded.defined()) *shared = {t, padded};
  return padded;
}

bool gemm_padded(CudaKernels& kernels, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                 double alpha, double beta, CudaKernels::PaddedCopy* shared) {
  PaddedDims d;
  if (!padded_dims(a, trans_a, b, trans_b, c, beta, d)) return false;
  const Tensor ap = trans_a ? zero_padded(kernels, a, d.k, d.m, shared) : zero_padded(kernels, a, d.m, d.k, shared);
  const Tensor bp = trans_b ? zero_padded(kernels, b, d.n, d.k, shared) : zero_padded(kernels, b, d.k, d.n, shared);
  if (d.m == c.size(0) && d.n == c.size(1)) {
    kernels.gemm(ap, trans_a, bp, trans_b, c, alpha, 0);
    return true;
  }
  Tensor cp = Tensor::empty({d.m, d.n}, c.dtype(), c.device());
  kernels.gemm(ap, trans_a, bp, trans_b, cp, alpha, 0);
  const Tensor corner = Tensor::make_view(cp, c.shape(), {d.n, 1}, cp.offset());
  if (!kernels.copy_rows(corner, c)) kernels.copy(corner, c);
  return true;
}

}  // namespace

void CudaKernels::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
                       double beta) {
  const bool batched = c.dim() == 3;
  const int64_t batch = batched ? c.size(0) : 1;
  const int64_t m = c.size(-2), n = c.size(-1);
  const int64_t k = trans_a ? a.size(-2) : a.size(-1);
  if (m == 0 || n == 0 || batch == 0) return;
  const int64_t a_rows = a.size(-2), a_cols = a.size(-1), b_cols = b.size(-1);
  const long long a_step = a.dim() == 3 ? a_rows * a_cols : 0;  // a 2-D operand is shared by the batch
  const long long b_step = b.dim() == 3 ? b.size(-2) * b_cols : 0;
  const long long c_step = m * n;
  // Column-major view: C^T [n x m] = op(B)^T [n x k] * op(A)^T [k x m].
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int M = to_int(n, "N"), N = to_int(m, "M"), K = to_int(k, "K");
  const int ldb = to_int(std::max<int64_t>(b_cols, 1), "ldb"), lda = to_int(std::max<int64_t>(a_cols, 1), "lda");
  const int ldc = M;
  const int batches = to_int(batch, "batch");

  MINIDL_CHECK(a.dtype() == b.dtype() && (a.dtype() == c.dtype() || (is_reduced_floating(a.dtype()) && c.dtype() == kFloat32)),
               "gemm on CUDA: expected a and b of one dtype and c of theirs (or float32 from 16-bit a and b), got ",
               a.dtype(), ", ", b.dtype(), " and ", c.dtype());
  cuda::DeviceGuard guard(device_);
  if (!batched && a.dim() == 2 && b.dim() == 2 && !trans_a && !trans_b && k > 0 && !mixed_product(a, c) &&
      small_k_gemm(a, b, c, alpha, beta))
    return;
  if (!batched && !trans_a && alpha == 1 && beta == 0 && short_m_gemm(a, b, trans_b, Tensor(), false, c)) return;
  if (!batched && gemm_padded(*this, a, trans_a, b, trans_b, c, alpha, beta, shared_padding_)) return;
  if (gemm_lt(stream_, a, trans_a, b, trans_b, c, alpha, beta)) return;
  cublasHandle_t handle = cuda::cublas_handle(device_);
  // Atomics are off by default (cuBLAS then gives the same bits run to run on one GPU model); say so
  // explicitly in deterministic mode, whatever else was set on the shared handle.
  if (is_deterministic()) CUBLAS_CHECK(cublasSetAtomicsMode(handle, CUBLAS_ATOMICS_NOT_ALLOWED));
  if (is_reduced_floating(a.dtype()) || (a.dtype() == kFloat32 && allow_tf32_matmul())) {
    gemm_ex(handle, a.dtype(), c.dtype(), op_b, op_a, M, N, K, static_cast<float>(alpha), b.raw_data(), ldb, b_step,
            a.raw_data(), lda, a_step, static_cast<float>(beta), c.raw_data(), ldc, c_step, batches);
    return;
  }
  dispatch_floating(c.dtype(), "gemm", [&](auto tag) {
    using T = decltype(tag);
    const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
    const T* pa = static_cast<const T*>(a.raw_data());
    const T* pb = static_cast<const T*>(b.raw_data());
    T* pc = static_cast<T*>(c.raw_data());
    if constexpr (std::is_same_v<T, float>) {
      if (batches == 1) {
        CUBLAS_CHECK(cublasSgemm(handle, op_b, op_a, M, N, K, &al, pb, ldb, pa, lda, &be, pc, ldc));
      } else {
        CUBLAS_CHECK(cublasSgemmStridedBatched(handle, op_b, op_a, M, N, K, &al, pb, ldb, b_step, pa, lda, a_step,
                                               &be, pc, ldc, c_step, batches));
      }
    } else {
      if (batches == 1) {
        CUBLAS_CHECK(cublasDgemm(handle, op_b, op_a, M, N, K, &al, pb, ldb, pa, lda, &be, pc, ldc));
      } else {
        CUBLAS_CHECK(cublasDgemmStridedBatched(handle, op_b, op_a, M, N, K, &al, pb, ldb, b_step, pa, lda, a_step,
                                               &be, pc, ldc, c_step, batches));
      }
    }
  });
}

namespace {

// A row-major 2-D float32 product c = op(a) op(b) as cuBLASLt's column-major one:
// C^T [n x m] = op(B)^T op(A)^T, so cuBLASLt's m, n are c's columns and rows. False where the
// cuBLASLt path does not apply.
struct LtShape {
  int64_t m, n, k;
};
bool lt_shape(const Tensor& a, bool trans_a, const Tensor& b, const Tensor& c, LtShape& shape) {
  if (c.dim() != 2 || a.dim() != 2 || b.dim() != 2 || !lt_dtype(c.dtype())) return false;
  shape = {c.size(1), c.size(0), trans_a ? a.size(0) : a.size(1)};
  return true;
}

}  // namespace

bool CudaKernels::gemm_lt(cudaStream_t stream, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                          double alpha, double beta, int64_t max_blocks) {
  LtShape s;
  if (!lt_shape(a, trans_a, b, c, s)) return false;
  return cuda::lt_matmul(device_, stream, s.m, s.n, s.k, trans_b, b.raw_data(), trans_a, a.raw_data(), c.raw_data(),
                         static_cast<float>(alpha), static_cast<float>(beta), cuda::LtEpilogue::None, nullptr,
                         max_blocks, {}, lt_types(a, c));
}

bool CudaKernels::gemm_lt_keeps_within(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                                       int64_t max_blocks) const {
  LtShape s;
  return lt_shape(a, trans_a, b, c, s) &&
         cuda::lt_keeps_within(device_, s.m, s.n, s.k, trans_b, b.raw_data(), trans_a, a.raw_data(), c.raw_data(),
                               max_blocks, lt_types(a, c));
}

void CudaKernels::gemm_row_sums(const GemmCall& call) {
  cuda::DeviceGuard guard(device_);
  if (weight_grad_layout(call) && !mixed_product(call.a, call.c) &&
      (narrow_weight_grad(stream_, call.a, call.b, call.c, call.row_sums) ||
       short_k_weight_grad(stream_, call.a, call.b, call.c, call.row_sums)))
    return;
  Kernels::gemm_row_sums(call);
}

void CudaKernels::relu_weight_grad(const Tensor& grad_out, const Tensor& out, const Tensor& x, bool trans_x,
                                   Tensor& grad_weight, Tensor* grad_bias) {
  cuda::DeviceGuard guard(device_);
  if (!trans_x && grad_out.is_contiguous() && short_k_weight_grad(stream_, grad_out, x, grad_weight, grad_bias, out))
    return;
  Kernels::relu_weight_grad(grad_out, out, x, trans_x, grad_weight, grad_bias);
}

// The second product (a weight gradient, needed only by the optimizer) runs on the side stream on a
// configuration of at most cuda::side_stream_blocks(), where cuBLASLt has one, and then starts only
// after the first (the input gradient, which the rest of the backward waits for): the first gets
// the whole GPU, and the second runs beside the next layer's work on the SMs it leaves. In the
// MNIST MLP at batch 512 on an H200, the second layer's input gradient took 13.1 us beside its
// weight gradient and 8.6 alone; the weight gradient, on 28 blocks (21.7 us alone, against 10.2 on
// any number), then ran beside the first layer's weight gradient (104 blocks) without slowing it,
// and the step fell from 88.5 to 85-86 us (docs/benchmarks.md). A first product of several waves
// (kLargeFirstFlops) also goes first where the second has no small configuration: beside it the
// second only shares its tensor cores, while after it the second overlaps the memory-bound kernels
// that follow (in char_gpt, a layer's input gradient of 14-19 GFLOP then ran in 23-29 us instead of
// 50-62, its weight gradient beside the next layer norm's backward: +0.4-0.6% tokens/s on an H200).
// Until the second product has been timed, and where neither holds (or it runs on minidl's narrow
// kernel), both start together.
constexpr double kLargeFirstFlops = 4e9;

void CudaKernels::gemm_concurrent(const GemmCall& first, const GemmCall& second) {
  cuda::DeviceGuard guard(device_);
  const int64_t blocks = cuda::side_stream_blocks(device_);
  const Tensor &a = second.a, &b = second.b;
  // A product that pads (gemm_padded) runs its copies on the compute stream, after the first, and
  // takes the first's padded copy of an operand they share.
  PaddedDims unused;
  if (padded_dims(a, second.trans_a, b, second.trans_b, second.c, 0, unused)) {
    PaddedCopy shared;
    shared_padding_ = &shared;
    try {
      gemm_row_sums(first);
      gemm_row_sums(second);
    } catch (...) {
      shared_padding_ = nullptr;
      throw;
    }
    shared_padding_ = nullptr;
    return;
  }
  const double first_flops = 2.0 * static_cast<double>(first.c.numel()) *
                             static_cast<double>(first.trans_a ? first.a.size(-2) : first.a.size(-1));
  const bool after_first = first_flops >= kLargeFirstFlops ||
                           gemm_lt_keeps_within(a, second.trans_a, b, second.trans_b, second.c, blocks);
  if (after_first) gemm_row_sums(first);
  const cudaStream_t side = cuda::fork_side_stream(device_, stream_);  // after what came before
  bool second_on_side = !after_first && weight_grad_layout(second) && !mixed_product(a, second.c) &&
                        narrow_weight_grad(side, a, b, second.c, second.row_sums);
  const bool sums_left = !second_on_side && second.row_sums;
  if (!second_on_side) second_on_side = gemm_lt(side, a, second.trans_a, b, second.trans_b, second.c, 1, 0, blocks);
  if (!after_first) gemm_row_sums(first);
  if (second_on_side) {
    // The compute stream waits for the side stream only where its results or inputs are next used:
    // the next layer's backward needs neither (core/cuda/side_stream.cpp).
    join_later(device_, {a, b}, {&second.c, sums_left ? nullptr : second.row_sums});
  } else {
    gemm(a, second.trans_a, b, second.trans_b, second.c, 1, 0);
  }
  if (sums_left) sum_rows_of_a(second);
}

// The gradient through a narrow layer and the ReLU before it, with no sum over the rows on the
// critical path: the compute stream masks g @ w2 (one thread per element, all of the GPU), and the
// side stream makes, in one pass over g and hidden beside it, the narrow layer's weight and bias
// gradients and the first layer's bias gradient. In the MNIST MLP at batch 512 on an H100, a
// masking and bias-gradient pass of 32 blocks with g @ w2 made inside it ended 5.6 us after the
// loss; the masked small_k_gemm ends 2.9 us after it. The side pass then overlaps the next input
// gradient's GEMM and slows it by about 2 us, which still leaves the step shorter.
void CudaKernels::linear_relu_linear_backward(const Tensor& grad_out, const Tensor& w2, bool trans_w2,
                                              const Tensor& hidden, Tensor& grad_pre, Tensor& grad_bias1,
                                              const GemmCall* second) {
  // Without the narrow layer's weight gradient (its weight frozen) the side pass has no product
  // to share: the composition then does less work.
  const int64_t n = grad_out.size(1);
  const bool narrow = second && weight_grad_layout(*second) && !mixed_product(second->a, second->c) &&
                      grad_bias1.dtype() == grad_out.dtype() && n > 0 && n <= 16 && !trans_w2 &&
                      hidden.numel() > 0 && grad_out.is_contiguous() && w2.is_contiguous() &&
                      hidden.is_contiguous() && grad_pre.is_contiguous();
  cuda::DeviceGuard guard(device_);
  const cudaStream_t side = cuda::side_stream(device_);
  if (narrow) cuda::stream_wait(device_, side, stream_);  // the side stream starts after what came before
  if (!narrow || !narrow_weight_grad(side, grad_out, hidden, second->c, second->row_sums, w2, &grad_bias1)) {
    Kernels::linear_relu_linear_backward(grad_out, w2, trans_w2, hidden, grad_pre, grad_bias1, second);
    return;
  }
  if (!small_k_gemm(grad_out, w2, grad_pre, 1, 0, hidden)) {
    gemm(grad_out, false, w2, false, grad_pre, 1, 0);
    binary(BinaryOp::ReluBackward, grad_pre, hidden, grad_pre);
  }
  join_later(device_, {grad_out, hidden, w2}, {&second->c, &grad_bias1, second->row_sums});
}

// A product with few output tiles over a long k leaves most of the GPU idle, and cuBLASLt offers no
// split along k with a bias epilogue: the first linear layer after a flatten (64 x 128 outputs over
// k = 9216 in the MNIST CNN at batch 64) took 33.6 us on an H100, its best configuration of 185
// timed. Here k is cut into S equal slices, one batched GEMM writes the S partial products and one
// kernel adds them in order with the bias and ReLU. The batched GEMM is cuBLASLt's, its
// configuration timed like any other's (cuBLAS's where cuBLASLt has none): for the MNIST MLP's
// first layer at batch 512 (4 slices of 196) on an H200, 14.4 us against 15.4 for the heuristic's
// first pick.
void CudaKernels::gemm_bias_split_k(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                                    bool relu, Tensor& c, int64_t slices) {
  sum_slices_bias(split_k_parts(a, trans_a, b, trans_b, c.size(0), c.size(1), slices), bias, relu, c);
}

Tensor CudaKernels::split_k_parts(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, int64_t m, int64_t n,
                                  int64_t slices) {
  const int64_t k = trans_a ? a.size(0) : a.size(1);
  const int64_t ks = k / slices;
  Tensor parts = Tensor::empty({slices, m, n}, kFloat32, a.device());
  // Column-major, as in gemm: parts[s]^T [n x m] = op(B_s)^T op(A_s)^T, where A_s and B_s are the
  // s-th slices along k; a slice starts ks rows or ks columns further, by the stride of k, and keeps
  // its matrix's leading dimension.
  const int64_t a_k_stride = trans_a ? m : 1, b_k_stride = trans_b ? 1 : n;
  const cuda::LtBatch batch{slices, ks * b_k_stride, ks * a_k_stride, m * n, b.size(1), a.size(1)};
  if (!cuda::lt_matmul(device_, stream_, n, m, ks, trans_b, b.raw_data(), trans_a, a.raw_data(), parts.raw_data(), 1,
                       0, cuda::LtEpilogue::None, nullptr, 0, batch, lt_types(a, parts))) {
    gemm_ex(cuda::cublas_handle(device_), kFloat32, kFloat32, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
            trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, to_int(n, "N"), to_int(m, "M"), to_int(ks, "K"), 1, b.raw_data(),
            to_int(b.size(1), "ldb"), ks * b_k_stride, a.raw_data(), to_int(a.size(1), "lda"), ks * a_k_stride, 0,
            parts.raw_data(), to_int(n, "ldc"), m * n, to_int(slices, "batch"));
  }
  return parts;
}

namespace {

// How many slices gemm_bias splits k into (1: none) where nothing was timed: when the output has
// at most 32 tiles of 32 x 32 and k is at least 2048, S is a power of two up to 32 that divides k,
// at most 8 tiles' worth per SM-sized share, each slice 256 or more long.
int64_t split_k_rule(int64_t tiles, int64_t k) {
  if (tiles > 32 || k < 2048) return 1;
  int64_t slices = 1;
  while (slices < 32 && tiles * slices < 128 && k % (slices * 2) == 0 && k / (slices * 2) >= 256) slices *= 2;
  return slices;
}

struct SplitChoice {
  int seen = 0;        // calls outside graph capture so far
  bool timing = false;  // being timed now (by another thread: use the rule meanwhile)
  int64_t slices = 0;  // 0: not timed yet
};

}  // namespace

// The rule above is a guess. Like the GEMM configurations themselves (ops/cuda/cublaslt.cpp), the
// choice between cuBLASLt's best and each split of k is timed the second time a shape with at most
// 512 tiles over a k of 512 or more comes, and kept: at batch 64 the MLP's first layer (64 x 512
// over k = 784) took 8.5 us in 8 slices against cuBLASLt's best 10.1 us on an H200, its second
// (64 x 256 over 512) 6.8 against 8.1. MINIDL_GEMM_TUNE=0 and deterministic mode keep the rule.
int64_t CudaKernels::gemm_bias_slices(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                                      bool relu, Tensor& c) {
  const int64_t m = c.size(0), n = c.size(1), k = trans_a ? a.size(0) : a.size(1);
  if (!a.is_contiguous() || !b.is_contiguous()) return 1;
  const int64_t tiles = ((m + 31) / 32) * ((n + 31) / 32);
  const int64_t rule = split_k_rule(tiles, k);
  if (tiles > 512 || k < 512 || !cuda::gemm_tuning_enabled() || is_deterministic()) return rule;
  using Key = std::tuple<int, int64_t, int64_t, int64_t, bool, bool, bool, bool>;  // the last: TF32
  // The lock covers the map, not the timing: with data-parallel ranks as threads, this device's
  // stream may wait on a collective that another rank reaches only after its own GEMMs.
  static std::mutex mutex;
  static auto* choices = new std::map<Key, SplitChoice>();  // never destroyed: used until exit
  SplitChoice* entry;
  {
    std::lock_guard lock(mutex);
    entry = &(*choices)[{device_, m, n, k, trans_a, trans_b, relu, allow_tf32_matmul()}];
    if (entry->slices > 0) return entry->slices;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
    if (capture != cudaStreamCaptureStatusNone || entry->timing || ++entry->seen < 2) return rule;
    entry->timing = true;
  }
  SplitChoice choice;
  const auto lt = [&] { return gemm_bias_lt(a, trans_a, b, trans_b, bias, relu, c); };
  // c is written by every candidate; the caller's own product overwrites it afterwards.
  float best_us = -1;
  if (lt()) {  // the first call also lets cuBLASLt time its configurations for this shape
    best_us = cuda::time_per_call_us(stream_, [&] { lt(); });
    choice.slices = 1;
  }
  const float lt_us = best_us;
  for (int64_t slices = 2; slices <= 32; slices *= 2) {
    if (k % slices != 0 || k / slices < 64 || tiles * slices > 2048) continue;
    // Twice untimed: the second call times the batched product's configurations.
    for (int call = 0; call < 2; ++call) gemm_bias_split_k(a, trans_a, b, trans_b, bias, relu, c, slices);
    const float us = cuda::time_per_call_us(stream_, [&] { gemm_bias_split_k(a, trans_a, b, trans_b, bias, relu, c, slices); });
    if (best_us < 0 || us < best_us) best_us = us, choice.slices = slices;
  }
  if (choice.slices == 0) choice.slices = rule;
  {
    std::lock_guard lock(mutex);
    entry->slices = choice.slices;
  }
  if (cuda::gemm_tuning_verbose())
    std::fprintf(stderr, "minidl: gemm+bias %lld x %lld x %lld: %lld slice%s of k, %.1f us (cuBLASLt %.1f us)\n",
                 static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                 static_cast<long long>(choice.slices), choice.slices == 1 ? "" : "s", best_us, lt_us);
  return choice.slices;
}

void CudaKernels::gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                            bool relu, Tensor& c) {
  const int64_t m = c.size(0), n = c.size(1), k = trans_a ? a.size(0) : a.size(1);
  if (m > 0 && n > 0 && k > 0 && !trans_a && trans_b && n <= 16) {
    cuda::DeviceGuard guard(device_);
    if (narrow_linear(a, b, bias, relu, c)) return;
  }
  if (lt_dtype(c.dtype()) && m > 0 && n > 0 && k > 0) {
    cuda::DeviceGuard guard(device_);
    if (!trans_a && short_m_gemm(a, b, trans_b, bias, relu, c)) return;
    // The split along k sums float32 slices (sum_slices_bias): float32's only.
    const int64_t slices = c.dtype() == kFloat32 ? gemm_bias_slices(a, trans_a, b, trans_b, bias, relu, c) : 1;
    if (slices > 1) {
      gemm_bias_split_k(a, trans_a, b, trans_b, bias, relu, c, slices);
      return;
    }
    if (gemm_bias_lt(a, trans_a, b, trans_b, bias, relu, c)) return;
  }
  Kernels::gemm_bias(a, trans_a, b, trans_b, bias, relu, c);
}

// A hidden layer split along k, then a narrow layer (a classifier's last): the kernel that adds the
// slices, the bias and the ReLU also computes the narrow layer's products (ops/cuda/linear_narrow.cu).
// In the MNIST MLP these are the second layer and the last, and the fused kernel replaces the
// kernel that summed the second layer's slices between the two products.
void CudaKernels::linear_relu_linear(const Tensor& x, bool trans_x, const Tensor& w1, bool trans_w1, const Tensor& b1,
                                     const Tensor& w2, bool trans_w2, const Tensor& b2, Tensor& hidden, Tensor& out) {
  const int64_t m = hidden.size(0), h = hidden.size(1), n = out.size(1), k = trans_x ? x.size(0) : x.size(1);
  if (hidden.dtype() == kFloat32 && m > 0 && h > 16 && n > 0 && k > 0 && n <= 16 && trans_w2) {
    cuda::DeviceGuard guard(device_);
    // The first layer as gemm_bias runs a wide one, asking gemm_bias_slices once: it counts calls.
    const int64_t slices = !trans_x && short_m_gemm(x, w1, trans_w1, b1, true, hidden)
                               ? 0  // done, without slices in memory: the narrow layer as below
                               : gemm_bias_slices(x, trans_x, w1, trans_w1, b1, true, hidden);
    if (slices > 1) {
      const Tensor parts = split_k_parts(x, trans_x, w1, trans_w1, m, h, slices);
      if (narrow_linear_from_slices(parts, b1, hidden, w2, b2, out)) return;
      sum_slices_bias(parts, b1, true, hidden);  // a layout the narrow kernel does not take
    } else if (slices == 1 && !gemm_bias_lt(x, trans_x, w1, trans_w1, b1, true, hidden)) {
      Kernels::gemm_bias(x, trans_x, w1, trans_w1, b1, true, hidden);
    }
  } else {
    gemm_bias(x, trans_x, w1, trans_w1, b1, true, hidden);
  }
  if (b2.defined()) gemm_bias(hidden, false, w2, trans_w2, b2, false, out);
  else gemm(hidden, false, w2, trans_w2, out, 1, 0);
}

bool CudaKernels::gemm_bias_lt(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                               bool relu, Tensor& c) {
  const int64_t m = c.size(0), n = c.size(1), k = trans_a ? a.size(0) : a.size(1);
  // Column-major: C^T [n x m] = op(B)^T op(A)^T, the bias along C^T's columns.
  return cuda::lt_matmul(device_, stream_, n, m, k, trans_b, b.raw_data(), trans_a, a.raw_data(), c.raw_data(), 1, 0,
                         relu ? cuda::LtEpilogue::BiasRelu : cuda::LtEpilogue::Bias, bias.raw_data(), 0, {},
                         lt_types(a, c));
}

}  // namespace minidl
