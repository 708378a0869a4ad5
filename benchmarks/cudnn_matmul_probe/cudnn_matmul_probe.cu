// A probe: cuDNN's runtime-fused matmul with a pointwise epilogue at char_gpt's MLP backward shape
// (bf16 [16384, 384] x [384, 1536], float32 sums): the product times a given bf16 tensor D (the GELU's
// derivative stored by the forward), against cuBLAS's product and a separate pass.
// Build and run: README.md beside it.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
#define CB(x) do { cublasStatus_t e = (x); if (e != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS %d at %d\n", int(e), __LINE__); exit(1);} } while (0)
#define CD(x) do { cudnnStatus_t e = (x); if (e != CUDNN_STATUS_SUCCESS) { printf("cuDNN %s at %d\n", cudnnGetErrorString(e), __LINE__); exit(1);} } while (0)

using bf16 = __nv_bfloat16;

constexpr double kSqrtHalf = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kLog2e = 1.44269504088896340736, kLn2 = 0.69314718055994530942;
__device__ __forceinline__ float rcp_approx(float x) { float r; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
__device__ __forceinline__ float exp2_approx(float x) { float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
__device__ __forceinline__ float normal_cdf_16bit(float x) {
  constexpr float kFit[9] = {float((-1.265185669e+00 - kLn2) * kLog2e), float(9.928496493e-01 * kLog2e),
                             float(4.402657229e-01 * kLog2e),           float(-2.403593379e-01 * kLog2e),
                             float(8.628826987e-01 * kLog2e),           float(-1.797548562e+00 * kLog2e),
                             float(1.489086882e+00 * kLog2e),           float(-5.620479952e-01 * kLog2e),
                             float(8.005644403e-02 * kLog2e)};
  const float t = rcp_approx(fmaf(fabsf(x), float(0.5 * kSqrtHalf), 1.f));
  float p = kFit[8];
#pragma unroll
  for (int k = 7; k >= 0; --k) p = fmaf(p, t, kFit[k]);
  const float e = exp2_approx(fmaf(x * x, float(-0.5 * kLog2e), p));
  return x >= 0.f ? fmaf(-t, e, 1.f) : t * e;
}
__device__ __forceinline__ float normal_density_16bit(float x) { return exp2_approx(x * x * float(-0.5 * kLog2e)) * float(kInvSqrt2Pi); }

__global__ void mul_pass(const bf16* __restrict__ a, bf16* __restrict__ d, size_t n8) {  // d = a * d
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n8; i += size_t(gridDim.x) * blockDim.x) {
    uint4 v = reinterpret_cast<const uint4*>(a)[i], w = reinterpret_cast<const uint4*>(d)[i];
    __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(&v);
    __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(&w);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      q[k] = __floats2bfloat162_rn(__low2float(q[k]) * __low2float(p[k]), __high2float(q[k]) * __high2float(p[k]));
    reinterpret_cast<uint4*>(d)[i] = w;
  }
}
__global__ void dgelu_pass(const bf16* __restrict__ h, const bf16* __restrict__ g, bf16* __restrict__ out, size_t n8) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n8; i += size_t(gridDim.x) * blockDim.x) {
    uint4 v = reinterpret_cast<const uint4*>(h)[i], w = reinterpret_cast<const uint4*>(g)[i];
    __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(&v);
    __nv_bfloat162* q = reinterpret_cast<__nv_bfloat162*>(&w);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float a = __low2float(p[k]), b = __high2float(p[k]);
      float ga = __low2float(q[k]) * fmaf(a, normal_density_16bit(a), normal_cdf_16bit(a));
      float gb = __high2float(q[k]) * fmaf(b, normal_density_16bit(b), normal_cdf_16bit(b));
      q[k] = __floats2bfloat162_rn(ga, gb);
    }
    reinterpret_cast<uint4*>(out)[i] = w;
  }
}
__global__ void gelu_and_derivative_pass(const bf16* __restrict__ h, bf16* __restrict__ g, bf16* __restrict__ d, size_t n8) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n8; i += size_t(gridDim.x) * blockDim.x) {
    uint4 v = reinterpret_cast<const uint4*>(h)[i], gv, dv;
    __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(&v);
    __nv_bfloat162* gp = reinterpret_cast<__nv_bfloat162*>(&gv);
    __nv_bfloat162* dp = reinterpret_cast<__nv_bfloat162*>(&dv);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float a = __low2float(p[k]), b = __high2float(p[k]);
      float ca = normal_cdf_16bit(a), cb = normal_cdf_16bit(b);
      gp[k] = __floats2bfloat162_rn(a * ca, b * cb);
      dp[k] = __floats2bfloat162_rn(fmaf(a, normal_density_16bit(a), ca), fmaf(b, normal_density_16bit(b), cb));
    }
    reinterpret_cast<uint4*>(g)[i] = gv;
    reinterpret_cast<uint4*>(d)[i] = dv;
  }
}
__global__ void gelu_pass(const bf16* __restrict__ h, bf16* __restrict__ g, size_t n8) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n8; i += size_t(gridDim.x) * blockDim.x) {
    uint4 v = reinterpret_cast<const uint4*>(h)[i];
    __nv_bfloat162* p = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float a = __low2float(p[k]), b = __high2float(p[k]);
      p[k] = __floats2bfloat162_rn(a * normal_cdf_16bit(a), b * normal_cdf_16bit(b));
    }
    reinterpret_cast<uint4*>(g)[i] = v;
  }
}
__global__ void gelu_and_derivative_f32(const float* __restrict__ c, bf16* __restrict__ g, bf16* __restrict__ d, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float x = c[i], cdf = normal_cdf_16bit(x);
    g[i] = __float2bfloat16_rn(x * cdf);
    d[i] = __float2bfloat16_rn(fmaf(x, normal_density_16bit(x), cdf));
  }
}
// y = bf16(c * float(d)), c the float32 product
__global__ void ref_mul(const float* __restrict__ c, const bf16* __restrict__ d, bf16* __restrict__ y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16_rn(c[i] * __bfloat162float(d[i]));
}

