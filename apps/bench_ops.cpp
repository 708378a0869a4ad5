// Operator benchmarks. `matmul` times the SGEMM kernel lab (kernel_lab/, docs/kernels.md) rung by
// rung against cuBLAS float32 (TF32 off), cuBLAS TF32 and the CPU (Eigen, through minidl's matmul):
// GFLOP/s, % of cuBLAS float32, the max error against a float64 reference, and the time with the
// host-device transfers included, from pageable and from pinned memory. Timing rules:
// kernel_lab/matmul_bench.h. Needs the CUDA build; scripts/matmul_torch_cupy.py prints the same
// columns for PyTorch and CuPy.
//
//   build/bench_ops matmul [--sizes 4096x4096x4096 777x1313x555:odd] [--repeats 20] [--csv out.csv]
//
// `crossover` runs elementwise ops, a sum and softmax on the CPU and the GPU from 1e3 to 1e8
// elements, with the data on the device and with transfers, and names the size from which the GPU
// wins (apps/common/crossover.h); scripts/crossover_numpy_cupy.py gives NumPy's and CuPy's figures.
//
//   build/bench_ops crossover [--sizes 1e3 1e4 ...] [--ops add axpb sum softmax] [--csv c.csv] [--svg c.svg]
//
// `attention` times the fused attention kernels (ops/cuda/attention.cu) forward and forward +
// backward, causal, at PyTorch's flash SDPA benchmark shape (B = batch x heads): milliseconds per
// call, the median of timed bursts, each ended by a synchronize.
//
//   build/bench_ops attention [--lengths 256 1024] [--batch 384] [--head 64] [--dtypes bfloat16 float32]
//                             [--dropout P] [--deterministic] [--redraw-mask] [--backend minidl|cudnn]
// (--backend cudnn: cuDNN's fused attention, ops/cuda/cudnn_attention.cpp, for the 16-bit types)
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "apps/common/crossover.h"
#include "apps/common/svg_chart.h"
#include "core/cuda.h"
#include "minidl.h"
#include "ops/kernels.h"  // kernels_for: the attention benchmark calls the kernels directly
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

struct CrossoverFlags {
  std::vector<std::string> sizes = {"1e3", "3e3", "1e4", "3e4", "1e5", "3e5", "1e6", "3e6", "1e7", "3e7", "1e8"};
  std::vector<std::string> ops = crossover::kOps;
  int repeats = 20, threads = 0;
  double budget_ms = 200;
  bool gpu = true;
  std::string csv, svg;
};

