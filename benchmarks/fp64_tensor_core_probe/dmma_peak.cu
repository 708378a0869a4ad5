// Peak of FP64 tensor-core mma.sync on sm_90 (m16n8k16 and m8n8k4) and of FP32 FFMA.
#include <cstdio>
#include <cuda_runtime.h>
template <int ITERS>
__global__ void dmma16(double* out, double seed) {
  double a[8], b[4], c[4][4];
  for (int i = 0; i < 8; ++i) a[i] = seed + threadIdx.x * 1e-3 + i;
  for (int i = 0; i < 4; ++i) b[i] = seed - i;
  for (int j = 0; j < 4; ++j) for (int i = 0; i < 4; ++i) c[j][i] = 0;
  for (int it = 0; it < ITERS; ++it) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};"
                   : "+d"(c[j][0]), "+d"(c[j][1]), "+d"(c[j][2]), "+d"(c[j][3])
                   : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                     "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
  }
  double s = 0; for (int j = 0; j < 4; ++j) for (int i = 0; i < 4; ++i) s += c[j][i];
  if (s == 12345.678) out[0] = s;
}
template <int ITERS>
__global__ void dmma884(double* out, double seed) {
  double a = seed + threadIdx.x, b = seed - 1, c[4][2] = {};
  for (int it = 0; it < ITERS; ++it) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                   : "+d"(c[j][0]), "+d"(c[j][1]) : "d"(a), "d"(b));
  }
  double s = 0; for (int j = 0; j < 4; ++j) s += c[j][0] + c[j][1];
  if (s == 12345.678) out[0] = s;
}
template <int ITERS>
__global__ void ffma(float* out, float seed) {
  float c[8]; for (int j = 0; j < 8; ++j) c[j] = seed + j;
  float a = seed * threadIdx.x, b = seed + 0.5f;
  for (int it = 0; it < ITERS; ++it)
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j] = fmaf(a, c[j], b);
  float s = 0; for (int j = 0; j < 8; ++j) s += c[j];
  if (s == 12345.678f) out[0] = s;
}
int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  double* d; cudaMalloc(&d, 8);
  cudaEvent_t s, e; cudaEventCreate(&s); cudaEventCreate(&e);
  constexpr int IT = 4096;
  for (int warps : {4, 8, 16}) {
    for (int rep = 0; rep < 2; ++rep) {
      dim3 grid(sms * 4), block(32 * warps);
      cudaEventRecord(s); dmma16<IT><<<grid, block>>>(d, 1.0); cudaEventRecord(e); cudaEventSynchronize(e);
      float ms; cudaEventElapsedTime(&ms, s, e);
      double flop = 2.0 * 16 * 8 * 16 * 4.0 * IT * grid.x * warps;
      printf("m16n8k16 f64, %d warps/block x %d blocks: %.3f ms, %.1f TFLOP/s\n", warps, grid.x, ms, flop / ms / 1e9);
      cudaEventRecord(s); dmma884<IT><<<grid, block>>>(d, 1.0); cudaEventRecord(e); cudaEventSynchronize(e);
      cudaEventElapsedTime(&ms, s, e);
      flop = 2.0 * 8 * 8 * 4 * 4.0 * IT * grid.x * warps;
      printf("m8n8k4 f64,  %d warps/block: %.3f ms, %.1f TFLOP/s\n", warps, ms, flop / ms / 1e9);
      cudaEventRecord(s); ffma<IT><<<grid, block>>>((float*)d, 1.0f); cudaEventRecord(e); cudaEventSynchronize(e);
      cudaEventElapsedTime(&ms, s, e);
      flop = 2.0 * 8 * IT * grid.x * 32.0 * warps;
      printf("ffma f32,    %d warps/block: %.3f ms, %.1f TFLOP/s\n", warps, ms, flop / ms / 1e9);
    }
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
