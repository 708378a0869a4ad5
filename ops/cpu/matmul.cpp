// GEMM on Eigen: row-major maps over our storage, no copies; transposes are Eigen expressions.
// Threads are ours, not Eigen's: Eigen's own split of the thin products of training (64 rows
// against a weight) ran slower on 16 threads than on one. Instead a product's output is cut into a
// grid of blocks, one per thread, each a single-threaded Eigen GEMM; a batch of small products runs
// one product per thread.
//
// The grid follows the thread count; the results must not. Eigen computes a row-major product as
// its column-major transpose, so our columns are the rows of its kernel: it takes them in panels of
// 3 SIMD vectors (48 floats with AVX-512, 24 with AVX2 or for doubles), then 2, then 1 for what is
// left, and the 1-vector path keeps two accumulators (even and odd k), so it adds an element's
// terms in another order. Our rows go in panels of 4. A block that starts on such boundaries
// (kColumnAlign, kRowAlign) puts every element through the path one unsplit product takes, and its
// depth blocking depends on k alone, so any grid gives the same bits. That holds only while Eigen
// never splits a product across threads itself: CMakeLists.txt defines EIGEN_DONT_PARALLELIZE for the
// whole library.
#include <Eigen/Core>
#include <algorithm>

#include "core/threads.h"
#include "ops/cpu/cpu_kernels.h"
#include "ops/cpu/onednn_gemm.h"