int run_crossover(const CrossoverFlags& f) {
  if (f.threads > 0) set_num_threads(f.threads);
  std::vector<int64_t> sizes;
  for (const std::string& text : f.sizes) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    MINIDL_CHECK(end && *end == '\0' && v >= 1 && v <= 1e10 && v == std::floor(v), "--sizes: expected whole numbers "
                 "such as 1000 or 1e6, got '", text, "'");
    sizes.push_back(static_cast<int64_t>(v));
  }
  std::sort(sizes.begin(), sizes.end());
  const bool gpu = f.gpu && cuda::is_available();
  std::printf("CPU: %d threads; GPU: %s\nmedian of up to %d wall-clock calls after a warm-up (at least 3; fewer past "
              "%.0f ms); a GPU call is timed to its synchronize\n",
              get_num_threads(), gpu ? cuda::device_properties(0).name.c_str()
                                     : ("none (" + (f.gpu ? cuda::unavailable_reason() : std::string("--no-gpu")) + ")").c_str(),
              f.repeats, f.budget_ms);
  std::ofstream csv;
  if (!f.csv.empty()) {
    csv.open(f.csv);
    MINIDL_CHECK(csv.good(), "--csv: cannot write '", f.csv, "'");
    csv << "framework,op,size,cpu_ms,gpu_ms,gpu_transfer_ms,max_rel_err\n";
  }
  std::vector<svg::Panel> panels;
  for (const std::string& op : f.ops) {
    std::printf("\n%-8s %11s %11s %11s %16s %9s\n", op.c_str(), "elements", "CPU ms", "GPU ms", "GPU+transfer ms",
                "err");
    std::vector<int64_t> measured;
    std::vector<double> cpu, dev, transfer, logn;
    for (int64_t n : sizes) {
      if (op == "softmax" && n % 1000 != 0) continue;
      const crossover::Row r = crossover::measure(op, n, gpu, f.budget_ms, f.repeats);
      std::printf("%-8s %11lld %11.4f %11.4f %16.4f %9.1e\n", op.c_str(), static_cast<long long>(n), r.cpu_ms, r.gpu_ms,
                  r.gpu_transfer_ms, r.max_rel_error);
      std::fflush(stdout);
      if (csv.is_open())
        csv << "minidl," << op << "," << n << "," << r.cpu_ms << "," << r.gpu_ms << "," << r.gpu_transfer_ms << ","
            << r.max_rel_error << "\n";
      cpu.push_back(r.cpu_ms), dev.push_back(r.gpu_ms), transfer.push_back(r.gpu_transfer_ms);
      measured.push_back(n);
      logn.push_back(std::log10(static_cast<double>(n)));
    }
    auto say = [](std::optional<int64_t> n) { return n ? std::to_string(*n) + " elements" : std::string("never"); };
    if (gpu)
      std::printf("%s: the GPU wins from %s with the data on it, from %s with the transfers\n", op.c_str(),
                  say(crossover::crossover_size(measured, cpu, dev)).c_str(),
                  say(crossover::crossover_size(measured, cpu, transfer)).c_str());
    auto log_ms = [](std::vector<double> v) {
      for (double& x : v) x = std::log10(x * 1000);  // microseconds
      return v;
    };
    svg::Panel panel{op, "log10(elements)", "log10(microseconds)",
                     {{"CPU", "#1f77b4", logn, log_ms(cpu)}}};
    if (gpu) {
      panel.series.push_back({"GPU, data on it", "#d62728", logn, log_ms(dev)});
      panel.series.push_back({"GPU with transfers", "#ff7f0e", logn, log_ms(transfer)});
    }
    panel.integer_x = false;
    panels.push_back(panel);
  }
  if (!f.svg.empty()) {
    std::ofstream out(f.svg);
    MINIDL_CHECK(out.good(), "--svg: cannot write '", f.svg, "'");
    out << svg::chart("When the GPU wins: CPU vs GPU by array size (minidl)", panels);
  }
  return 0;
}

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
    double cublas_ms = 0;
    for (size_t i = 0; i < methods.size(); ++i) {
      if (!kernel_lab::gpu_method_supported(i)) {
        std::printf("%-15s %-16s  skipped: this GPU's compute capability is below the rung's\n", s.dims().c_str(),
                    methods[i].c_str());
        continue;
      }
      const kernel_lab::GemmResult r = bench.run(i, {f.warmup, f.repeats, f.budget_ms}, f.transfers);
      rows.push_back({s, methods[i], r.detail, r.kernel.median_ms, r.max_rel_error, r.pageable.median_ms,
                      r.pinned.median_ms, 0, r.kernel.repeats});
      if (i == kernel_lab::cublas_fp32_method()) cublas_ms = r.kernel.median_ms;
    }
    for (Row& row : rows) row.cublas_ms = cublas_ms;
    if (f.cpu) rows.push_back(cpu_row_within_budget(bench, cublas_ms, f));
    for (const Row& row : rows) print(row, s.label, csv);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
#endif

struct AttentionFlags {
  std::vector<int64_t> lengths = {256, 1024};
  int64_t batch = 384, head = 64;
  std::vector<std::string> dtypes = {"bfloat16", "float32"};
  bool causal = true, deterministic = false, redraw_mask = false;
  double dropout = 0;
  std::string backend = "minidl";
  int repeats = 20;
};

