#pragma once
// The CUDA side of core/dlpack.cpp: DLPack's stream integers, and the wait before imported memory
// goes back to the framework that lent it. Includes no CUDA header, so core/dlpack.cpp may include it.
#include <cstdint>

namespace minidl::cuda {

/// Device `index`'s compute stream as DLPack's integer.
int64_t dlpack_compute_stream(int index);
/// Makes DLPack stream `stream` (1, 2 or a cudaStream_t; not 0 or -1) wait for the work queued on
/// device `index`'s compute stream so far.
void dlpack_stream_wait(int index, int64_t stream);
/// Waits until the work queued on device `index`'s compute stream has finished, so that memory
/// kernels may still be using is not handed back to its owner. Never throws (it runs in a destructor).
void finish_before_release(int index) noexcept;

}  // namespace minidl::cuda