template <class F>
float time_us(F&& f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < 20; ++i) f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000 / 20);
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

// ---- cuDNN graph pieces ----
struct Keep {
  std::vector<cudnnBackendDescriptor_t> v;
  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d; CD(cudnnBackendCreateDescriptor(type, &d)); v.push_back(d); return d;
  }
  ~Keep() { for (auto it = v.rbegin(); it != v.rend(); ++it) cudnnBackendDestroyDescriptor(*it); }
};

cudnnBackendDescriptor_t tensor(Keep& k, int64_t id, cudnnDataType_t type, int64_t r, int64_t c, bool is_virtual,
                                bool col_major = false) {
  cudnnBackendDescriptor_t d = k.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  int64_t dims[3] = {1, r, c}, strides[3] = {r * c, c, 1}, align = 16;
  if (col_major) strides[1] = 1, strides[2] = r;
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, dims));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, strides));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  bool v = is_virtual;
  if (v) CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v));
  CD(cudnnBackendFinalize(d));
  return d;
}

cudnnBackendDescriptor_t scalar(Keep& k, int64_t id) {
  cudnnBackendDescriptor_t d = k.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int64_t dims[3] = {1, 1, 1}, strides[3] = {1, 1, 1}, align = 16;
  bool t = true;
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, dims));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, strides));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  CD(cudnnBackendSetAttribute(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &t));
  CD(cudnnBackendFinalize(d));
  return d;
}

cudnnBackendDescriptor_t gelu_bwd_op(Keep& k, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t dy,
                                     cudnnBackendDescriptor_t dx) {
  cudnnBackendDescriptor_t pw = k.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  cudnnPointwiseMode_t mode = CUDNN_POINTWISE_GELU_BWD;
  CD(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  CD(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f));
  CD(cudnnBackendFinalize(pw));
  cudnnBackendDescriptor_t op = k.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_DYDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dy));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_DXDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dx));
  CD(cudnnBackendFinalize(op));
  return op;
}

cudnnBackendDescriptor_t matmul_op(Keep& k, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
  cudnnBackendDescriptor_t mm = k.make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  CD(cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f));
  CD(cudnnBackendFinalize(mm));
  cudnnBackendDescriptor_t op = k.make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm));
  CD(cudnnBackendFinalize(op));
  return op;
}

cudnnBackendDescriptor_t pointwise_op(Keep& k, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                      cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t pw = k.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  CD(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  CD(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f));
  CD(cudnnBackendFinalize(pw));
  cudnnBackendDescriptor_t op = k.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  if (b) CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  float one = 1.f;
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one));
  CD(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one));
  CD(cudnnBackendFinalize(op));
  return op;
}

