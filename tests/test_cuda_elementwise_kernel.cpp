// cuda::ElementwiseKernel, kernels compiled at run time by NVRTC. Without a GPU: the parameter
// lists, the generated source, the errors, and (in a CUDA build, since NVRTC needs no GPU) compiling
// it, its compile errors and the disk cache. With a GPU: results against a float64 CPU reference
// (broadcasting, strided views, every dtype, several outputs), the backward under gradcheck, the
// errors for bad inputs, and the disk cache across a cleared memory cache.
#include <cmath>
#include <cstdlib>
#include <optional>

#include "ops/elementwise_kernel.h"
#include "test_cuda_util.h"
#include "test_file_util.h"
#include "test_util.h"

#ifdef MINIDL_WITH_CUDA
#include "ops/cuda/rtc_compiler.h"
#include "ops/elementwise_kernel_source.h"
#endif

namespace minidl::cuda_elementwise_kernel_test {

using namespace minidl::testing;
using cuda::ElementwiseKernel;

namespace {

// Sets (or, given nullopt, unsets) an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Every test compiles into a cache folder of its own, never the user's.
class ElementwiseKernelTest : public TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    cache_env_.emplace("MINIDL_KERNEL_CACHE", path("kernels"));
  }
  void TearDown() override {
    cache_env_.reset();
    TempFolderTest::TearDown();
  }
  std::vector<fs::path> cache_files() const {
    std::vector<fs::path> files;
    if (fs::exists(dir_ / "kernels"))
      for (const auto& entry : fs::directory_iterator(dir_ / "kernels")) files.push_back(entry.path());
    return files;
  }

  std::optional<ScopedEnv> cache_env_;
};

// `t` (any device, dtype, layout) broadcast to `shape`, as float64 values in row-major order.
std::vector<double> values64(const Tensor& t, const Shape& shape) {
  NoGradGuard no_grad;
  return expand(t.to(Device::cpu()), shape).contiguous().to(kFloat64).to_vector<double>();
}

Tensor from_doubles(const std::vector<double>& v, const Shape& shape) { return Tensor::from_vector(v, shape); }

// A float64 leaf on the GPU that wants a gradient.
Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).to(gpu()).requires_grad_(); }

}  // namespace

// ---- the parameter lists, the source and the errors: no GPU needed ----

TEST(ElementwiseKernelParams, ParsesEveryTypeAndSpelling) {
  ElementwiseKernel k("float x, double y, int64_t k, long long j, bool m", "float z, bool p", "z = x; p = m", "kinds");
  EXPECT_EQ(k.name(), "kinds");
  EXPECT_EQ(k.num_inputs(), 5);
  EXPECT_EQ(k.num_outputs(), 2);
  EXPECT_FALSE(k.differentiable());
  EXPECT_EQ(k.backward_source(), "");
  const std::string src = k.source();
  for (const char* part : {"const float x", "const double y", "const long long k", "const long long j",
                           "const bool m", "float& z", "bool& p", "kinds_flat32", "kinds_flat64", "kinds_strided32",
                           "kinds_strided64"}) {
    EXPECT_NE(src.find(part), std::string::npos) << part << " not in:\n" << src;
  }
  // Whitespace is free; an empty entry is not.
  EXPECT_EQ(ElementwiseKernel("  float   a ,double\tb ", " float c ", "c = a + b").num_inputs(), 2);
}

