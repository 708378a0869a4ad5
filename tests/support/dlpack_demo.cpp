// minidl_dlpack_demo: a C ABI over core/dlpack.h for scripts/dlpack_interop.py, which loads it with
// ctypes and exchanges tensors with PyTorch, CuPy and NumPy through "dltensor" PyCapsules. No Python
// headers: the one function that needs Python's C API (the capsule destructor) finds it in the
// running interpreter.
//
// Errors: functions returning a pointer return NULL, those returning int return -1, and
// minidl_dlpack_demo_error() says why. Counters: minidl_dlpack_demo_counter("exports_made" |
// "exports_deleted" | "imports" | "imports_released") count what went out, what consumers gave back,
// what came in, and how often minidl called a producer's deleter.
#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>

#include "minidl.h"

using namespace minidl;

namespace {

thread_local std::string last_error;
std::atomic<int64_t> exports_made{0}, exports_deleted{0}, imports{0}, imports_released{0};

// Deleters this library put itself in front of, to count their calls, by managed tensor.
std::mutex wrapped_mutex;
std::map<void*, std::function<void()>> wrapped;

template <class Managed>
void wrap_deleter(Managed* m, std::atomic<int64_t>& counter) {
  void (*original)(Managed*) = m->deleter;
  std::lock_guard lock(wrapped_mutex);
  wrapped[m] = [m, original, &counter] {
    ++counter;
    if (original) original(m);
  };
  m->deleter = [](Managed* self) {
    std::function<void()> call;
    {
      std::lock_guard lock(wrapped_mutex);
      auto it = wrapped.find(self);
      call = std::move(it->second);
      wrapped.erase(it);
    }
    call();
  };
}

template <class Managed>
void unwrap_deleter(Managed* m, void (*original)(Managed*)) {
  std::lock_guard lock(wrapped_mutex);
  wrapped.erase(m);
  m->deleter = original;
}

template <class Managed>
void* import_counted(Managed* m) {
  MINIDL_CHECK(m != nullptr, "import: expected a managed tensor, got NULL");
  void (*original)(Managed*) = m->deleter;
  wrap_deleter(m, imports_released);
  try {
    Tensor t = from_dlpack(m);
    ++imports;
    return new Tensor(std::move(t));
  } catch (...) {
    unwrap_deleter(m, original);  // refused: the producer keeps it, with its own deleter
    throw;
  }
}

template <class Fn>
auto guarded(Fn&& fn, decltype(fn()) on_error) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    last_error = e.what();
    return on_error;
  }
}

DType parse_dtype(const std::string& name) {
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kInt8, kUInt8, kBool})
    if (name == dtype_name(d)) return d;
  MINIDL_FAIL("dtype: expected float32, float64, bfloat16, float16, int64, int32, int8, uint8 or bool, got '", name,
              "'");
}

Tensor& handle(void* h) {
  MINIDL_CHECK(h != nullptr, "expected a tensor handle, got NULL");
  return *static_cast<Tensor*>(h);
}

}  // namespace