int run_attention(const AttentionFlags& f) {
  if (!cuda::is_available()) {
    std::fprintf(stderr, "bench_ops attention needs a GPU: %s\n", cuda::unavailable_reason().c_str());
    return 1;
  }
  std::printf("%s; B = %lld, head %lld, %s; ms per call, median of %d bursts of 10 calls\n",
              cuda::device_properties(0).name.c_str(), static_cast<long long>(f.batch),
              static_cast<long long>(f.head), f.causal ? "causal" : "not causal", f.repeats);
  std::printf("%-9s %6s %10s %12s %14s\n", "dtype", "L", "fwd_ms", "fwd_bwd_ms", "fwd_bwd_TFLOPs");
  // With dropout the forward stores its mask for the backward, as in training; with --redraw-mask
  // it does not, and the 16-bit backward redraws it and adds dQ with atomics, unless deterministic
  // mode gives dQ a pass of its own (ops/cuda/attention.cu).
  set_deterministic(f.deterministic);
  const bool atomics = f.dropout > 0 && f.redraw_mask && !f.deterministic;
  const bool library = f.backend == "cudnn";
  if (library) std::printf("dropout %g; cuDNN's fused attention\n", f.dropout);
  else
    std::printf("dropout %g, mask %s; backward dQ: %s\n", f.dropout, f.redraw_mask ? "redrawn" : "stored",
                atomics ? "atomics (16-bit types)" : "a pass of its own");
  const Device gpu = Device::cuda(0);
  Kernels& kernels = kernels_for(gpu);
  for (const std::string& name : f.dtypes) {
    const DType dtype = name == "bfloat16" ? kBFloat16 : name == "float16" ? kFloat16 : kFloat32;
    for (int64_t L : f.lengths) {
      const Shape shape{f.batch, L, f.head};
      Tensor q = randn(shape).to(gpu, dtype), k = randn(shape).to(gpu, dtype), v = randn(shape).to(gpu, dtype);
      Tensor grad_out = randn(shape).to(gpu, dtype);
      Tensor out = Tensor::empty(shape, dtype, gpu), lse = Tensor::empty({f.batch, L}, kFloat32, gpu);
      Tensor gq = Tensor::empty(shape, dtype, gpu), gk = Tensor::empty(shape, dtype, gpu);
      Tensor gv = Tensor::empty(shape, dtype, gpu), rng_state = zeros({3}, kInt64);
      const double scale = 1.0 / std::sqrt(static_cast<double>(f.head));
      Tensor keep_mask, seed_offset;
      if (library &&
          !kernels.library_attention_forward(q, k, v, scale, f.causal, f.dropout, out, lse, rng_state, seed_offset)) {
        std::printf("%-9s %6lld  cuDNN has no engine for this call\n", name.c_str(), static_cast<long long>(L));
        continue;
      }
      auto forward = [&] {
        if (library)
          kernels.library_attention_forward(q, k, v, scale, f.causal, f.dropout, out, lse, rng_state, seed_offset);
        else
          kernels.attention_forward(q, k, v, scale, f.causal, f.dropout, out, lse, rng_state,
                                    f.redraw_mask ? nullptr : &keep_mask);
      };
      auto both = [&] {
        forward();
        if (library)
          kernels.library_attention_backward(grad_out, q, k, v, out, lse, seed_offset, scale, f.causal, f.dropout, gq,
                                             gk, gv);
        else
          kernels.attention_backward(grad_out, q, k, v, out, lse, rng_state, keep_mask, scale, f.causal, f.dropout,
                                     gq, gk, gv);
      };
      auto median_ms = [&](const std::function<void()>& work) {
        for (int i = 0; i < 3; ++i) work();
        cuda::synchronize();
        std::vector<double> ms;
        for (int r = 0; r < f.repeats; ++r) {
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < 10; ++i) work();
          cuda::synchronize();
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 10);
        }
        std::sort(ms.begin(), ms.end());
        return ms[ms.size() / 2];
      };
      const double fwd = median_ms(forward), total = median_ms(both);
      // FlashAttention's count: 4 B L^2 E for the forward (halved when causal), 2.5 times that backward.
      const double flops = 3.5 * 4.0 * f.batch * L * L * f.head * (f.causal ? 0.5 : 1.0);
      std::printf("%-9s %6lld %10.3f %12.3f %14.1f\n", name.c_str(), static_cast<long long>(L), fwd, total,
                  flops / (total * 1e-3) / 1e12);
      std::fflush(stdout);
    }
  }
  return 0;
}

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
  CrossoverFlags x;
  CLI::App* xo = app.add_subcommand("crossover", "CPU against GPU by array size: elementwise, sum, softmax");
  xo->add_option("--sizes", x.sizes, "element counts (1e3 .. 1e8)")->capture_default_str();
  xo->add_option("--ops", x.ops, "ops to run")->check(CLI::IsMember(crossover::kOps))->capture_default_str();
  xo->add_option("--repeats", x.repeats, "timed calls per measurement, at most")->check(CLI::Range(3, 1000))->capture_default_str();
  xo->add_option("--budget-ms", x.budget_ms, "fewer calls (at least 3) past this time")->check(CLI::PositiveNumber)->capture_default_str();
  xo->add_option("--threads", x.threads, "CPU threads (0: all cores)")->check(CLI::Range(0, 4096));
  xo->add_flag("--gpu,!--no-gpu", x.gpu, "also run on the GPU where there is one (default on)");
  xo->add_option("--csv", x.csv, "also write the table as CSV to this file");
  xo->add_option("--svg", x.svg, "draw the times by size (log-log) into this SVG file");
  AttentionFlags at;
  CLI::App* att = app.add_subcommand("attention", "the fused attention kernels, forward and forward + backward");
  att->add_option("--lengths", at.lengths, "sequence lengths (L = S)")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  att->add_option("--batch", at.batch, "batch x heads")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  att->add_option("--head", at.head, "head size: 32, 64 or 128")->check(CLI::IsMember({32, 64, 128}))->capture_default_str();
  att->add_option("--dtypes", at.dtypes, "element types")->check(CLI::IsMember({"bfloat16", "float16", "float32"}))
      ->capture_default_str();
  att->add_flag("--causal,!--no-causal", at.causal, "causal (default on)");
  att->add_option("--dropout", at.dropout, "attention dropout probability")->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  att->add_flag("--deterministic", at.deterministic, "the deterministic backward (dQ in a pass of its own)");
  att->add_flag("--redraw-mask", at.redraw_mask, "with dropout, the backward redraws the mask the forward drew");
  att->add_option("--backend", at.backend, "minidl's kernels or cuDNN's fused attention")
      ->check(CLI::IsMember({"minidl", "cudnn"}))->capture_default_str();
  att->add_option("--repeats", at.repeats, "timed bursts")->check(CLI::Range(1, 1000))->capture_default_str();
  mnist_app::parse_or_exit(app, argc, argv);  // a bad flag exits 2, as in every app

  try {
    if (xo->parsed()) return run_crossover(x);
    if (att->parsed()) return run_attention(at);
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