TEST(ElementwiseKernelParams, BadListsSayWhichEntryIsWrong) {
  auto make = [](const std::string& in, const std::string& out) {
    return [in, out] { ElementwiseKernel(in, out, "z = 0", "k"); };
  };
  expect_error(make("float x, flot y", "float z"), {"cuda::ElementwiseKernel \"k\"", "bad input parameter list",
                                                     "unknown type \"flot\" for y", "int64_t (or long long)"});
  expect_error(make("int x", "float z"), {"unknown type \"int\" for x"});
  expect_error(make("float", "float z"), {"\"float\" has a type but no name"});
  expect_error(make("x", "float z"), {"\"x\" has a name but no type"});
  expect_error(make("float x,, float y", "float z"), {"entry 2 is empty"});
  expect_error(make("float x,", "float z"), {"entry 2 is empty"});
  expect_error(make("float* x", "float z"), {"\"float* x\" is not a per-element value"});
  expect_error(make("float x, double x", "float z"), {"the name \"x\" is declared twice"});
  expect_error(make("float i", "float z"), {"the name \"i\" is reserved"});
  expect_error(make("float n", "float z"), {"the name \"n\" is reserved"});
  expect_error(make("float minidl_x", "float z"), {"reserved"});
  expect_error(make("float 2x", "float z"), {"\"2x\" is not a valid name"});
  expect_error(make("double float", "float z"), {"\"float\" is not a valid name"});
  expect_error(make("float x", "float z, float* w"), {"bad output parameter list"});
  expect_error(make("", "float z"), {"expected at least one input parameter"});
  expect_error(make("float x", " "), {"expected at least one output parameter"});
  expect_error(make("float x", "float x"), {"x is both an input and an output parameter"});
  expect_error([] { ElementwiseKernel("float x", "float z", "  \n", "k"); }, {"the body is empty"});
  expect_error([] { ElementwiseKernel("float x", "float z", "z = x", "my-kernel"); },
               {"cuda::ElementwiseKernel \"my-kernel\"", "must be a C identifier"});
}

TEST(ElementwiseKernelParams, BadBackwardStatementsAreRefusedAtConstruction) {
  expect_error([] { ElementwiseKernel("float x, float y", "float z", "z = x * y", "k", {"gx = gz * y"}); },
               {"no backward statement assigns gy, the gradient of input y", "gy = 0"});
  expect_error([] { ElementwiseKernel("int64_t a", "float z", "z = a", "k", {"ga = 0"}); },
               {"no floating (float or double) input"});
  expect_error([] { ElementwiseKernel("float x", "bool z", "z = x > 0", "k", {"gx = 0"}); },
               {"no floating (float or double) output"});
  expect_error([] { ElementwiseKernel("float x, float gx", "float z", "z = x", "k", {"gx = gz", "ggx = 0"}); },
               {"the gradient of input x is called gx", "a parameter has that name"});
  expect_error([] { ElementwiseKernel("float x", "float z", "z = x", "k", {"gx = gz", " "}); },
               {"backward statement 2 is empty"});
  // Integer and bool inputs get no gradient and need no statement.
  ElementwiseKernel ok("float x, bool m", "float z", "z = m ? x : 0.f", "masked", {"gx = m ? gz : 0.f"});
  EXPECT_TRUE(ok.differentiable());
}

TEST(ElementwiseKernelSource, KeepsTheBodyUnderItsOwnLineNumbers) {
  ElementwiseKernel k("float x, float y", "float z", "z = x * y + 1", "fma1", {"gx = gz * y", "gy = gz * x"});
  const std::string fwd = k.source();
  EXPECT_NE(fwd.find("#line 1 \"fma1\"\nz = x * y + 1\n;"), std::string::npos) << fwd;
  const std::string bwd = k.backward_source();
  EXPECT_NE(bwd.find("#line 1 \"fma1.backward\"\ngx = gz * y\n;"), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("#line 2 \"fma1.backward\"\ngy = gz * x\n;"), std::string::npos) << bwd;
  // The backward reads what its statements name (x, y and gz; not z) and writes gx and gy.
  EXPECT_NE(bwd.find("const float x, const float y, const float gz, float& gx, float& gy"), std::string::npos) << bwd;
}