extern "C" {

const char* minidl_dlpack_demo_error() { return last_error.c_str(); }

int64_t minidl_dlpack_demo_counter(const char* name) {
  const std::string n = name ? name : "";
  if (n == "exports_made") return exports_made;
  if (n == "exports_deleted") return exports_deleted;
  if (n == "imports") return imports;
  if (n == "imports_released") return imports_released;
  last_error = "counter: expected exports_made, exports_deleted, imports or imports_released, got '" + n + "'";
  return -1;
}

/// A minidl tensor on `device` ("cpu", "cuda:0") holding arange(rows * cols) in `dtype` (for bool:
/// arange > (n - 1) / 2) as [rows, cols]; `view` 1 lends the non-contiguous [:, 1::2], 2 the transpose.
/// Returns its DLManagedTensor (or DLManagedTensorVersioned when `versioned`) and the first
/// element's address in *data. The minidl tensor itself is gone when this returns: only the
/// consumer keeps the memory alive. On CUDA the kernels that fill it may still be queued: order the
/// consumer's stream after them with minidl_dlpack_demo_make_stream_wait.
void* minidl_dlpack_demo_arange(const char* device, const char* dtype, int64_t rows, int64_t cols, int view,
                                int versioned, void** data) {
  return guarded(
      [&]() -> void* {
        const Device d{std::string(device)};
        const DType type = parse_dtype(dtype);
        Tensor base = type == kBool ? gt(arange(static_cast<double>(rows * cols), kFloat32, d), (rows * cols - 1) / 2.0)
                                    : arange(static_cast<double>(rows * cols), type, d);
        base = base.view({rows, cols});
        Tensor t = view == 1 ? base.slice(1, 1, cols, 2) : view == 2 ? base.t() : base;
        *data = t.raw_data();
        if (versioned) {
          DLManagedTensorVersioned* m = to_dlpack_versioned(t);
          wrap_deleter(m, exports_deleted);
          ++exports_made;
          return m;
        }
        DLManagedTensor* m = to_dlpack(t);
        wrap_deleter(m, exports_deleted);
        ++exports_made;
        return m;
      },
      nullptr);
}

/// Takes a producer's DLManagedTensor (DLManagedTensorVersioned when `versioned`) with from_dlpack;
/// returns a handle to the minidl tensor. On failure the producer keeps it (the capsule stays unused).
void* minidl_dlpack_demo_import(void* managed, int versioned) {
  return guarded(
      [&] {
        return versioned ? import_counted(static_cast<DLManagedTensorVersioned*>(managed))
                         : import_counted(static_cast<DLManagedTensor*>(managed));
      },
      static_cast<void*>(nullptr));
}

void minidl_dlpack_demo_free(void* h) { delete static_cast<Tensor*>(h); }

/// The first element's address, as minidl sees it.
void* minidl_dlpack_demo_data(void* h) {
  return guarded([&] { return handle(h).raw_data(); }, static_cast<void*>(nullptr));
}

/// ndim; fills shape and strides (elements) up to max_ndim entries.
int minidl_dlpack_demo_layout(void* h, int64_t* shape, int64_t* strides, int max_ndim) {
  return guarded(
      [&] {
        const Tensor& t = handle(h);
        for (int64_t i = 0; i < t.dim() && i < max_ndim; ++i) {
          shape[i] = t.shape()[static_cast<size_t>(i)];
          strides[i] = t.strides()[static_cast<size_t>(i)];
        }
        return static_cast<int>(t.dim());
      },
      -1);
}

/// "float32 cuda:0": the dtype and device minidl gave the tensor.
const char* minidl_dlpack_demo_describe(void* h) {
  static thread_local std::string text;
  return guarded(
      [&] {
        text = std::string(dtype_name(handle(h).dtype())) + " " + handle(h).device().str();
        return text.c_str();
      },
      static_cast<const char*>(nullptr));
}

/// The sum of the elements, computed by minidl's kernels (bool counts the true ones); NaN on error.
double minidl_dlpack_demo_sum(void* h) {
  return guarded([&] { return handle(h).sum().item<double>(); }, std::numeric_limits<double>::quiet_NaN());
}

/// Adds `value` to every element in place, then orders `consumer_stream` (DLPack's integers; ignored
/// on the CPU) after it, so that the producer sees the write: zero-copy in the other direction.
int minidl_dlpack_demo_add_(void* h, double value, int64_t consumer_stream) {
  return guarded(
      [&] {
        Tensor& t = handle(h);
        NoGradGuard no_grad;
        // The C interface carries a double: a whole number for an integral tensor is the integer
        // it spells (Python's 1 arrives as 1.0); anything else promotes, and an integral tensor
        // refuses it, as PyTorch's add_ does.
        if (!is_floating(t.dtype()) && value == std::trunc(value)) t += static_cast<int64_t>(value);
        else t += value;
        dlpack_make_stream_wait(t.device(), consumer_stream);
        return 0;
      },
      -1);
}

/// minidl's stream for `device`, to pass to a producer's __dlpack__(stream=...); 0 on error.
int64_t minidl_dlpack_demo_stream(const char* device) {
  return guarded([&] { return dlpack_stream(Device(std::string(device))); }, int64_t{0});
}

/// Orders `stream` after the work minidl queued on `device` (the producer side of __dlpack__).
int minidl_dlpack_demo_make_stream_wait(const char* device, int64_t stream) {
  return guarded(
      [&] {
        dlpack_make_stream_wait(Device(std::string(device)), stream);
        return 0;
      },
      -1);
}

/// Bytes minidl's allocator for `device` hands out now.
int64_t minidl_dlpack_demo_bytes_in_use(const char* device) {
  return guarded([&] { return static_cast<int64_t>(memory_stats(Device(std::string(device))).bytes_in_use); },
                 int64_t{-1});
}

/// Capsule names that outlive every capsule: 0 "dltensor", 1 "dltensor_versioned", 2 "used_dltensor",
/// 3 "used_dltensor_versioned".
const char* minidl_dlpack_demo_capsule_name(int which) {
  static const char* const names[] = {"dltensor", "dltensor_versioned", "used_dltensor", "used_dltensor_versioned"};
  return which >= 0 && which < 4 ? names[which] : nullptr;
}

/// The PyCapsule_Destructor for capsules made from minidl_dlpack_demo_arange: a capsule that no
/// consumer renamed to "used_..." still owns its tensor, so the deleter runs here. Called by Python
/// with the GIL held; Python's C API comes from the interpreter this library was loaded into.
void minidl_dlpack_demo_capsule_destructor(void* capsule) {
  using IsValid = int (*)(void*, const char*);
  using GetPointer = void* (*)(void*, const char*);
  static const auto is_valid = reinterpret_cast<IsValid>(dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
  static const auto get_pointer = reinterpret_cast<GetPointer>(dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
  if (!is_valid || !get_pointer) return;
  if (is_valid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(get_pointer(capsule, "dltensor"));
    if (m->deleter) m->deleter(m);
  } else if (is_valid(capsule, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(get_pointer(capsule, "dltensor_versioned"));
    if (m->deleter) m->deleter(m);
  }
}

}  // extern "C"
