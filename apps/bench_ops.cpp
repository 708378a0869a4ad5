// Operator benchmarks. `matmul` times the SGEMM kernel lab (kernel_lab/, docs/kernels.md) rung by
// rung against cuBLAS float32 (TF32 off), cuBLAS TF32 and the CPU (Eigen, through minidl's matmul):
// GFLOP/s, % of cuBLAS float32, the max error against a float64 reference, and the time with the
// host-device transfers included, from pageable and from pinned memory. Timing rules:
// kernel_lab/matmul_bench.h. Needs the CUDA build; scripts/matmul_torch_cupy.py prints the same
// columns for PyTorch and CuPy.
//
//   build/bench_ops matmul [--sizes 4096x4096x4096 777x1313x555:odd] [--repeats 20] [--csv out.csv]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/cuda.h"
#include "minidl.h"
#ifdef MINIDL_KERNEL_LAB
#include "kernel_lab/matmul_bench.h"
#endif

using namespace minidl;

namespace {

struct MatmulFlags {
  std::vector<std::string> sizes = {"4096x4096x4096:square", "1000x1000x1000:odd", "777x1313x555:odd",
                                    "64x784x512:mlp fc1 batch 64", "512x784x512:mlp fc1 batch 512",
                                    "64x9216x128:cnn fc1 batch 64", "64x288x36864:cnn conv2 im2col batch 64"};
  int warmup = 2, repeats = 20, threads = 0;
  double budget_ms = 250, cpu_budget_s = 20;
  bool transfers = true, cpu = true;
  uint64_t seed = 1;
  std::string csv;
};

#ifdef MINIDL_KERNEL_LAB
using kernel_lab::GemmBench;
using kernel_lab::GemmShape;

struct Row {
  GemmShape shape;  // the CPU may run smaller than the GPU rows
  std::string method, note;
  double ms = 0, error = 0, pageable_ms = 0, pinned_ms = 0, cublas_ms = 0;  // cublas_ms: float32, at `shape`
  int repeats = 0;
};

template <class F>
double wall_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// minidl's matmul on CPU tensors (Eigen): one warm-up, then the median of wall-clock repeats.
Row cpu_row(GemmBench& bench, double cublas_ms, const MatmulFlags& f) {
  const GemmShape& s = bench.shape();
  Tensor a = Tensor::from_vector(bench.a(), {s.m, s.k}), b = Tensor::from_vector(bench.b(), {s.k, s.n}), c;
  const double first = wall_ms([&] { c = matmul(a, b); });
  Row row{s, "cpu eigen", std::to_string(get_num_threads()) + " threads"};
  row.repeats = std::clamp(int(f.budget_ms / std::max(first, 1e-3)), std::min(3, f.repeats), f.repeats);
  std::vector<double> ms;
  for (int r = 0; r < row.repeats; ++r) ms.push_back(wall_ms([&] { c = matmul(a, b); }));
  std::sort(ms.begin(), ms.end());
  row.ms = ms[ms.size() / 2];
  row.cublas_ms = cublas_ms;
  row.error = bench.max_rel_error(c.to_vector<float>());
  return row;
}

// The CPU at the GPU rows' shape when a warm-up and 3 runs fit in --cpu-budget-s (a 1024^3 run
// measures its rate once), else at the largest cube that fits, with cuBLAS timed there too.
Row cpu_row_within_budget(GemmBench& bench, double cublas_ms, const MatmulFlags& f) {
  static double gflops = 0;
  const GemmShape& s = bench.shape();
  const double limit_ms = 1000 * f.cpu_budget_s / 4;
  if (s.flops() <= 4e9) return cpu_row(bench, cublas_ms, f);
  if (gflops == 0) {
    GemmBench probe({1024, 1024, 1024, "probe"}, f.seed);
    Tensor a = Tensor::from_vector(probe.a(), {1024, 1024}), b = Tensor::from_vector(probe.b(), {1024, 1024});
    matmul(a, b);
    gflops = 2.0 * 1024 * 1024 * 1024 / 1e6 / wall_ms([&] { matmul(a, b); });
  }
  if (s.flops() / 1e6 / gflops <= limit_ms) return cpu_row(bench, cublas_ms, f);
  int cube = 256;
  while (cube < 8192 && 2.0 * std::pow(cube + 256, 3) / 1e6 / gflops <= limit_ms) cube += 256;
  GemmBench smaller({cube, cube, cube, s.label}, f.seed);
  const double cublas_there =
      smaller.run(kernel_lab::cublas_fp32_method(), {f.warmup, f.repeats, f.budget_ms}, false).kernel.median_ms;
  Row row = cpu_row(smaller, cublas_there, f);
  row.note += "; " + s.dims() + " would exceed --cpu-budget-s; %cuBLAS at this size";
  return row;
}

void print(const Row& row, const std::string& label, std::ofstream& csv) {
  const double gflops = row.shape.flops() / row.ms / 1e6, pct = 100.0 * row.cublas_ms / row.ms;
  auto ms_or_dash = [](double ms) { return ms > 0 ? std::to_string(ms).substr(0, 8) : std::string("-"); };
  const std::string note = label + (row.note.empty() ? "" : "; " + row.note);
  std::printf("%-15s %-16s %10.4f %9.0f %7.1f%% %9.2e %11s %10s %5d  %s\n", row.shape.dims().c_str(),
              row.method.c_str(), row.ms, gflops, pct, row.error, ms_or_dash(row.pageable_ms).c_str(),
              ms_or_dash(row.pinned_ms).c_str(), row.repeats, note.c_str());
  if (csv.is_open())
    csv << '"' << label << "\"," << row.shape.m << ',' << row.shape.k << ',' << row.shape.n << ",\"" << row.method
        << "\"," << row.ms << ',' << gflops << ',' << pct << ',' << row.error << ',' << row.pageable_ms << ','
        << row.pinned_ms << ',' << row.repeats << ",\"" << row.note << "\"\n";
}

int run_matmul(const MatmulFlags& f) {
  MINIDL_CHECK(cuda::is_available(), "bench_ops matmul needs a GPU: ", cuda::unavailable_reason());
  if (f.threads > 0) set_num_threads(f.threads);
  std::vector<GemmShape> shapes;
  for (const std::string& spec : f.sizes) shapes.push_back(GemmShape::parse(spec));
  std::ofstream csv;
  if (!f.csv.empty()) {
    csv.open(f.csv);
    MINIDL_CHECK(csv.good(), "--csv: cannot write '", f.csv, "'");
    csv << "label,m,k,n,method,ms,gflops,pct_cublas_fp32,max_rel_err,pageable_ms,pinned_ms,repeats,note\n";
  }
  std::printf("%s; CPU: %d threads\nmedian of up to %d repeats after %d warm-up runs (fewer past %.0f ms, at least "
              "3); CUDA events;\nerr: max |C - ref| / (|A||B|) over all entries, ref in float64 on the GPU\n",
              kernel_lab::gpu_description().c_str(), get_num_threads(), f.repeats, f.warmup, f.budget_ms);
  if (const char* o = std::getenv("NVIDIA_TF32_OVERRIDE"); o && std::string(o) == "0")
    std::printf("NVIDIA_TF32_OVERRIDE=0 is set: the cublas tf32 row runs in float32\n");
  std::printf("\n%-15s %-16s %10s %9s %8s %9s %11s %10s %5s  %s\n", "M x K x N", "method", "ms", "GFLOP/s", "%cuBLAS",
              "err", "pageable ms", "pinned ms", "reps", "note");
  const std::vector<std::string> methods = kernel_lab::gpu_methods();
  for (const GemmShape& s : shapes) {
    GemmBench bench(s, f.seed);
    std::vector<Row> rows;
    for (size_t i = 0; i < methods.size(); ++i) {
      const kernel_lab::GemmResult r = bench.run(i, {f.warmup, f.repeats, f.budget_ms}, f.transfers);
      rows.push_back({s, methods[i], r.detail, r.kernel.median_ms, r.max_rel_error, r.pageable.median_ms,
                      r.pinned.median_ms, 0, r.kernel.repeats});
    }
    const double cublas_ms = rows[kernel_lab::cublas_fp32_method()].ms;
    for (Row& row : rows) row.cublas_ms = cublas_ms;
    if (f.cpu) rows.push_back(cpu_row_within_budget(bench, cublas_ms, f));
    for (const Row& row : rows) print(row, s.label, csv);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("minidl operator benchmarks");
  app.require_subcommand(1);
  MatmulFlags f;
  CLI::App* mm = app.add_subcommand("matmul", "the SGEMM kernel lab against cuBLAS and the CPU (docs/kernels.md)");
  mm->add_option("--sizes", f.sizes, "shapes MxKxN[:label] (A is MxK, B is KxN)")->capture_default_str();
  mm->add_option("--repeats", f.repeats, "timed runs per measurement, at most")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  mm->add_option("--warmup", f.warmup, "untimed runs before timing")->check(CLI::Range(0, 1000))->capture_default_str();
  mm->add_option("--budget-ms", f.budget_ms, "fewer repeats (at least 3) past this time per measurement")
      ->check(CLI::PositiveNumber)->capture_default_str();
  mm->add_flag("--transfers,!--no-transfers", f.transfers, "also time with host-device transfers (default on)");
  mm->add_flag("--cpu,!--no-cpu", f.cpu, "also time the CPU (Eigen) (default on)");
  mm->add_option("--cpu-budget-s", f.cpu_budget_s, "run the CPU at a smaller cube where 4 runs would take longer")
      ->check(CLI::PositiveNumber)->capture_default_str();
  mm->add_option("--threads", f.threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 4096));
  mm->add_option("--seed", f.seed, "seed of the random inputs")->capture_default_str();
  mm->add_option("--csv", f.csv, "also write the table as CSV to this file");
  CLI11_PARSE(app, argc, argv);

  try {
#ifdef MINIDL_KERNEL_LAB
    return run_matmul(f);
#else
    std::fprintf(stderr, "bench_ops matmul needs the CUDA build (the kernel lab is CUDA code): %s\n",
                 cuda::unavailable_reason().c_str());
    return 1;
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