TEST(ElementwiseKernel, RunningItNeedsCudaTensorsOrTheCudaBuild) {
  ElementwiseKernel k("float x, float y", "float z", "z = x * y", "needs_gpu");
  Tensor x = randn({3}), y = randn({3});
#ifdef MINIDL_WITH_CUDA
  expect_error([&] { k({x, y}); }, {"cuda::ElementwiseKernel \"needs_gpu\"", "input x is on cpu",
                                    "run-time kernels take CUDA tensors"});
  expect_error([&] { k({x}); }, {"expected 2 input tensors (x, y), got 1"});
  if (!cuda::is_available()) {
    expect_error([&] { k.compile(Device::cuda(0)); }, {"cuda:0 requested, but CUDA is not usable"});
  }
#else
  expect_error([&] { k({x, y}); }, {"cuda::ElementwiseKernel \"needs_gpu\"", "need the CUDA build of minidl",
                                    "-DMINIDL_CUDA=ON"});
  expect_error([&] { k.compile(); }, {"need the CUDA build of minidl"});
  EXPECT_EQ(cuda::kernel_cache_dir(), "");
#endif
  expect_error([&] { k.compile(Device::cpu()); }, {"cuda::ElementwiseKernel \"needs_gpu\""});
}

#ifdef MINIDL_WITH_CUDA

TEST(ElementwiseKernel, CacheFolderFollowsTheEnvironment) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv dir("MINIDL_KERNEL_CACHE", "/tmp/my kernels");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(cuda::kernel_cache_dir(), "/tmp/my kernels");
  }
  ScopedEnv dir("MINIDL_KERNEL_CACHE", std::nullopt);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(cuda::kernel_cache_dir(), "/xdg/minidl/kernels");
  }
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(cuda::kernel_cache_dir(), "/home/someone/.cache/minidl/kernels");
}

// ---- NVRTC without a GPU: the generated source compiles, errors carry the log, the disk cache ----

namespace {

// The forward source of a kernel as the GPU path compiles it.
rtc::GeneratedSource generated(const ElementwiseKernel& k, bool backward = false) {
  rtc::GeneratedSource g;
  g.source = backward ? k.backward_source() : k.source();
  g.file_name = rtc::generated_file_name(k.name() + (backward ? "_backward" : ""));
  g.cache_label = k.name();
  g.what = "test kernel " + k.name();
  return g;
}

}  // namespace

TEST(RtcCompiler, TargetsTheDevicesOwnArchitectureOrTheNewestPtxBelowIt) {
  const rtc::Target hopper = rtc::target_for(9, 0);
  EXPECT_EQ(hopper.arch, 90);
  EXPECT_EQ(hopper.kind, rtc::ImageKind::Cubin);
  EXPECT_EQ(hopper.arch_name(), "sm_90");
  const rtc::Target future = rtc::target_for(99, 0);  // newer than any NVRTC knows: PTX the driver compiles
  EXPECT_EQ(future.kind, rtc::ImageKind::Ptx);
  EXPECT_LT(future.arch, 990);
  EXPECT_EQ(future.arch_name(), "compute_" + std::to_string(future.arch));
  expect_error([] { rtc::target_for(1, 0); }, {"this GPU is sm_10", "compiles for sm_"});
}

class RtcCompilerTest : public ElementwiseKernelTest {};

TEST_F(RtcCompilerTest, GeneratedSourcesCompileForEveryDtypeAndOutputCount) {
  ElementwiseKernel k("float x, double y, int64_t k, bool m", "double z, int64_t q, bool p",
                      "z = m ? x * y : sin(y) + k;\nq = k * 2 + (m ? 1 : 0) + i % 3;\np = x > 0 && n > 1;", "kinds",
                      {"gx = gz * y", "gy = gz * x"});
  for (const rtc::Target& target : {rtc::target_for(9, 0), rtc::target_for(8, 0), rtc::target_for(99, 0)}) {
    SCOPED_TRACE(target.arch_name());
    for (bool backward : {false, true}) {
      auto image = rtc::compile(generated(k, backward), target);
      ASSERT_FALSE(image->bytes.empty());
      if (target.kind == rtc::ImageKind::Cubin) {
        EXPECT_EQ(image->bytes.substr(0, 4), "\x7f" "ELF");
      } else {
        EXPECT_NE(image->bytes.find(".entry kinds" + std::string(backward ? "_backward" : "") + "_strided64"),
                  std::string::npos);
        EXPECT_EQ(image->bytes.back(), '\0');  // the driver reads PTX as a C string
      }
    }
  }
}

