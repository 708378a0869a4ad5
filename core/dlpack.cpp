// DLPack export and import. An export is one heap block holding the managed struct, a reference to
// the storage and the shape and strides the struct points to; its deleter frees the block. An import
// is a Storage over the producer's memory whose release calls the producer's deleter: views share
// the Storage, so the deleter runs once, when the last of them is gone.
#include "core/dlpack.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>

#include "core/autograd.h"
#include "core/cuda.h"
#ifdef MINIDL_WITH_CUDA
#include "core/cuda/dlpack_streams.h"
#endif

namespace minidl {

namespace {

DLDataType dl_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return {kDLFloat, 32, 1};
    case DType::Float64: return {kDLFloat, 64, 1};
    case DType::Int64: return {kDLInt, 64, 1};
    case DType::Int32: return {kDLInt, 32, 1};
    case DType::Int8: return {kDLInt, 8, 1};
    case DType::UInt8: return {kDLUInt, 8, 1};
    case DType::Bool: return {kDLBool, 8, 1};  // one byte per element, as dlpack.h says of bool
    case DType::BFloat16: return {kDLBfloat, 16, 1};
    case DType::Float16: return {kDLFloat, 16, 1};
  }
  MINIDL_FAIL("to_dlpack: dtype ", dtype, " has no DLPack code");
}

// The producer's dtype as PyTorch and NumPy name it, so that the error says what was made.
std::string dl_dtype_name(DLDataType t) {
  static constexpr std::array<const char*, 11> kSmallFloats = {
      "float8_e3m4",     "float8_e4m3",    "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
      "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn",      "float6_e3m2fn", "float4_e2m1fn"};
  const std::string bits = std::to_string(t.bits);
  std::string name;
  switch (t.code) {
    case kDLInt: name = "int" + bits; break;
    case kDLUInt: name = "uint" + bits; break;
    case kDLFloat: name = "float" + bits; break;
    case kDLBfloat: name = "bfloat" + bits; break;
    case kDLComplex: name = "complex" + bits; break;
    case kDLBool: name = t.bits == 8 ? "bool" : "bool of " + bits + " bits"; break;
    case kDLOpaqueHandle: name = "opaque handle of " + bits + " bits"; break;
    default:
      if (t.code >= kDLFloat8_e3m4 && t.code <= kDLFloat4_e2m1fn) {
        name = kSmallFloats[t.code - kDLFloat8_e3m4];
      } else {
        name = "type code " + std::to_string(t.code) + " of " + bits + " bits";
      }
  }
  if (t.lanes != 1) name += " x " + std::to_string(t.lanes) + " lanes";
  return name;
}

DType minidl_dtype(DLDataType t, const char* what) {
  MINIDL_CHECK(t.lanes == 1, what, ": expected one lane per element, got ", dl_dtype_name(t),
               " (a vector type; minidl has none)");
  if (t.code == kDLFloat && t.bits == 32) return DType::Float32;
  if (t.code == kDLFloat && t.bits == 64) return DType::Float64;
  if (t.code == kDLInt && t.bits == 64) return DType::Int64;
  if (t.code == kDLInt && t.bits == 32) return DType::Int32;
  if (t.code == kDLInt && t.bits == 8) return DType::Int8;
  if (t.code == kDLUInt && t.bits == 8) return DType::UInt8;
  if (t.code == kDLBool && t.bits == 8) return DType::Bool;
  if (t.code == kDLBfloat && t.bits == 16) return DType::BFloat16;
  if (t.code == kDLFloat && t.bits == 16) return DType::Float16;
  MINIDL_FAIL(what, ": expected float32, float64, bfloat16, float16, int64, int32, int8, uint8 or bool, got ", dl_dtype_name(t),
              " (convert it first, e.g. torch: t.to(torch.float32) or t.long())");
}

std::string dl_device_name(DLDevice d) {
  static constexpr std::array<const char*, 18> kNames = {
      nullptr,     "kDLCPU",   "kDLCUDA", "kDLCUDAHost", "kDLOpenCL",   nullptr,         nullptr,
      "kDLVulkan", "kDLMetal", "kDLVPI",  "kDLROCM",     "kDLROCMHost", "kDLExtDev",     "kDLCUDAManaged",
      "kDLOneAPI", "kDLWebGPU", "kDLHexagon", "kDLMAIA"};
  const auto type = static_cast<int64_t>(d.device_type);
  const char* name = type >= 0 && type < static_cast<int64_t>(kNames.size()) ? kNames[type] : nullptr;
  return (name ? std::string(name) : "device type " + std::to_string(type)) + " (id " + std::to_string(d.device_id) +
         ")";
}

