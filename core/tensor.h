#pragma once
// Tensor: a cheap, shared handle to a strided view of a Storage, plus its autograd state.
// Operations on tensors live in ops/; this file knows only memory layout and gradients.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace minidl {

class Tensor;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Strides strides;     // in elements
  DType dtype = DType::Float32;

  // Autograd. A tensor made by a recorded op has `node` = the id of its tape entry; a leaf has 0.
  // The entry holds its output weakly: it is dead once this impl is destroyed.
  bool requires_grad = false;
  uint64_t node = 0;
  std::shared_ptr<TensorImpl> grad;
  bool inference = false;  // made under InferenceMode (core/autograd.h)
  // A C++ scalar written into an expression (x * 2.5): it counts below every tensor in type
  // promotion (core/type_promotion.h).
  bool wrapped_number = false;
  // Called once per backward after this leaf's gradient is fully accumulated (most leaves have none).
  std::shared_ptr<std::vector<std::function<void(Tensor&)>>> post_accumulate_grad_hooks;

  ~TensorImpl();
};

/// A handle to n-dimensional data on one device. Copying a Tensor copies the handle, not the data.
///   Tensor x = randn({64, 784});  Tensor y = relu(matmul(x, w));  y.sum().backward();
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// Uninitialized memory of `shape` on `device`; ops fill it.   `Tensor::empty({2, 3})`
  static Tensor empty(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
  /// Copies `n` elements of type T from host memory into a new tensor of `shape` on `device`.
  template <class T>
  static Tensor from_buffer(const T* data, const Shape& shape, Device device = Device::cpu());
  /// Copies a vector into a new tensor; the shape defaults to 1-D.   `Tensor::from_vector<float>({1, 2, 3})`
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape = {}, Device device = Device::cpu());
  /// A view of `storage` with the given layout; used by view ops.
  static Tensor make_view(const Tensor& base, Shape shape, Strides strides, int64_t offset);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  /// Size of dimension `d`; negative counts from the end.
  int64_t size(int64_t d) const;
  int64_t numel() const { return shape_numel(impl().shape); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_contiguous() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype()); }

  /// Pointer to the first element (device memory for CUDA tensors). Checks that T matches the dtype.
  template <class T>
  T* data() const;
  void* raw_data() const;
  /// The value of a one-element tensor, copied to the host (a device sync for CUDA tensors).
  template <class T>
  T item() const;
  /// All elements in row-major order, copied to the host.
  template <class T>
  std::vector<T> to_vector() const;

  // Autograd.
  bool requires_grad() const { return impl().requires_grad; }
  /// Marks a leaf as wanting a gradient.   `Tensor w = randn({3, 3}).requires_grad_();`
  Tensor& requires_grad_(bool requires_grad = true);
  /// The accumulated gradient of a leaf; undefined until a backward reaches it.
  Tensor grad() const { return Tensor(impl().grad); }
  void set_grad(const Tensor& grad);
  /// Calls `hook(leaf)` in every backward that reaches this leaf, once its .grad holds everything
  /// that backward adds to it (PyTorch's register_post_accumulate_grad_hook); for leaves that require
  /// grad. DistributedDataParallel starts a bucket's all-reduce from it while backward goes on.
  ///   w.register_post_accumulate_grad_hook([](Tensor& p) { clip(p.grad()); });
  void register_post_accumulate_grad_hook(std::function<void(Tensor&)> hook);
  bool is_leaf() const { return impl().node == 0; }
  /// Made under InferenceMode: no recorded op takes it as an input.
  bool is_inference() const { return impl().inference; }
  /// A 0-d tensor that stands for a C++ scalar in type promotion (scalar_tensor in ops/creation.h).
  bool is_wrapped_number() const { return impl().wrapped_number; }
  /// The number of in-place writes to this tensor's memory so far, through it, a view of it or a
  /// detached alias (PyTorch's _version). Backward refuses a saved tensor whose version moved on.
  uint64_t _version() const { return impl().storage->version(); }
  /// Counts one in-place write; every in-place op calls it after writing (ops/, optim/).
  void bump_version() const { impl().storage->bump_version(); }
  /// Walks the tape back from this tensor. Without `gradient`, the tensor must hold one element.
  /// The tape entries walked are released unless `retain_graph`.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  /// Same data, no history, no gradient.
  Tensor detach() const;

  // Layout and device changes; each is a differentiable op defined in ops/.
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor squeeze(int64_t dim) const;
  /// Removes every dimension of size 1.
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;
  /// The view of every `step`-th element of [start, end) along `dim` (ops/slice.h).
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
               int64_t step = 1) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor sum() const;
  Tensor mean() const;
  /// Sets every element to 0 in place (any layout); not recorded (ops/elementwise.h).
  Tensor& zero_();

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// Prints shape, dtype, device and values (summarized past 1000 elements), like PyTorch.
std::ostream& operator<<(std::ostream& os, const Tensor& tensor);

// ---- template definitions ----

template <class T>
T* Tensor::data() const {
  MINIDL_CHECK(dtype() == dtype_of<T>(), "data<", dtype_name(dtype_of<T>()), ">(): tensor has dtype ", dtype());
  return static_cast<T*>(raw_data());
}

template <class T>
Tensor Tensor::from_buffer(const T* data, const Shape& shape, Device device) {
  Tensor t = empty(shape, dtype_of<T>(), device);
  copy_bytes(t.raw_data(), device, data, Device::cpu(), t.nbytes());
  return t;
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape, Device device) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  MINIDL_CHECK(shape_numel(shape) == static_cast<int64_t>(values.size()), "from_vector: shape ", shape,
               " holds ", shape_numel(shape), " elements, but ", values.size(), " values were given");
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits: unpack to one byte each
    std::unique_ptr<bool[]> bytes(new bool[values.size()]);
    for (size_t i = 0; i < values.size(); ++i) bytes[i] = values[i];
    return from_buffer(bytes.get(), shape, device);
  } else {
    return from_buffer(values.data(), shape, device);
  }
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  MINIDL_CHECK(dtype() == dtype_of<T>(), "to_vector<", dtype_name(dtype_of<T>()), ">(): tensor has dtype ", dtype());
  Tensor c = detach().contiguous();  // a read, never part of a graph
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits: copy bytes, then unpack
    std::unique_ptr<bool[]> bytes(new bool[static_cast<size_t>(c.numel())]);
    copy_bytes(bytes.get(), Device::cpu(), c.raw_data(), c.device(), c.nbytes());
    return std::vector<bool>(bytes.get(), bytes.get() + c.numel());
  } else {
    std::vector<T> out(static_cast<size_t>(c.numel()));
    copy_bytes(out.data(), Device::cpu(), c.raw_data(), c.device(), c.nbytes());
    return out;
  }
}

template <class T>
T Tensor::item() const {
  MINIDL_CHECK(numel() == 1, "item(): expected a tensor with one element, got shape ", shape());
  Tensor v = dtype() == dtype_of<T>() ? *this : detach().to(dtype_of<T>());  // a read, never part of a graph
  T value;
  copy_bytes(&value, Device::cpu(), v.raw_data(), v.device(), sizeof(T));
  return value;
}

}  // namespace minidl