TEST_F(RtcCompilerTest, CompileErrorCarriesTheLogAndTheBodysLine) {
  ElementwiseKernel k("float x, float y", "float z", "float t = x * y;\nz = t + q", "typo",
                      {"gx = gz * y", "gy = gz * w"});
  rtc::GeneratedSource g = generated(k);
  g.listing = "the body";
  const std::string message = error_of([&] { rtc::compile(g, rtc::target_for(9, 0)); });
  for (const char* part : {"test kernel typo: NVRTC", "cannot compile it for sm_90", "typo(2): error",
                           "identifier \"q\" is undefined", "z = t + q", "the body"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in:\n" << message;
  }
  // Only errors outside the body bring the whole generated source along.
  EXPECT_EQ(message.find("the generated source"), std::string::npos) << message;
  const std::string backward = error_of([&] { rtc::compile(generated(k, true), rtc::target_for(9, 0)); });
  EXPECT_NE(backward.find("typo.backward(2): error: identifier \"w\" is undefined"), std::string::npos) << backward;

  ElementwiseKernel brace("float x", "float z", "z = x; }", "brace");
  const std::string outside = error_of([&] { rtc::compile(generated(brace), rtc::target_for(9, 0)); });
  EXPECT_NE(outside.find("the generated source brace.cu:\n"), std::string::npos) << outside;
  EXPECT_NE(outside.find(" | z = x; }"), std::string::npos) << outside;
}

TEST_F(RtcCompilerTest, DiskCacheServesAClearedMemoryAndRecompilesADamagedFile) {
  ElementwiseKernel k("float x", "float z", "z = 3 * x", "cached");
  const rtc::GeneratedSource g = generated(k);
  const rtc::Target target = rtc::target_for(9, 0);
  cuda::clear_kernel_memory_cache();
  const cuda::KernelCacheStats s0 = cuda::kernel_cache_stats();
  const std::string image = rtc::compile(g, target)->bytes;
  cuda::KernelCacheStats s = cuda::kernel_cache_stats();
  EXPECT_EQ(s.compilations, s0.compilations + 1);
  EXPECT_EQ(s.disk_writes, s0.disk_writes + 1);
  std::vector<fs::path> files = cache_files();
  ASSERT_EQ(files.size(), 1u);  // no temporary file left behind
  EXPECT_EQ(files[0].filename().string().rfind("cached-", 0), 0u) << files[0];

  // In memory: no disk access at all.
  rtc::compile(g, target);
  EXPECT_EQ(cuda::kernel_cache_stats().disk_loads, s0.disk_loads);

  cuda::clear_kernel_memory_cache();
  auto from_disk = rtc::compile(g, target);
  s = cuda::kernel_cache_stats();
  EXPECT_TRUE(from_disk->from_disk);
  EXPECT_EQ(from_disk->bytes, image);
  EXPECT_EQ(s.compilations, s0.compilations + 1);
  EXPECT_EQ(s.disk_loads, s0.disk_loads + 1);

  // A file cut short, then one of garbage: each is ignored, recompiled and rewritten whole.
  const std::string whole = read_bytes(files[0]);
  int64_t rejected = s.disk_rejected, compilations = s.compilations;
  for (const std::string& damaged : {whole.substr(0, whole.size() / 2), std::string("not a kernel"), std::string()}) {
    write_bytes(files[0], damaged);
    cuda::clear_kernel_memory_cache();
    auto again = rtc::compile(g, target);
    s = cuda::kernel_cache_stats();
    EXPECT_FALSE(again->from_disk);
    EXPECT_EQ(again->bytes, image);
    EXPECT_EQ(s.disk_rejected, ++rejected);
    EXPECT_EQ(s.compilations, ++compilations);
    EXPECT_EQ(read_bytes(files[0]), whole);
  }
  // Another source never reads this one's file, even under the same name.
  ElementwiseKernel other("float x", "float z", "z = 4 * x", "cached");
  rtc::compile(generated(other), target);
  EXPECT_EQ(cache_files().size(), 2u);
}

#endif  // MINIDL_WITH_CUDA

// ---- on the GPU ----

class CudaElementwiseKernel : public ElementwiseKernelTest {};

TEST_F(CudaElementwiseKernel, MatchesAFloat64ReferenceWithBroadcastingAndStrides) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  ElementwiseKernel fma1("float x, float y, float s", "float z", "z = x * y + s + sinf(x)", "fma1");
  auto reference = [](const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& s) {
    std::vector<double> z(x.size());
    for (size_t i = 0; i < z.size(); ++i) z[i] = x[i] * y[i] + s[i] + std::sin(x[i]);
    return z;
  };
  const Shape shape = {5, 7, 3};
  Tensor s = full({}, 0.5, kFloat32, gpu());  // a scalar as a 0-d tensor
  // Contiguous inputs of the output's shape (the flat loop), then broadcast and strided ones.
  Tensor xc = randn(shape).to(gpu()), yc = randn(shape).to(gpu());
  Tensor x_permuted = randn({3, 7, 5}).to(gpu()).permute({2, 1, 0});          // [5, 7, 3], not contiguous
  Tensor y_sliced = randn({1, 14, 1}).to(gpu()).slice(1, 0, std::nullopt, 2);  // [1, 7, 1], stride 2
  Tensor y_row = randn({3}).to(gpu());                                         // broadcast along dims 0, 1
  for (auto [x, y] : {std::pair{xc, yc}, std::pair{x_permuted, y_sliced}, std::pair{xc, y_row},
                      std::pair{x_permuted, yc}}) {
    SCOPED_TRACE("x " + shape_str(x.shape()) + ", y " + shape_str(y.shape()));
    Tensor z = fma1({x, y, s});
    ASSERT_EQ(z.shape(), shape);
    EXPECT_EQ(z.dtype(), kFloat32);
    EXPECT_EQ(z.device(), gpu());
    EXPECT_TRUE(z.is_contiguous());
    Tensor expected = from_doubles(reference(values64(x, shape), values64(y, shape), values64(s, shape)), shape);
    EXPECT_TRUE(all_close(z.to(kFloat64), expected, 1e-5, 1e-5));
  }
}