struct Plan { cudnnBackendDescriptor_t plan; int64_t ws; std::string name; };

// Every plan that finalizes, over heuristic modes A, B and the fallback list.
std::vector<Plan> plans_of(Keep& k, cudnnHandle_t handle, std::vector<cudnnBackendDescriptor_t> ops) {
  cudnnBackendDescriptor_t graph = k.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  CD(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.size(), ops.data()));
  CD(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  cudnnStatus_t s = cudnnBackendFinalize(graph);
  std::vector<Plan> out;
  if (s != CUDNN_STATUS_SUCCESS) { printf("  graph did not finalize: %s\n", cudnnGetErrorString(s)); return out; }
  const cudnnBackendHeurMode_t modes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK};
  const char* names[3] = {"A", "B", "fallback"};
  for (int m = 0; m < 3; ++m) {
    cudnnBackendDescriptor_t heur = k.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    CD(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
    CD(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]));
    if ((s = cudnnBackendFinalize(heur)) != CUDNN_STATUS_SUCCESS) { printf("  heuristics %s: %s\n", names[m], cudnnGetErrorString(s)); continue; }
    int64_t count = 0;
    CD(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
    std::vector<cudnnBackendDescriptor_t> cfgs;
    for (int64_t i = 0; i < count; ++i) cfgs.push_back(k.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    CD(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, cfgs.data()));
    printf("  heuristics %s: %lld configurations\n", names[m], (long long)count);
    for (int64_t i = 0; i < count; ++i) {
      cudnnBackendDescriptor_t plan = k.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      CD(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]));
      CD(cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
      if ((s = cudnnBackendFinalize(plan)) != CUDNN_STATUS_SUCCESS) { printf("    %s[%lld]: no plan (%s)\n", names[m], (long long)i, cudnnGetErrorString(s)); continue; }
      int64_t ws = 0, got = 0;
      CD(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got, &ws));
      // the engine's global index, for the record
      cudnnBackendDescriptor_t eng = k.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      int64_t eg = 0, gidx = -1;
      if (cudnnBackendGetAttribute(cfgs[i], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eg, &eng) == CUDNN_STATUS_SUCCESS)
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &eg, &gidx);
      char buf[64]; snprintf(buf, sizeof buf, "%s[%lld] engine %lld", names[m], (long long)i, (long long)gidx);
      out.push_back({plan, ws, buf});
    }
  }
  return out;
}

