#pragma once
// DLPack (https://dmlc.github.io/dlpack/latest/): tensors shared with PyTorch, CuPy, NumPy, JAX and
// others without copying. to_dlpack lends a tensor's memory to another framework; from_dlpack wraps
// another framework's memory as a minidl tensor. Both directions follow dlpack.h: strides count
// elements, the data pointer plus byte_offset is the first element, and the deleter is called exactly
// once, by whoever holds the managed tensor when it is no longer needed.
//
// Exchanged: float32, float64, int64 and bool (kDLBool, 8 bits), one lane, on kDLCPU and kDLCUDA
// (kDLCUDAHost, pinned host memory, is imported as a CPU tensor). Autograd state does not travel:
// an imported tensor is a leaf that requires no gradient.
#include <cstdint>

#include <dlpack/dlpack.h>

#include "core/device.h"
#include "core/tensor.h"

namespace minidl {

/// Lends `tensor`'s memory, zero-copy, as a legacy DLManagedTensor (the struct inside a "dltensor"
/// PyCapsule, which torch.utils.dlpack.from_dlpack and cupy.from_dlpack take). The storage stays
/// alive, whatever happens to `tensor`, until the consumer calls the returned tensor's deleter.
/// dl_tensor.data points at the first element and byte_offset is 0, as PyTorch and CuPy export (some
/// consumers ignore byte_offset). On CUDA, minidl's queued work may still be writing: see
/// dlpack_make_stream_wait.
///   DLManagedTensor* m = to_dlpack(x);  ...  m->deleter(m);
DLManagedTensor* to_dlpack(const Tensor& tensor);
/// The same as a DLManagedTensorVersioned (DLPack 1.x, a "dltensor_versioned" capsule), with
/// version {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION} and no flags set (writable, not a copy).
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor);

/// Wraps another framework's tensor, zero-copy, as a minidl tensor with its shape, strides and
/// offset. On success minidl owns `src`: its deleter is called exactly once, when the last minidl
/// tensor using the memory (views included) is gone; on CUDA, after minidl's queued work on it has
/// finished. On failure (a dtype, device, layout or lanes minidl has no use for) it throws an Error
/// saying what was expected and found, and takes nothing: the caller still owns `src` (a Python
/// capsule left unconsumed calls the deleter itself).
///   Tensor x = from_dlpack(static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor")));
Tensor from_dlpack(DLManagedTensor* src);
/// The same for DLPack 1.x. A major version other than DLPACK_MAJOR_VERSION and read-only tensors
/// (DLPACK_FLAG_BITMASK_READ_ONLY: minidl tensors are writable) are refused.
Tensor from_dlpack(DLManagedTensorVersioned* src);

// ---- CUDA streams, as Python's __dlpack__(stream=...) protocol exchanges them ----
// DLPack's stream integers: 1 is the legacy default stream, 2 the per-thread default stream, -1 asks
// for no ordering, anything else is a cudaStream_t; 0 is ambiguous and refused.

/// The stream minidl queues `device`'s work on, as an integer. When minidl consumes, pass it to the
/// producer (`t.__dlpack__(stream=dlpack_stream(d))`) so that its writes come before minidl's reads.
int64_t dlpack_stream(Device device);
/// When minidl produces: makes `stream` (the consumer's) wait for all work minidl has queued on
/// `device` so far, without blocking the host. Call it before the consumer reads a to_dlpack result.
///   dlpack_make_stream_wait(x.device(), torch_stream);  DLManagedTensor* m = to_dlpack(x);
void dlpack_make_stream_wait(Device device, int64_t stream);

}  // namespace minidl