TEST_F(CudaElementwiseKernel, IndexIsTheOutputsRowMajorPositionOnEveryPath) {
  MINIDL_REQUIRE_CUDA();
  ElementwiseKernel index("double x", "double z, int64_t count", "z = x + i; count = n", "index");
  const Shape shape = {4, 3, 5};
  std::vector<double> expected(60);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<double>(i);
  // Contiguous (flat loop), permuted (strided loop), and a 0-d tensor broadcast (every stride 0).
  for (Tensor x : {zeros(shape, kFloat64, gpu()), zeros({5, 3, 4}, kFloat64, gpu()).permute({2, 1, 0}),
                   expand(zeros({}, kFloat64, gpu()), shape)}) {
    std::vector<Tensor> out = index.call({x});
    EXPECT_TRUE(all_equal(out[0], from_doubles(expected, shape)));
    EXPECT_EQ(out[1].to_vector<int64_t>(), std::vector<int64_t>(60, 60));
  }
}

TEST_F(CudaElementwiseKernel, Float64Int64AndBoolParametersAndThreeOutputs) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  ElementwiseKernel mixed("double x, int64_t k, bool m", "double z, int64_t q, bool p",
                          "z = m ? x * k : -x;\nq = k * 3 - (m ? 1 : 0);\np = x > 0.0 || k == 2", "mixed");
  const Shape shape = {9, 11};
  Tensor x = randn(shape, kFloat64).to(gpu());
  Tensor k = (rand({11}, kFloat64) * 5.0).to(kInt64).to(gpu());  // 0..4, broadcast over rows
  Tensor m = gt(randn({9, 1}), 0.0).to(gpu());                    // bool, broadcast over columns
  std::vector<Tensor> out = mixed.call({x, k, m});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].dtype(), kFloat64);
  EXPECT_EQ(out[1].dtype(), kInt64);
  EXPECT_EQ(out[2].dtype(), kBool);
  const std::vector<double> xv = values64(x, shape), kv = values64(k, shape), mv = values64(m, shape);
  std::vector<double> z(xv.size());
  std::vector<int64_t> q(xv.size());
  std::vector<bool> p(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const auto kk = static_cast<int64_t>(kv[i]);
    const bool mm = mv[i] != 0;
    z[i] = mm ? xv[i] * static_cast<double>(kk) : -xv[i];
    q[i] = kk * 3 - (mm ? 1 : 0);
    p[i] = xv[i] > 0.0 || kk == 2;
  }
  EXPECT_TRUE(all_close(out[0], from_doubles(z, shape), 1e-12, 1e-12));
  EXPECT_EQ(out[1].to_vector<int64_t>(), q);
  EXPECT_EQ(out[2].to_vector<bool>(), p);
}

