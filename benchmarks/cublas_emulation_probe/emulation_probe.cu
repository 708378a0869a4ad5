// cuBLAS's float32 GEMM (FFMA) against its BF16x9 emulation and TF32, at char_gpt's and the
// MNIST MLP's shapes: status, median time of 20, and error against float64 (DGEMM) on the same data.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#define CK(x) do { auto e = (x); if (e != 0) { std::printf("%s -> %d (line %d)\n", #x, int(e), __LINE__); } } while (0)
__global__ void to_double(const float* a, double* b, size_t n) { size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; if (i < n) b[i] = a[i]; }
int main() {
  struct Shape { const char* name; int m, n, k; };
  // column-major C[m,n] = A[m,k] * B[k,n]
  Shape shapes[] = {{"GPT qkv fwd 16384x1152x384", 16384, 1152, 384}, {"GPT mlp fwd 16384x1536x384", 16384, 1536, 384},
                    {"GPT mlp proj 16384x384x1536", 16384, 384, 1536}, {"GPT mlp wgrad 1536x384x16384", 1536, 384, 16384},
                    {"MLP512 l1 fwd 512x512x784", 512, 512, 784}, {"MLP512 l1 wgrad 784x512x512", 784, 512, 512}};
  cublasHandle_t h; CK(cublasCreate(&h));
  int ver = 0; cublasGetVersion(h, &ver); std::printf("cuBLAS version %d\n", ver);
  std::mt19937 rng(1); std::normal_distribution<float> nd(0.f, 1.f);
  for (auto s : shapes) {
    size_t na = size_t(s.m) * s.k, nb = size_t(s.k) * s.n, nc = size_t(s.m) * s.n;
    std::vector<float> ha(na), hb(nb);
    for (auto& v : ha) v = nd(rng) * std::exp(nd(rng));  // a spread of magnitudes
    for (auto& v : hb) v = nd(rng);
    float *a, *b, *c; double *da, *db, *dc;
    cudaMalloc(&a, na * 4); cudaMalloc(&b, nb * 4); cudaMalloc(&c, nc * 4);
    cudaMalloc(&da, na * 8); cudaMalloc(&db, nb * 8); cudaMalloc(&dc, nc * 8);
    cudaMemcpy(a, ha.data(), na * 4, cudaMemcpyHostToDevice); cudaMemcpy(b, hb.data(), nb * 4, cudaMemcpyHostToDevice);
    to_double<<<(na + 255) / 256, 256>>>(a, da, na); to_double<<<(nb + 255) / 256, 256>>>(b, db, nb);
    double one = 1, zero = 0;
    CK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one, da, s.m, db, s.k, &zero, dc, s.m));
    std::vector<double> ref(nc); cudaMemcpy(ref.data(), dc, nc * 8, cudaMemcpyDeviceToHost);
    double scale = 0; for (double v : ref) scale = std::max(scale, std::fabs(v));
    struct Mode { const char* name; cublasComputeType_t ct; cublasEmulationStrategy_t st; };
    Mode modes[] = {{"fp32 (FFMA)", CUBLAS_COMPUTE_32F, CUBLAS_EMULATION_STRATEGY_DEFAULT},
                    {"bf16x9 eager", CUBLAS_COMPUTE_32F_EMULATED_16BFX9, CUBLAS_EMULATION_STRATEGY_EAGER},
                    {"bf16x9 performant", CUBLAS_COMPUTE_32F_EMULATED_16BFX9, CUBLAS_EMULATION_STRATEGY_PERFORMANT},
                    {"tf32", CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_EMULATION_STRATEGY_DEFAULT}};
    for (auto md : modes) {
      CK(cublasSetEmulationStrategy(h, md.st));
      float alpha = 1, beta = 0;
      auto call = [&] { return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &alpha, a, CUDA_R_32F, s.m, b, CUDA_R_32F,
                                            s.k, &beta, c, CUDA_R_32F, s.m, md.ct, CUBLAS_GEMM_DEFAULT); };
      cublasStatus_t st = call();
      cudaError_t ce = cudaDeviceSynchronize();
      if (st != CUBLAS_STATUS_SUCCESS || ce != cudaSuccess) { std::printf("%-30s %-18s status %d cuda %d\n", s.name, md.name, int(st), int(ce)); cudaGetLastError(); continue; }
      for (int w = 0; w < 5; ++w) call();
      std::vector<float> ms;
      cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
      for (int r = 0; r < 20; ++r) { cudaEventRecord(e0); call(); cudaEventRecord(e1); cudaEventSynchronize(e1); float t; cudaEventElapsedTime(&t, e0, e1); ms.push_back(t); }
      std::sort(ms.begin(), ms.end());
      std::vector<float> out(nc); cudaMemcpy(out.data(), c, nc * 4, cudaMemcpyDeviceToHost);
      double maxe = 0, sume = 0;
      for (size_t i = 0; i < nc; ++i) { double e = std::fabs(double(out[i]) - ref[i]); maxe = std::max(maxe, e); sume += e; }
      double us = ms[10] * 1e3, tflops = 2.0 * s.m * s.n * s.k / (us * 1e-6) / 1e12;
      std::printf("%-30s %-18s %9.2f us %6.1f TFLOP/s  max err %.3e  mean err %.3e (of max |C| %.3e)\n", s.name, md.name, us, tflops, maxe / scale, sume / nc / scale, scale);
    }
    CK(cublasSetEmulationStrategy(h, CUBLAS_EMULATION_STRATEGY_DEFAULT));
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(da); cudaFree(db); cudaFree(dc);
  }
  return 0;
}
