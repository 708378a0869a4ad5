#pragma once
// Tensor: a cheap, shared handle to a strided view of a Storage, plus its autograd state.
// Operations on tensors live in ops/; this file knows only memory layout and gradients.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/storage.h"
#include "core/tensor_accessor.h"
#include "core/tensor_options.h"

namespace minidl {

class Tensor;
namespace autograd {
class Node;
}
namespace indexing {
class TensorIndex;  // core/tensor_index.h
}

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
  // A leaf's gradient hooks (Tensor::register_hook; a non-leaf's live on its tape entry).
  std::shared_ptr<std::vector<std::function<Tensor(const Tensor&)>>> grad_hooks;

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
  /// The same, laid out as `format`.   `Tensor::empty({n, c, h, w}, kBFloat16, dev, MemoryFormat::ChannelsLast)`
  static Tensor empty(const Shape& shape, DType dtype, Device device, MemoryFormat format);
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
  /// Whether the elements lie packed in `format`'s order.
  bool is_contiguous(MemoryFormat format) const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * minidl::element_size(dtype()); }

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
  Tensor& requires_grad_(bool requires_grad = true) const;
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
  /// The tape entries walked are released unless `retain_graph` (default: create_graph); with
  /// `create_graph` the gradients keep their history (core/autograd.h).   `loss.backward();`
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  /// The backward node of the op that made this tensor; nullptr for a leaf.   `y.grad_fn()->name()`
  std::shared_ptr<autograd::Node> grad_fn() const;
  /// Keeps this non-leaf's gradient in .grad after backward (a leaf's is always kept).
  void retain_grad() const;
  /// True for a non-leaf after retain_grad().
  bool retains_grad() const;
  /// Calls `hook(grad)` with this tensor's gradient in every backward that computes it, before it is
  /// used; a hook returning a Tensor replaces the gradient, one returning void only looks. Returns a
  /// handle for remove_hook().   `unsigned h = x.register_hook([](Tensor g) { return g * 2; });`
  template <class F>
  unsigned register_hook(F&& hook) const {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, Tensor>>) {
      return _register_hook([h = std::forward<F>(hook)](const Tensor& g) mutable {
        h(g);
        return Tensor();
      });
    } else {
      return _register_hook(std::function<Tensor(const Tensor&)>(std::forward<F>(hook)));
    }
  }
  unsigned _register_hook(std::function<Tensor(const Tensor&)> hook) const;
  void remove_hook(unsigned handle) const;
  /// Same data, no history, no gradient.
  Tensor detach() const;

  // ---- libtorch's Tensor methods: one-line forwards to the free functions of ops/
  // (ops/tensor_methods.cpp), which hold the semantics and document them. ----

  // Metadata.
  const Shape& sizes() const { return shape(); }
  int64_t stride(int64_t d) const;
  int64_t ndimension() const { return dim(); }
  /// Bytes per element.   zeros({2}, kFloat64).element_size() == 8
  int64_t element_size() const { return static_cast<int64_t>(minidl::element_size(dtype())); }
  DType scalar_type() const { return dtype(); }
  /// dtype, device and requires_grad of this tensor, for making others like it.   zeros({3}, x.options())
  TensorOptions options() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  /// The value of a one-element tensor as a Scalar (float64, int64 or bool); a host sync on CUDA.
  ///   double loss_value = loss.item().toDouble();  std::cout << loss.item();
  Scalar item() const;
  template <class T>
  T* data_ptr() const { return data<T>(); }
  void* data_ptr() const { return raw_data(); }
  /// Element access to a CPU tensor of dtype T and N dims.   auto a = x.accessor<float, 2>(); a[0][1] = 2;
  template <class T, size_t N>
  TensorAccessor<T, N> accessor() const&;
  template <class T, size_t N>
  TensorAccessor<T, N> accessor() && = delete;  // the accessor would outlive the temporary's memory

  // Layout and device changes.
  Tensor to(Device device) const;
  Tensor to(DeviceType type) const { return to(Device(type)); }
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const;
  /// To the options' device and dtype (those set); requires_grad is not an option of to().
  Tensor to(const TensorOptions& options) const;
  /// To other's device and dtype.
  Tensor to(const Tensor& other) const;
  /// to(other), libtorch's older name.
  Tensor type_as(const Tensor& other) const;
  /// To the GPU (cuda:0 unless `index`); an error saying why where no GPU is usable.
  Tensor cuda(int index = 0) const;
  Tensor cpu() const;
  Tensor contiguous() const;
  Tensor contiguous(MemoryFormat format) const;
  Tensor clone() const;
  /// New tensors of this one's dtype and device (the options override them).   x.new_zeros({3, 4})
  Tensor new_zeros(IntArrayRef size, TensorOptions options = {}) const;
  Tensor new_ones(IntArrayRef size, TensorOptions options = {}) const;
  Tensor new_full(IntArrayRef size, const Scalar& fill_value, TensorOptions options = {}) const;
  Tensor new_empty(IntArrayRef size, TensorOptions options = {}) const;

  // Views and reshapes.
  Tensor view(IntArrayRef size) const;
  Tensor view_as(const Tensor& other) const;
  Tensor reshape(IntArrayRef shape) const;
  Tensor reshape_as(const Tensor& other) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor squeeze(int64_t dim) const;
  /// Removes every dimension of size 1.
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;
  /// The view of every `step`-th element of [start, end) along `dim` (ops/slice.h).
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
               int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// The view at `index` along `dim`, without that dim.   x.select(1, 0) is x[:, 0]
  Tensor select(int64_t dim, int64_t index) const;
  /// select(0, index): x[2] is row 2.
  Tensor operator[](int64_t index) const { return select(0, index); }
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> split_with_sizes(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> tensor_split(int64_t sections, int64_t dim = 0) const;
  std::vector<Tensor> tensor_split(const std::vector<int64_t>& indices, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  /// Diagonals (ops/diagonal.h): diagonal is a view.
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor diag(int64_t diagonal = 0) const;
  Tensor diag_embed(int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1) const;
  Tensor trace() const;
  /// Windows of `size` along `dim`, `step` apart, as a view (ops/view.h).   x.unfold(-1, 16, 8)
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  /// transpose's NumPy names.
  Tensor swapaxes(int64_t dim0, int64_t dim1) const;
  Tensor swapdims(int64_t dim0, int64_t dim1) const;
  Tensor permute(IntArrayRef dims) const;
  Tensor movedim(IntArrayRef source, IntArrayRef destination) const;
  Tensor unflatten(int64_t dim, IntArrayRef sizes) const;
  Tensor t() const { return transpose(0, 1); }
  /// In place: this tensor itself takes the view's layout (ops/view.h).   x.unsqueeze_(0)
  Tensor& t_() const;
  Tensor& transpose_(int64_t dim0, int64_t dim1) const;
  Tensor& squeeze_() const;
  Tensor& squeeze_(int64_t dim) const;
  Tensor& unsqueeze_(int64_t dim) const;
  Tensor expand(IntArrayRef size) const;
  Tensor expand_as(const Tensor& other) const;

  // Reductions.
  Tensor sum() const;
  Tensor sum(IntArrayRef dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(IntArrayRef dim, bool keepdim = false) const;
  /// In `dtype` (x converted first), as libtorch's dtype argument.   x.sum(kFloat64)
  Tensor sum(DType dtype) const;
  Tensor sum(IntArrayRef dim, bool keepdim, DType dtype) const;
  Tensor mean(DType dtype) const;
  Tensor mean(IntArrayRef dim, bool keepdim, DType dtype) const;
  Tensor var(IntArrayRef dim, bool unbiased = true, bool keepdim = false) const;
  /// Over every element, as libtorch's var(bool unbiased): x.var(false) is the biased variance (an
  /// integer, x.var(1), stays a dim).
  template <class Bool, std::enable_if_t<std::is_same_v<Bool, bool>, int> = 0>
  Tensor var(Bool unbiased) const {
    return var(IntArrayRef{}, unbiased);
  }
  /// (values, indices) of the maximum along `dim`.   auto [v, i] = x.max(1);
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  /// Without a dim, the index into the flattened tensor.   x.argmax(), logits.argmax(1)
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor amax(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor softmax(int64_t dim, DType dtype) const;
  Tensor log_softmax(int64_t dim, DType dtype) const;

  // Products.
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& mat2) const;
  Tensor bmm(const Tensor& mat2) const;
  Tensor mv(const Tensor& vec) const;
  Tensor dot(const Tensor& other) const;
  Tensor outer(const Tensor& vec2) const;
  Tensor cross(const Tensor& other, std::optional<int64_t> dim = std::nullopt) const;
  /// beta * self + alpha * (mat1 @ mat2), and the others of ops/mm.h.   bias.addmm(x, w.t())
  Tensor addmm(const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1, const Scalar& alpha = 1) const;
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1, const Scalar& alpha = 1) const;
  Tensor addbmm(const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1, const Scalar& alpha = 1) const;
  Tensor addmv(const Tensor& mat, const Tensor& vec, const Scalar& beta = 1, const Scalar& alpha = 1) const;
  Tensor addr(const Tensor& vec1, const Tensor& vec2, const Scalar& beta = 1, const Scalar& alpha = 1) const;

  // Arithmetic.
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor addcmul(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1) const;
  Tensor addcdiv(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1) const;
  Tensor lerp(const Tensor& end, const Scalar& weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  /// rounding_mode "trunc" or "floor" (none: true division).   x.div(y, "floor")
  Tensor div(const Tensor& other, std::optional<std::string_view> rounding_mode) const;
  Tensor div(const Scalar& other, std::optional<std::string_view> rounding_mode) const;
  Tensor floor_divide(const Tensor& other) const;
  Tensor floor_divide(const Scalar& other) const;
  Tensor remainder(const Tensor& other) const;
  Tensor remainder(const Scalar& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(const Scalar& exponent) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;

  // Comparisons and selection.
  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;
  /// This tensor where `condition` holds, else `other`: where(condition, *this, other).
  Tensor where(const Tensor& condition, const Tensor& other) const;
  Tensor where(const Tensor& condition, const Scalar& other) const;
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor clamp_min(const Scalar& min) const;
  Tensor clamp_max(const Scalar& max) const;
  Tensor clip(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  /// x[...] with torch::indexing's types (core/tensor_index.h; semantics in ops/indexing.h).
  ///   x.index({Slice(), 0});  x.index({mask});  x.index_put_({Slice(), idx}, 0.0);
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& value) const;
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& value) const;
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Scalar& value) const;
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Scalar& value) const;
  /// torch.index_put: a copy with `values` put at one optional index tensor per leading dim.
  ///   x.index_put({rows}, values)
  Tensor index_put(const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                   bool accumulate = false) const;

  // Math (ops/math.h, ops/logical.h).
  Tensor sin() const;
  Tensor cos() const;
  Tensor tan() const;
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor sinh() const;
  Tensor cosh() const;
  Tensor square() const;
  Tensor exp2() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor round(int64_t decimals) const;
  Tensor trunc() const;
  Tensor sign() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor log2() const;
  Tensor log10() const;
  Tensor erf() const;
  Tensor asinh() const;
  Tensor acosh() const;
  Tensor atanh() const;
  Tensor arcsinh() const;
  Tensor arccosh() const;
  Tensor arctanh() const;
  Tensor erfc() const;
  Tensor erfinv() const;
  Tensor lgamma() const;
  Tensor digamma() const;
  Tensor polygamma(int64_t n) const;
  Tensor mvlgamma(int64_t p) const;
  Tensor hypot(const Tensor& other) const;
  Tensor copysign(const Tensor& other) const;
  Tensor copysign(const Scalar& other) const;
  Tensor signbit() const;
  Tensor i0() const;
  Tensor nextafter(const Tensor& other) const;
  Tensor gcd(const Tensor& other) const;
  Tensor lcm(const Tensor& other) const;
  Tensor ldexp(const Tensor& exponent) const;
  std::tuple<Tensor, Tensor> frexp() const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor fmax(const Tensor& other) const;
  Tensor fmin(const Tensor& other) const;
  Tensor fmod(const Tensor& other) const;
  Tensor fmod(const Scalar& other) const;
  Tensor atan2(const Tensor& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor logical_not() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor nan_to_num(std::optional<double> nan = std::nullopt, std::optional<double> posinf = std::nullopt,
                    std::optional<double> neginf = std::nullopt) const;
  Tensor isposinf() const;
  Tensor isneginf() const;
  Tensor logaddexp(const Tensor& other) const;
  Tensor logaddexp2(const Tensor& other) const;
  Tensor xlogy(const Tensor& other) const;
  Tensor sinc() const;
  Tensor heaviside(const Tensor& values) const;
  Tensor deg2rad() const;
  Tensor rad2deg() const;
  Tensor frac() const;
  Tensor float_power(const Tensor& exponent) const;
  Tensor float_power(const Scalar& exponent) const;
  Tensor true_divide(const Tensor& other) const;
  Tensor kron(const Tensor& other) const;
  Tensor matrix_power(int64_t n) const;
  Tensor dist(const Tensor& other, double p = 2.0) const;
  Tensor renorm(double p, int64_t dim, double maxnorm) const;

  // More reductions, scans and sorting (ops/reduce.h, ops/scan.h, ops/sort.h).
  /// The largest (smallest) element, a 0-d tensor.
  Tensor max() const;
  Tensor min() const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor var() const;
  Tensor std() const;
  Tensor std(IntArrayRef dim, bool unbiased = true, bool keepdim = false) const;
  template <class Bool, std::enable_if_t<std::is_same_v<Bool, bool>, int> = 0>
  Tensor std(Bool unbiased) const {
    return std(IntArrayRef{}, unbiased);
  }
  Tensor norm(const Scalar& p = 2) const;
  Tensor norm(const Scalar& p, IntArrayRef dim, bool keepdim = false) const;
  Tensor logsumexp(IntArrayRef dim, bool keepdim = false) const;
  Tensor nansum(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor nanmean(IntArrayRef dim = {}, bool keepdim = false) const;
  Tensor count_nonzero(IntArrayRef dim = {}) const;
  std::tuple<Tensor, Tensor> aminmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  // Order statistics and counting (ops/order_stats.h, ops/search.h, ops/statistics.h).
  Tensor median() const;
  std::tuple<Tensor, Tensor> median(int64_t dim, bool keepdim = false) const;
  Tensor nanmedian() const;
  std::tuple<Tensor, Tensor> nanmedian(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> kthvalue(int64_t k, int64_t dim = -1, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> mode(int64_t dim = -1, bool keepdim = false) const;
  Tensor quantile(double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                  const std::string& interpolation = "linear") const;
  Tensor quantile(const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                  const std::string& interpolation = "linear") const;
  Tensor nanquantile(double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                     const std::string& interpolation = "linear") const;
  Tensor nanquantile(const Tensor& q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
                     const std::string& interpolation = "linear") const;
  Tensor bincount(const std::optional<Tensor>& weights = std::nullopt, int64_t minlength = 0) const;
  Tensor histc(int64_t bins = 100, const Scalar& min = 0, const Scalar& max = 0) const;
  Tensor cov(int64_t correction = 1, const std::optional<Tensor>& fweights = std::nullopt,
             const std::optional<Tensor>& aweights = std::nullopt) const;
  Tensor corrcoef() const;
  /// Every element within atol + rtol * |other| (a host bool: a sync on CUDA).
  bool allclose(const Tensor& other, double rtol = 1e-05, double atol = 1e-08, bool equal_nan = false) const;
  Tensor isclose(const Tensor& other, double rtol = 1e-05, double atol = 1e-08, bool equal_nan = false) const;
  /// Same shape and the same values (a host bool).
  bool equal(const Tensor& other) const;
  Tensor cumsum(int64_t dim) const;
  Tensor diff(int64_t n = 1, int64_t dim = -1, const Tensor& prepend = {}, const Tensor& append = {}) const;
  Tensor cumprod(int64_t dim) const;
  Tensor logcumsumexp(int64_t dim) const;
  std::tuple<Tensor, Tensor> cummax(int64_t dim) const;
  std::tuple<Tensor, Tensor> cummin(int64_t dim) const;
  /// torch.multinomial (ops/sampling.h).   Tensor next = probs.multinomial(1);
  Tensor multinomial(int64_t num_samples, bool replacement = false) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  Tensor msort() const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;

  // Gathers and scatters (ops/gather_scatter.h, ops/indexing.h) and rearrangements (ops/rearrange.h).
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                        bool include_self = true) const;
  Tensor& scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                          bool include_self = true) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1) const;
  Tensor take_along_dim(const Tensor& indices, std::optional<int64_t> dim = std::nullopt) const;
  Tensor take(const Tensor& index) const;
  Tensor index_fill(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor index_fill(int64_t dim, const Tensor& index, const Tensor& value) const;
  Tensor index_copy(int64_t dim, const Tensor& index, const Tensor& source) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor nonzero() const;
  Tensor repeat(IntArrayRef repeats) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor flip(IntArrayRef dims) const;
  Tensor roll(IntArrayRef shifts, IntArrayRef dims = {}) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor rot90(int64_t k = 1, IntArrayRef dims = {0, 1}) const;
  Tensor flipud() const;
  Tensor fliplr() const;
  Tensor masked_scatter(const Tensor& mask, const Tensor& source) const;

  // In place, through any view (strided destinations); each bumps the version counter. The handle
  // is const (as libtorch's): the data changes, not which tensor this is.
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor& mul_(const Tensor& other) const;
  Tensor& mul_(const Scalar& other) const;
  Tensor& div_(const Tensor& other) const;
  Tensor& div_(const Scalar& other) const;
  Tensor& div_(const Tensor& other, std::optional<std::string_view> rounding_mode) const;
  Tensor& div_(const Scalar& other, std::optional<std::string_view> rounding_mode) const;
  Tensor& fill_(const Scalar& value) const;
  // Written through a second pass after the out-of-place op (ops/inplace.h), not recorded either.
  Tensor& relu_() const;
  Tensor& sigmoid_() const;
  Tensor& tanh_() const;
  Tensor& exp_() const;
  Tensor& log_() const;
  Tensor& sqrt_() const;
  Tensor& neg_() const;
  Tensor& abs_() const;
  Tensor& pow_(const Scalar& exponent) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor& clamp_min_(const Scalar& min) const;
  Tensor& clamp_max_(const Scalar& max) const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value) const;
  Tensor& addcmul_(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1) const;
  Tensor& addcdiv_(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value = 1) const;
  Tensor& lerp_(const Tensor& end, const Scalar& weight) const;
  Tensor& index_fill_(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor& index_copy_(int64_t dim, const Tensor& index, const Tensor& source) const;
  Tensor& tril_(int64_t diagonal = 0) const;
  Tensor& triu_(int64_t diagonal = 0) const;
  Tensor& fill_diagonal_(const Scalar& fill_value, bool wrap = false) const;
  /// Sets every element to 0 in place (any layout); not recorded (ops/elementwise.h).
  Tensor& zero_() const;
  /// Writes src (broadcast to this shape, converted to this dtype and device) into this tensor.
  Tensor& copy_(const Tensor& src, bool non_blocking = false) const;
  Tensor& uniform_(double from = 0, double to = 1) const;
  Tensor& normal_(double mean = 0, double std = 1) const;
  Tensor& bernoulli_(double p = 0.5) const;
  Tensor& bernoulli_(const Tensor& p) const;
  Tensor& random_(int64_t from, std::optional<int64_t> to) const;
  Tensor& random_(int64_t to) const;
  Tensor& random_() const;
  Tensor& exponential_(double lambd = 1) const;
  Tensor& geometric_(double p) const;
  Tensor& log_normal_(double mean = 1, double std = 2) const;
  Tensor& cauchy_(double median = 0, double sigma = 1) const;

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

template <class T, size_t N>
TensorAccessor<T, N> Tensor::accessor() const& {
  MINIDL_CHECK(device().is_cpu(), "accessor<", dtype_name(dtype_of<T>()), ", ", N, ">(): expected a CPU tensor, got one on ",
               device(), "; use .cpu() first");
  MINIDL_CHECK(dtype() == dtype_of<T>(), "accessor<", dtype_name(dtype_of<T>()), ", ", N,
               ">(): expected a tensor of dtype ", dtype_name(dtype_of<T>()), ", got ", dtype());
  MINIDL_CHECK(dim() == static_cast<int64_t>(N), "accessor<", dtype_name(dtype_of<T>()), ", ", N, ">(): expected a ",
               N, "-d tensor, got ", dim(), "-d of shape ", shape());
  return TensorAccessor<T, N>(data<T>(), shape().data(), strides().data());
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