TEST_F(CudaElementwiseKernel, TwoOutputsComeBackInDeclarationOrder) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  ElementwiseKernel minmax("float a, float b", "float lo, float hi", "lo = fminf(a, b);\nhi = fmaxf(a, b);", "minmax");
  Tensor a = randn({13}).to(gpu()), b = randn({13}).to(gpu());
  std::vector<Tensor> out = minmax.call({a, b});
  ASSERT_EQ(out.size(), 2u);
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), lo = out[0].to_vector<float>(),
                     hi = out[1].to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) {
    EXPECT_EQ(lo[i], std::min(av[i], bv[i])) << i;
    EXPECT_EQ(hi[i], std::max(av[i], bv[i])) << i;
  }
  expect_error([&] { minmax({a, b}); }, {"has 2 outputs; call(inputs) returns them all"});
}

TEST_F(CudaElementwiseKernel, EmptyAndManyDimensionalInputs) {
  MINIDL_REQUIRE_CUDA();
  ElementwiseKernel twice("float x", "float z", "z = 2 * x", "twice");
  Tensor empty = twice({zeros({0, 3}, kFloat32, gpu())});
  EXPECT_EQ(empty.shape(), (Shape{0, 3}));
  // Nine dims whose strides merge nowhere: more than the strided loop walks, so the input is copied
  // into the output's layout first.
  Tensor base = randn({2, 2, 2, 2, 2, 2, 2, 2, 2}).to(gpu());
  Tensor reversed = base.permute({8, 7, 6, 5, 4, 3, 2, 1, 0});
  const Tensor on_cpu = base.to(Device::cpu()).permute({8, 7, 6, 5, 4, 3, 2, 1, 0}).contiguous() * 2.0;
  EXPECT_TRUE(all_close(twice({reversed}).to(Device::cpu()), on_cpu, 0, 0));
  EXPECT_TRUE(all_close(reversed.contiguous().to(Device::cpu()) * 2.0, on_cpu, 0, 0));  // the copy kernel, 9 dims
}