Device minidl_device(DLDevice d, const char* what) {
  // Pinned host memory (kDLCUDAHost) is host memory that the CPU kernels may read and write.
  if (d.device_type == kDLCPU || d.device_type == kDLCUDAHost) return Device::cpu();
  MINIDL_CHECK(d.device_type == kDLCUDA, what, ": expected a tensor on kDLCPU, kDLCUDAHost or kDLCUDA, got one on ",
               dl_device_name(d));
  MINIDL_CHECK(cuda::is_available(), what, ": the tensor is on kDLCUDA device ", d.device_id,
               ", but CUDA is not usable: ", cuda::unavailable_reason());
  MINIDL_CHECK(d.device_id >= 0 && d.device_id < cuda::device_count(), what, ": the tensor is on kDLCUDA device ",
               d.device_id, ", but minidl sees ", cuda::device_count(), " CUDA device(s)");
  return Device::cuda(d.device_id);
}

DLDevice dl_device(Device device) {
  if (device.is_cuda()) return {kDLCUDA, device.index};
  return {kDLCPU, 0};
}

template <class Managed>
struct Export {
  Managed managed{};
  std::shared_ptr<Storage> storage;  // not the TensorImpl: its autograd state would live on too
  Shape shape;
  Strides strides;
};

template <class Managed>
Managed* export_tensor(const Tensor& tensor, const char* what) {
  MINIDL_CHECK(tensor.defined(), what, ": expected a defined tensor, got an undefined one");
  auto ctx = std::make_unique<Export<Managed>>();
  ctx->storage = tensor.impl().storage;
  ctx->shape = tensor.shape();
  ctx->strides = tensor.strides();
  DLTensor& dl = ctx->managed.dl_tensor;
  // The first element itself and byte_offset 0, as PyTorch, CuPy and NumPy export: some consumers
  // (PyTorch before 2.x among them) ignore byte_offset. dlpack.h asks for NULL when there is no data.
  dl.data = tensor.numel() == 0 ? nullptr : tensor.raw_data();
  dl.device = dl_device(tensor.device());
  dl.ndim = static_cast<int32_t>(tensor.dim());
  dl.dtype = dl_dtype(tensor.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = [](Managed* self) { delete static_cast<Export<Managed>*>(self->manager_ctx); };
  return &ctx.release()->managed;
}

// The element offset of the last element, or -1 for an empty tensor; throws where int64 overflows.
int64_t last_element(const Shape& shape, const Strides& strides, const char* what) {
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return -1;
    int64_t step = 0;
    MINIDL_CHECK(!__builtin_mul_overflow(shape[i] - 1, strides[i], &step) && !__builtin_add_overflow(last, step, &last),
                 what, ": shape ", shape, " with strides ", strides, " spans more elements than an int64 counts");
  }
  return last;
}

// Checks everything before building anything, so that a failure leaves `release` uncalled.
Tensor import_tensor(const DLTensor& dl, std::function<void()> release, const char* what) {
  MINIDL_CHECK(dl.ndim >= 0, what, ": expected ndim >= 0, got ", dl.ndim);
  MINIDL_CHECK(dl.ndim == 0 || dl.shape != nullptr, what, ": ndim is ", dl.ndim, " but shape is a null pointer");
  Shape shape(dl.shape, dl.shape + dl.ndim);
  for (int64_t s : shape) MINIDL_CHECK(s >= 0, what, ": expected non-negative sizes, got shape ", shape);
  const DType dtype = minidl_dtype(dl.dtype, what);
  const Device device = minidl_device(dl.device, what);
  // NULL strides: compact and row-major (allowed by dlpack.h, sent by older producers).
  Strides strides = dl.strides ? Strides(dl.strides, dl.strides + dl.ndim) : contiguous_strides(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (strides[i] >= 0) continue;
    MINIDL_CHECK(shape[i] <= 1, what, ": expected non-negative strides (minidl has no reversed views), got strides ",
                 strides, " for shape ", shape, "; make it contiguous first (e.g. numpy: np.ascontiguousarray(a))");
    strides[i] = 0;  // a dimension of size 0 or 1 never steps
  }
  const int64_t last = last_element(shape, strides, what);
  const int64_t esize = static_cast<int64_t>(element_size(dtype));
  size_t nbytes = 0;
  void* first = nullptr;
  if (last >= 0) {
    MINIDL_CHECK(dl.data != nullptr, what, ": shape ", shape, " holds elements, but data is a null pointer");
    MINIDL_CHECK(last < INT64_MAX / esize, what, ": shape ", shape, " with strides ", strides, " of ", dtype,
                 " spans more bytes than an int64 counts");
    const auto address = reinterpret_cast<uintptr_t>(dl.data) + dl.byte_offset;
    MINIDL_CHECK(address % static_cast<uintptr_t>(esize) == 0, what, ": expected the first element aligned to its ",
                 esize, "-byte ", dtype, ", got address data + byte_offset = ", reinterpret_cast<void*>(address),
                 " (byte_offset ", dl.byte_offset, ")");
    first = static_cast<char*>(dl.data) + dl.byte_offset;
    nbytes = static_cast<size_t>((last + 1) * esize);
  }

  auto impl = std::make_shared<TensorImpl>();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  impl->inference = inference_mode_enabled();
  // Last, so that nothing can throw once the Storage (and with it the duty to release) exists.
  impl->storage = std::make_shared<Storage>(first, nbytes, device, std::move(release));
  return Tensor(std::move(impl));
}