namespace minidl {

namespace {

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Where blocks may start: columns on Eigen's 3-vector panels, rows on a multiple of its 4-row ones.
constexpr int64_t kColumnAlign = 48;
constexpr int64_t kRowAlign = 16;
constexpr int64_t kMinTaskWork = 1 << 15;  // multiply-adds below which another thread costs more than it saves
constexpr int64_t kOnednnMinWork = 1 << 18;  // multiply-adds from which a product goes to oneDNN

// C = alpha * A @ B + beta * C for Eigen expressions A [m, k] and B [k, n] (maps or their transposes).
template <class T, class MatA, class MatB, class MatC>
void product(const MatA& A, const MatB& B, MatC&& C, T alpha, T beta) {
  if (beta == T(0)) {
    C.noalias() = alpha * A * B;
  } else {
    if (beta != T(1)) C *= beta;
    C.noalias() += alpha * A * B;
  }
}

// Start of part `i` of `parts` over [0, len), on the multiple of `align` nearest to an even split;
// the last part ends at len. Parts of at least `align` on average are never empty.
int64_t part_start(int64_t len, int64_t parts, int64_t i, int64_t align) {
  return i == parts ? len : (len * i / parts + align / 2) / align * align;
}

// The largest part of `len` cut into `parts`.
int64_t largest_part(int64_t len, int64_t parts, int64_t align) {
  int64_t largest = 0;
  for (int64_t i = 0; i < parts; ++i)
    largest = std::max(largest, part_start(len, parts, i + 1, align) - part_start(len, parts, i, align));
  return largest;
}

// Blocks of an output split across threads: `rows` x `cols` of them. The threads wait for the
// largest block, whose time is its multiply-adds plus the packing of its slices of A and B (about
// kPackCost multiply-adds per element packed, per unit of depth): the aligned cuts make blocks
// unequal, and a split along one dim packs a lot once both dims are large.
struct Grid {
  int64_t rows = 1, cols = 1;
};

constexpr double kPackCost = 8;

Grid choose_grid(int64_t m, int64_t n, int64_t tasks) {
  for (; tasks > 1; --tasks) {
    Grid best;
    double best_cost = -1;
    for (int64_t r = 1; r <= tasks; ++r) {
      const int64_t c = tasks / r;
      if (tasks % r != 0 || (r > 1 && m / r < kRowAlign) || (c > 1 && n / c < kColumnAlign)) continue;
      const double rows = static_cast<double>(largest_part(m, r, kRowAlign));
      const double cols = static_cast<double>(largest_part(n, c, kColumnAlign));
      const double cost = rows * cols + kPackCost * (rows + cols);
      if (best_cost < 0 || cost < best_cost) best = {r, c}, best_cost = cost;
    }
    if (best_cost >= 0) return best;
  }
  return {};
}

// One product, its output split across `threads` in a grid of blocks.
template <class T, class MatA, class MatB>
void product_split(const MatA& A, const MatB& B, Eigen::Map<Matrix<T>>& C, T alpha, T beta, int threads) {
  const int64_t m = C.rows(), n = C.cols(), k = A.cols();
  const Grid grid = choose_grid(m, n, std::min<int64_t>(threads, m * n * k / kMinTaskWork));
  const int64_t tasks = grid.rows * grid.cols;
  if (tasks <= 1) {
    product(A, B, C, alpha, beta);
    return;
  }
  // The whole team runs the region even when there are fewer blocks than threads: asking libgomp
  // for a team of another size each call re-docks its threads, which made a 16-thread training
  // step 2-4x slower than the same step with a fixed team.
#pragma omp parallel for schedule(static, 1)
  for (int64_t p = 0; p < tasks; ++p) {
    const int64_t i = p / grid.cols, j = p % grid.cols;
    const int64_t r0 = part_start(m, grid.rows, i, kRowAlign), r1 = part_start(m, grid.rows, i + 1, kRowAlign);
    const int64_t c0 = part_start(n, grid.cols, j, kColumnAlign), c1 = part_start(n, grid.cols, j + 1, kColumnAlign);
    if (r1 <= r0 || c1 <= c0) continue;
    product(A.middleRows(r0, r1 - r0), B.middleCols(c0, c1 - c0), C.block(r0, c0, r1 - r0, c1 - c0), alpha, beta);
  }
}

template <class T>
void gemm_one(const T* a, int64_t a_rows, int64_t a_cols, bool trans_a, const T* b, int64_t b_rows, int64_t b_cols,
              bool trans_b, T* c, int64_t m, int64_t n, T alpha, T beta, int threads) {
  Eigen::Map<const Matrix<T>> A(a, a_rows, a_cols), B(b, b_rows, b_cols);
  Eigen::Map<Matrix<T>> C(c, m, n);
  if (!trans_a && !trans_b) product_split(A, B, C, alpha, beta, threads);
  else if (trans_a && !trans_b) product_split(A.transpose(), B, C, alpha, beta, threads);
  else if (!trans_a && trans_b) product_split(A, B.transpose(), C, alpha, beta, threads);
  else product_split(A.transpose(), B.transpose(), C, alpha, beta, threads);
}

}  // namespace

void CpuKernels::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, double alpha,
                      double beta) {
  const bool batched = c.dim() == 3;
  const int64_t batch = batched ? c.size(0) : 1;
  const int64_t m = c.size(-2), n = c.size(-1);
  const int64_t a_rows = a.size(-2), a_cols = a.size(-1), b_rows = b.size(-2), b_cols = b.size(-1);
  const int64_t a_step = a.dim() == 3 ? a_rows * a_cols : 0;  // a 2-D operand is shared by the batch
  const int64_t b_step = b.dim() == 3 ? b_rows * b_cols : 0;
  const int64_t depth = trans_a ? a_rows : a_cols;
  const int threads = get_num_threads();
  if (is_reduced_floating(c.dtype())) {
    // bfloat16 / float16: Eigen has no fast 16-bit GEMM, so the operands are widened to float32
    // buffers, multiplied by the float32 path (float32 accumulation, as PyTorch's CPU kernels), and
    // the result rounded to 16 bits once.
    const auto widened = [this](const Tensor& t) {
      Tensor wide = Tensor::empty(t.shape(), kFloat32, t.device());
      copy(t, wide);
      return wide;
    };
    Tensor c32 = beta != 0 ? widened(c) : Tensor::empty(c.shape(), kFloat32, c.device());
    gemm(widened(a), trans_a, widened(b), trans_b, c32, alpha, beta);
    copy(c32, c);
    return;
  }
  dispatch_floating(c.dtype(), "gemm", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = c.data<T>();
    const int64_t work = m * n * depth;
    // A single float32 product worth sharing goes to oneDNN where minidl has it
    // (ops/cpu/onednn_gemm.cpp). The choice must not follow the thread count, or the bits would.
    if constexpr (std::is_same_v<T, float>) {
      if (batch == 1 && work >= kOnednnMinWork &&
          onednn_sgemm(trans_a, trans_b, m, n, depth, static_cast<float>(alpha), pa, a_cols, pb, b_cols,
                       static_cast<float>(beta), pc, n))
        return;
    }
    auto one = [&](int64_t i, int product_threads) {
      gemm_one<T>(pa + i * a_step, a_rows, a_cols, trans_a, pb + i * b_step, b_rows, b_cols, trans_b, pc + i * m * n,
                  m, n, static_cast<T>(alpha), static_cast<T>(beta), product_threads);
    };
    // A batch that fills the threads, or of products too small to split: one product per thread.
    // Otherwise one product after another, each split across every thread. A batch too small in
    // all is not worth waking the team for.
    if (batch > 1 && batch * work >= kMinTaskWork && (batch >= threads || work < kMinTaskWork * threads)) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < batch; ++i) one(i, 1);
      return;
    }
    for (int64_t i = 0; i < batch; ++i) one(i, threads);
  });
}

}  // namespace minidl