TEST_F(CudaElementwiseKernel, BackwardPassesGradcheckInFloat64) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  ElementwiseKernel fma("double x, double y", "double z", "z = x * y + sin(x)", "fma_grad",
                        {"gx = gz * (y + cos(x))", "gy = gz * x"});
  auto f = [&](const std::vector<Tensor>& in) { return fma({in[0], in[1]}); };
  GradcheckResult r = gradcheck(f, {leaf({3, 4}), leaf({4})});  // y broadcast: its gradient sums over rows
  EXPECT_TRUE(r) << r.message;
  r = gradcheck(f, {leaf({2, 1, 3}), randn({4, 1}, kFloat64).to(gpu())});  // only x wants a gradient
  EXPECT_TRUE(r) << r.message;
  Tensor x_view = randn({4, 3}, kFloat64).to(gpu()).t().requires_grad_();  // a strided leaf
  r = gradcheck(f, {x_view, leaf({1})});
  EXPECT_TRUE(r) << r.message;

  // A backward that reads the output it made.
  ElementwiseKernel exp_k("double x", "double y", "y = exp(x)", "exp_grad", {"gx = gy * y"});
  r = gradcheck([&](const std::vector<Tensor>& in) { return exp_k({in[0]}); }, {leaf({5})});
  EXPECT_TRUE(r) << r.message;

  // Two outputs: each gets its own tape entry, and their gradients add up at the inputs.
  ElementwiseKernel sum_prod("double x, double y", "double s, double p", "s = x + y; p = x * y", "sum_prod",
                             {"gx = gs + gp * y", "gy = gs + gp * x"});
  r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        std::vector<Tensor> out = sum_prod.call({in[0], in[1]});
        return out[0] * 3.0 + out[1];
      },
      {leaf({3, 2}), leaf({3, 2})});
  EXPECT_TRUE(r) << r.message;

  // A non-floating input gets no gradient; the floating one does.
  ElementwiseKernel masked("double x, bool m", "double z", "z = m ? x * x : 0.0", "masked_grad",
                           {"gx = m ? 2.0 * x * gz : 0.0"});
  Tensor m = gt(randn({6}), 0.0).to(gpu());
  r = gradcheck([&](const std::vector<Tensor>& in) { return masked({in[0], m}); }, {leaf({6})});
  EXPECT_TRUE(r) << r.message;
}

TEST_F(CudaElementwiseKernel, BackwardGradientsAgreeWithTheBuiltInOps) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  ElementwiseKernel mul_k("float x, float y", "float z", "z = x * y", "mul_grad", {"gx = gz * y", "gy = gz * x"});
  Tensor x1 = randn({5, 7}).to(gpu()).requires_grad_(), y1 = randn({7}).to(gpu()).requires_grad_();
  Tensor x2 = x1.detach().clone().requires_grad_(), y2 = y1.detach().clone().requires_grad_();
  mul_k({x1, y1}).sum().backward();
  mul(x2, y2).sum().backward();
  EXPECT_TRUE(all_close(x1.grad(), x2.grad(), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(y1.grad(), y2.grad(), 1e-5, 1e-5));
  EXPECT_EQ(y1.grad().shape(), (Shape{7}));
}

TEST_F(CudaElementwiseKernel, BadInputsNameTheParameter) {
  MINIDL_REQUIRE_CUDA();
  ElementwiseKernel k("float x, float y", "float z", "z = x * y", "checked");
  Tensor x = randn({4}).to(gpu()), y = randn({4}).to(gpu());
  expect_error([&] { k({x}); }, {"cuda::ElementwiseKernel \"checked\"", "expected 2 input tensors (x, y), got 1"});
  expect_error([&] { k({x, y, y}); }, {"expected 2 input tensors (x, y), got 3"});
  expect_error([&] { k({x, y.to(kFloat64)}); },
               {"input y is declared float, which takes a float32 tensor, but got a float64 tensor", ".to(kFloat32)"});
  expect_error([&] { k({x.to(kInt64), y}); }, {"input x is declared float", "got a int64 tensor"});
  expect_error([&] { k({x, y.to(Device::cpu())}); }, {"input y is on cpu", "take CUDA tensors"});
  expect_error([&] { k({x, Tensor()}); }, {"input y is an undefined tensor"});
  expect_error([&] { k({x, randn({3}).to(gpu())}); }, {"\"checked\": shapes [4] and [3] cannot be broadcast"});
  if (cuda::device_count() >= 2) {
    expect_error([&] { k({x, y.to(Device::cuda(1))}); },
                 {"expected every input on one device", "x is on cuda:0 and y on cuda:1"});
  }
  // Without backward statements, an input that wants a gradient is refused rather than ignored.
  Tensor w = randn({4}).to(gpu()).requires_grad_();
  expect_error([&] { k({w, y}); }, {"input x requires grad, but the kernel has no backward statements", "NoGradGuard"});
  NoGradGuard no_grad;
  EXPECT_FALSE(k({w, y}).requires_grad());
}