template <class Managed>
Tensor import_managed(Managed* src, const char* what) {
  auto release = [src] {
#ifdef MINIDL_WITH_CUDA
    // Kernels queued on the memory may still run; the producer may reuse it as soon as it has it back.
    const DLDevice d = src->dl_tensor.device;
    if (d.device_type == kDLCUDA) cuda::finish_before_release(d.device_id);
#endif
    if (src->deleter) src->deleter(src);
  };
  return import_tensor(src->dl_tensor, std::move(release), what);
}

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& tensor) { return export_tensor<DLManagedTensor>(tensor, "to_dlpack"); }

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor) {
  DLManagedTensorVersioned* managed = export_tensor<DLManagedTensorVersioned>(tensor, "to_dlpack_versioned");
  managed->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  managed->flags = 0;
  return managed;
}

Tensor from_dlpack(DLManagedTensor* src) {
  MINIDL_CHECK(src != nullptr, "from_dlpack: expected a DLManagedTensor, got a null pointer");
  return import_managed(src, "from_dlpack");
}

Tensor from_dlpack(DLManagedTensorVersioned* src) {
  MINIDL_CHECK(src != nullptr, "from_dlpack: expected a DLManagedTensorVersioned, got a null pointer");
  // dlpack.h: past the version, another major version may lay the struct out differently.
  MINIDL_CHECK(src->version.major == DLPACK_MAJOR_VERSION, "from_dlpack: expected DLPack major version ",
               DLPACK_MAJOR_VERSION, ", got ", src->version.major, ".", src->version.minor,
               " (ask the producer for max_version=(", DLPACK_MAJOR_VERSION, ", ", DLPACK_MINOR_VERSION, "))");
  MINIDL_CHECK(!(src->flags & DLPACK_FLAG_BITMASK_READ_ONLY),
               "from_dlpack: expected a writable tensor, got one the producer marked read-only "
               "(DLPACK_FLAG_BITMASK_READ_ONLY); minidl tensors are writable, so pass a writable copy");
  return import_managed(src, "from_dlpack");
}

int64_t dlpack_stream(Device device) {
  MINIDL_CHECK(device.is_cuda(), "dlpack_stream: expected a CUDA device, got ", device,
               " (CPU tensors are exchanged without a stream)");
#ifdef MINIDL_WITH_CUDA
  MINIDL_CHECK(cuda::is_available(), "dlpack_stream(", device, "): ", cuda::unavailable_reason());
  return cuda::dlpack_compute_stream(device.index);
#else
  MINIDL_FAIL("dlpack_stream(", device, "): ", cuda::unavailable_reason());
#endif
}

void dlpack_make_stream_wait(Device device, int64_t stream) {
  if (device.is_cpu() || stream == -1) return;  // CPU work is done when its call returns; -1 asks for nothing
  MINIDL_CHECK(stream >= 1, "dlpack_make_stream_wait: expected a DLPack stream (1, 2, a "
               "cudaStream_t, or -1), got ", stream, stream == 0 ? " (0 is ambiguous in DLPack: use 1 for the legacy "
               "default stream or 2 for the per-thread one)" : "");
#ifdef MINIDL_WITH_CUDA
  MINIDL_CHECK(cuda::is_available(), "dlpack_make_stream_wait(", device, "): ", cuda::unavailable_reason());
  cuda::dlpack_stream_wait(device.index, stream);
#else
  MINIDL_FAIL("dlpack_make_stream_wait(", device, "): ", cuda::unavailable_reason());
#endif
}

}  // namespace minidl
