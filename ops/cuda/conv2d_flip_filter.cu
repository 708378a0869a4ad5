// conv2d's filter for its input gradient as a forward convolution (ops/cuda/cudnn.cpp, run_backward):
// at stride 1, dX = dY convolved with the filter turned half a turn in space and its two channel
// axes swapped, padded by dilation * (kernel - 1) - pad. cuDNN's forward kernels ran that product
// in about half the time of its input-gradient kernels at the MNIST CNN's second convolution in
// TF32 (docs/benchmarks.md), so the autotuner times both (cudnn_autotune.cpp, choose_data_path).
#include "ops/cuda/common.cuh"

namespace minidl {

namespace {

using namespace cuda;

// flipped[c][k][r][s] = weight[k][c][R-1-r][S-1-s]; thread e makes the e-th element of flipped's
// storage, [C][K][R][S] or channels-last [C][R][S][K], reading weight through its strides.
template <class T>
__global__ void conv2d_flip_filter_kernel(const T* __restrict__ weight, T* __restrict__ flipped, int out_channels,
                                          int channels, int kh, int kw, int64_t s0, int64_t s1, int64_t s2, int64_t s3,
                                          bool channels_last, int total) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= total) return;
  int c, k, r, s;
  if (channels_last) {
    k = e % out_channels;
    const int rest = e / out_channels;
    s = rest % kw, r = rest / kw % kh, c = rest / (kw * kh);
  } else {
    s = e % kw;
    const int rest = e / kw;
    r = rest % kh, k = rest / kh % out_channels, c = rest / (kh * out_channels);
  }
  flipped[e] = weight[k * s0 + c * s1 + (kh - 1 - r) * s2 + (kw - 1 - s) * s3];
}

}  // namespace

void CudaKernels::conv2d_flip_filter(const Tensor& weight, Tensor& flipped) {
  MINIDL_CHECK(weight.dim() == 4 && flipped.dim() == 4 && flipped.size(0) == weight.size(1) &&
                   flipped.size(1) == weight.size(0) && flipped.size(2) == weight.size(2) &&
                   flipped.size(3) == weight.size(3) && flipped.dtype() == weight.dtype(),
               "conv2d_flip_filter: expected flipped [C, K, R, S] of weight [K, C, R, S]'s dtype, got ",
               flipped.shape(), " for ", weight.shape());
  const bool channels_last = !flipped.is_contiguous() && flipped.is_contiguous(MemoryFormat::ChannelsLast);
  MINIDL_CHECK(flipped.is_contiguous() || channels_last,
               "conv2d_flip_filter: expected flipped contiguous or channels-last");
  MINIDL_CHECK(weight.numel() < (int64_t{1} << 31), "conv2d_flip_filter: ", weight.numel(),
               " elements exceed the kernel's 32-bit index");
  if (weight.numel() == 0) return;
  cuda::DeviceGuard guard(device_);
  const int total = static_cast<int>(weight.numel());
  dispatch_floating_and_half(weight.dtype(), "conv2d_flip_filter", [&](auto tag) {
    using T = decltype(tag);
    conv2d_flip_filter_kernel<T><<<blocks_for(total), kThreads, 0, stream_>>>(
        ptr<const T>(weight), ptr<T>(flipped), static_cast<int>(weight.size(0)), static_cast<int>(weight.size(1)),
        static_cast<int>(weight.size(2)), static_cast<int>(weight.size(3)), weight.stride(0), weight.stride(1),
        weight.stride(2), weight.stride(3), channels_last, total);
    CUDA_LAUNCH_CHECK(conv2d_flip_filter_kernel);
  });
}

}  // namespace minidl