cudnnBackendDescriptor_t make_pack(Keep& k, std::vector<int64_t>& ids, std::vector<void*>& ptrs, void*& ws) {
  cudnnBackendDescriptor_t pack = k.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  CD(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.size(), ptrs.data()));
  CD(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, ids.size(), ids.data()));
  CD(cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws));
  CD(cudnnBackendFinalize(pack));
  return pack;
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const int M = 16384, N = 1536, K = 384;
  const size_t n = size_t(M) * N;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](bf16** p, size_t count, float scale) {
    std::vector<bf16> v(count);
    for (auto& x : v) x = __float2bfloat16(nd(rng) * scale);
    CK(cudaMalloc(p, count * 2)); CK(cudaMemcpy(*p, v.data(), count * 2, cudaMemcpyHostToDevice));
  };
  bf16 *A, *B, *H, *D, *Y, *Yref, *G;
  fill(&A, size_t(M) * K, 1.f);
  fill(&B, size_t(K) * N, 0.05f);
  fill(&H, n, 1.f);
  CK(cudaMalloc(&D, n * 2)); CK(cudaMalloc(&Y, n * 2)); CK(cudaMalloc(&Yref, n * 2)); CK(cudaMalloc(&G, n * 2));
  float* Cf; CK(cudaMalloc(&Cf, n * 4));
  gelu_and_derivative_pass<<<132 * 8, 256>>>(H, G, D, n / 8);  // D = gelu'(H) in bf16
  cublasHandle_t cb; CB(cublasCreate(&cb));
  void* cws; CK(cudaMalloc(&cws, 32 << 20)); CB(cublasSetWorkspace(cb, cws, 32 << 20));
  const float one = 1, zero = 0;
  auto product = [&](void* out, cudaDataType_t type) {  // out [M, N] = A [M, K] B [K, N], row-major
    CB(cublasGemmEx(cb, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16BF, N, A, CUDA_R_16BF, K, &zero, out,
                    type, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  const double flop = 2.0 * M * N * K;
  float t_prod = time_us([&] { product(Y, CUDA_R_16BF); });
  float t_mul = time_us([&] { mul_pass<<<132 * 8, 256>>>(H, Y, n / 8); });
  float t_dgelu = time_us([&] { dgelu_pass<<<132 * 8, 256>>>(H, Y, G, n / 8); });
  float t_gd = time_us([&] { gelu_and_derivative_pass<<<132 * 8, 256>>>(H, G, Y, n / 8); });
  float t_g = time_us([&] { gelu_pass<<<132 * 8, 256>>>(H, G, n / 8); });
  printf("cuBLAS product %.2f us (%.0f TF/s); passes: multiply %.2f, GELU derivative %.2f, GELU %.2f, GELU and derivative %.2f\n",
         t_prod, flop / t_prod * 1e-6, t_mul, t_dgelu, t_g, t_gd);
  printf("unfused: product + multiply %.2f, product + derivative %.2f\n", t_prod + t_mul, t_prod + t_dgelu);
  product(Cf, CUDA_R_32F);
  ref_mul<<<132 * 8, 256>>>(Cf, D, Yref, n);
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> ref(n), got(n);
  CK(cudaMemcpy(ref.data(), Yref, n * 2, cudaMemcpyDeviceToHost));

  float c_one = 1.f, c_sqrt_half = float(kSqrtHalf), c_half = 0.5f, c_mhalf = -0.5f, c_invsqrt2pi = float(kInvSqrt2Pi);
  cudnnHandle_t dh; CD(cudnnCreate(&dh));
  printf("cuDNN %zu\n", cudnnGetVersion());
  void* dws; CK(cudaMalloc(&dws, 256 << 20));
  // references for the forward's two outputs, from the float32 product
  std::vector<uint16_t> refg(n), refd(n);
  {
    gelu_and_derivative_f32<<<132 * 8, 256>>>(Cf, G, Yref, n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(refg.data(), G, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(refd.data(), Yref, n * 2, cudaMemcpyDeviceToHost));
  }
  bf16* Y2; CK(cudaMalloc(&Y2, n * 2));
  auto count_diff = [&](const bf16* dev, const std::vector<uint16_t>& r, long long& diff, long long& big) {
    CK(cudaMemcpy(got.data(), dev, n * 2, cudaMemcpyDeviceToHost));
    diff = big = 0;
    for (size_t i = 0; i < n; ++i) {
      if (got[i] == r[i]) continue;
      ++diff;
      int a = got[i] & 0x8000 ? -(got[i] & 0x7fff) : got[i], b = r[i] & 0x8000 ? -(r[i] & 0x7fff) : r[i];
      if (std::abs(a - b) > 1) ++big;
    }
  };
  const char* gsel = getenv("GRAPHS");
  const bool bt = getenv("BT") != nullptr;  // B stored as [N, K] (a Linear's weight read transposed)
  if (bt) printf("B stored [N, K]: the values differ from the references, which read it [K, N]\n");
  for (int graph = 0; graph < 5; ++graph) {
    if (gsel && !strchr(gsel, '0' + graph)) continue;
    Keep k;
    auto ta = tensor(k, 1, CUDNN_DATA_BFLOAT16, M, K, false);
    auto tb = tensor(k, 2, CUDNN_DATA_BFLOAT16, K, N, false, bt);
    auto ty = tensor(k, 4, CUDNN_DATA_BFLOAT16, M, N, false);
    std::vector<cudnnBackendDescriptor_t> ops;
    std::vector<int64_t> ids = {1, 2, 4};
    std::vector<void*> ptrs = {A, B, Y};
    const char* what = "";
    if (graph == 0) {
      what = "product alone";
      ops.push_back(matmul_op(k, ta, tb, ty));
    } else if (graph == 1) {
      what = "product x D";
      auto tc = tensor(k, 100, CUDNN_DATA_FLOAT, M, N, true);
      auto td = tensor(k, 3, CUDNN_DATA_BFLOAT16, M, N, false);
      ops.push_back(matmul_op(k, ta, tb, tc));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_MUL, tc, td, ty));
      ids.push_back(3); ptrs.push_back(D);
    } else if (graph == 2) {
      what = "GELU of the product (output only)";
      auto tc = tensor(k, 100, CUDNN_DATA_FLOAT, M, N, true);
      ops.push_back(matmul_op(k, ta, tb, tc));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_GELU_FWD, tc, nullptr, ty));
    } else if (graph == 3) {
      what = "GELU and its derivative of the product (GELU_FWD, GELU_BWD with dy = 1)";
      auto tc = tensor(k, 100, CUDNN_DATA_FLOAT, M, N, true);
      auto td = tensor(k, 5, CUDNN_DATA_BFLOAT16, M, N, false);
      auto one = scalar(k, 50);
      ops.push_back(matmul_op(k, ta, tb, tc));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_GELU_FWD, tc, nullptr, ty));
      ops.push_back(gelu_bwd_op(k, tc, one, td));
      ids.push_back(5); ptrs.push_back(Y2);
      ids.push_back(50); ptrs.push_back(&c_one);
    } else {
      what = "GELU and its derivative of the product (erf, exp, products and sums)";
      auto tc = tensor(k, 100, CUDNN_DATA_FLOAT, M, N, true);
      auto td = tensor(k, 5, CUDNN_DATA_BFLOAT16, M, N, false);
      int64_t v = 200;
      auto virt = [&] { return tensor(k, v++, CUDNN_DATA_FLOAT, M, N, true); };
      auto c_sh = scalar(k, 51), c_1 = scalar(k, 50), c_h = scalar(k, 52), c_mh = scalar(k, 53), c_ip = scalar(k, 54);
      ops.push_back(matmul_op(k, ta, tb, tc));
      auto s1 = virt(), e = virt(), e1 = virt(), cdf = virt(), sq = virt(), ex = virt(), ex2 = virt(), den = virt(), xd = virt();
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_MUL, tc, c_sh, s1));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_ERF, s1, nullptr, e));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_ADD, e, c_1, e1));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_MUL, e1, c_h, cdf));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_MUL, tc, cdf, ty));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_MUL, tc, tc, sq));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_MUL, sq, c_mh, ex));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_EXP, ex, nullptr, ex2));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_MUL, ex2, c_ip, den));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_MUL, tc, den, xd));
      ops.push_back(pointwise_op(k, CUDNN_POINTWISE_ADD, cdf, xd, td));
      ids.push_back(5); ptrs.push_back(Y2);
      for (auto [id, p] : {std::pair<int64_t, float*>{50, &c_one}, {51, &c_sqrt_half}, {52, &c_half}, {53, &c_mhalf}, {54, &c_invsqrt2pi}}) {
        ids.push_back(id); ptrs.push_back(p);
      }
    }
    printf("graph: %s\n", what);
    std::vector<Plan> plans = plans_of(k, dh, ops);
    for (const Plan& p : plans) {
      if (p.ws > (256 << 20)) { printf("    %s: workspace %lld too large\n", p.name.c_str(), (long long)p.ws); continue; }
      CK(cudaMemset(Y, 0, n * 2));
      Keep pk;
      cudnnBackendDescriptor_t pack = make_pack(pk, ids, ptrs, dws);
      cudnnStatus_t st = cudnnBackendExecute(dh, p.plan, pack);
      if (st != CUDNN_STATUS_SUCCESS) { printf("    %s: execute %s\n", p.name.c_str(), cudnnGetErrorString(st)); continue; }
      cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) { printf("    %s: %s\n", p.name.c_str(), cudaGetErrorString(e)); exit(1); }
      long long diff = -1, big = 0;
      long long diff2 = -1, big2 = 0;
      if (graph == 1) count_diff(Y, ref, diff, big);
      if (graph >= 2) count_diff(Y, refg, diff, big);
      if (graph >= 3) count_diff(Y2, refd, diff2, big2);
      float t = time_us([&] { CD(cudnnBackendExecute(dh, p.plan, pack)); });
      printf("    %s: %.2f us (workspace %lld B)", p.name.c_str(), t, (long long)p.ws);
      if (graph == 1) printf(", %lld of %zu differ from the float32 product times D (%lld by more than 1 ulp)", diff, n, big);
      if (graph >= 2) printf(", GELU: %lld differ from minidl's formula on the float32 product (%lld by more than 1 ulp)", diff, big);
      if (graph >= 3) printf(", derivative: %lld (%lld)", diff2, big2);
      printf("\n");
    }
  }
  return 0;
}