TEST_F(CudaElementwiseKernel, CompileErrorsShowNvrtcsLogAndTheOffendingLine) {
  MINIDL_REQUIRE_CUDA();
  ElementwiseKernel bad("float x, float y", "float z", "float t = x * y;\nz = t + q", "bad_body");
  const std::string message = error_of([&] { bad.compile(); });
  for (const char* part : {"cuda::ElementwiseKernel \"bad_body\": NVRTC", "bad_body(2): error",
                           "identifier \"q\" is undefined", "z = t + q", "where bad_body(N) in the log is line N of:",
                           "   2 | z = t + q"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in:\n" << message;
  }
  expect_error([&] { bad({randn({2}).to(gpu()), randn({2}).to(gpu())}); }, {"identifier \"q\" is undefined"});

  // A broken backward statement fails in the forward call that would record it.
  ElementwiseKernel bad_grad("float x", "float z", "z = x * x", "bad_grad", {"gx = 2 * x * gzz"});
  Tensor x = randn({3}).to(gpu()).requires_grad_();
  expect_error([&] { bad_grad({x}); }, {"bad_grad.backward(1): error", "identifier \"gzz\" is undefined"});
  NoGradGuard no_grad;
  EXPECT_NO_THROW(bad_grad({x}));  // the forward alone is fine
}

TEST_F(CudaElementwiseKernel, ASecondKernelLoadsFromDiskAndADamagedFileIsRecompiled) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  const std::string in = "float x, float y", out = "float z", body = "z = 2 * x - y";
  Tensor x = randn({6, 5}).to(gpu()), y = randn({5}).to(gpu());
  Tensor expected = x * 2.0 - y;
  cuda::clear_kernel_memory_cache();
  const cuda::KernelCacheStats s0 = cuda::kernel_cache_stats();
  EXPECT_TRUE(all_close(ElementwiseKernel(in, out, body, "from_disk")({x, y}), expected, 1e-6, 1e-6));
  cuda::KernelCacheStats s = cuda::kernel_cache_stats();
  EXPECT_EQ(s.compilations, s0.compilations + 1);
  EXPECT_EQ(s.disk_writes, s0.disk_writes + 1);
  const std::vector<fs::path> files = cache_files();
  ASSERT_EQ(files.size(), 1u);

  // A fresh in-memory state, as a new process has: the second object reads the file.
  cuda::clear_kernel_memory_cache();
  EXPECT_TRUE(all_close(ElementwiseKernel(in, out, body, "from_disk")({x, y}), expected, 1e-6, 1e-6));
  s = cuda::kernel_cache_stats();
  EXPECT_EQ(s.compilations, s0.compilations + 1);
  EXPECT_EQ(s.disk_loads, s0.disk_loads + 1);

  const std::string whole = read_bytes(files[0]);
  write_bytes(files[0], whole.substr(0, whole.size() - 100));
  cuda::clear_kernel_memory_cache();
  EXPECT_TRUE(all_close(ElementwiseKernel(in, out, body, "from_disk")({x, y}), expected, 1e-6, 1e-6));
  s = cuda::kernel_cache_stats();
  EXPECT_EQ(s.disk_rejected, s0.disk_rejected + 1);
  EXPECT_EQ(s.compilations, s0.compilations + 2);
  EXPECT_EQ(read_bytes(files[0]), whole);
}

}  // namespace minidl::cuda_elementwise_kernel_test
