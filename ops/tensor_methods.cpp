// Tensor's libtorch-style methods: each forwards to the free function of ops/ that holds its
// semantics, so x.sum(1) and sum(x, {1}) are one code path.
#include "core/cuda.h"
#include "core/tensor.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/copy.h"
#include "ops/combine.h"
#include "ops/creation.h"
#include "ops/diagonal.h"
#include "ops/distance.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/indexing.h"
#include "ops/logical.h"
#include "ops/math.h"
#include "ops/matmul.h"
#include "ops/inplace.h"
#include "ops/mm.h"
#include "ops/order_stats.h"
#include "ops/rearrange.h"
#include "ops/sampling.h"
#include "ops/search.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/select.h"
#include "ops/slice.h"
#include "ops/softmax.h"
#include "ops/sort.h"
#include "ops/statistics.h"
#include "ops/view.h"

namespace minidl {

namespace {

// In-place methods are const on the handle (as libtorch's); the free functions take Tensor&.
Tensor& self(const Tensor& t) { return const_cast<Tensor&>(t); }

std::tuple<Tensor, Tensor> as_tuple(MaxResult r) { return {std::move(r.values), std::move(r.indices)}; }

}  // namespace

// ---- metadata ----
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }
TensorOptions Tensor::options() const {
  return TensorOptions().dtype(dtype()).device(device()).requires_grad(requires_grad());
}
Scalar Tensor::item() const {
  if (dtype() == kBool) return Scalar(item<bool>());
  if (is_floating(dtype())) return Scalar(item<double>());
  return Scalar(item<int64_t>());
}

// ---- layout and device ----
Tensor Tensor::to(Device device) const { return minidl::to(*this, device, dtype()); }
Tensor Tensor::to(DType dtype) const { return minidl::to(*this, device(), dtype); }
Tensor Tensor::to(Device device, DType dtype) const { return minidl::to(*this, device, dtype); }
Tensor Tensor::to(const TensorOptions& options) const {
  return minidl::to(*this, options.has_device() ? options.device() : device(), options.dtype_or(dtype()));
}
Tensor Tensor::to(const Tensor& other) const { return minidl::to(*this, other.device(), other.dtype()); }
Tensor Tensor::type_as(const Tensor& other) const { return to(other); }
Tensor Tensor::cuda(int index) const { return minidl::to(*this, Device::cuda(index), dtype()); }
Tensor Tensor::cpu() const { return minidl::to(*this, Device::cpu(), dtype()); }
Tensor Tensor::contiguous() const { return minidl::contiguous(*this); }
Tensor Tensor::contiguous(MemoryFormat format) const { return minidl::contiguous(*this, format); }
Tensor Tensor::clone() const { return minidl::clone(*this); }
// new_*: this tensor's dtype and device unless the options set them.
static TensorOptions like(const Tensor& t, const TensorOptions& o) {
  return o.dtype(o.dtype_or(t.dtype())).device(o.has_device() ? o.device() : t.device());
}
Tensor Tensor::new_zeros(IntArrayRef size, TensorOptions o) const { return minidl::zeros(size, like(*this, o)); }
Tensor Tensor::new_ones(IntArrayRef size, TensorOptions o) const { return minidl::ones(size, like(*this, o)); }
Tensor Tensor::new_full(IntArrayRef size, const Scalar& fill_value, TensorOptions o) const {
  return minidl::full(size, fill_value, like(*this, o));
}
Tensor Tensor::new_empty(IntArrayRef size, TensorOptions o) const { return minidl::empty(size, like(*this, o)); }

// ---- views ----
Tensor Tensor::view(IntArrayRef size) const { return minidl::view(*this, size); }
Tensor Tensor::view_as(const Tensor& other) const { return minidl::view(*this, other.shape()); }
Tensor Tensor::reshape(IntArrayRef shape) const { return minidl::reshape(*this, shape); }
Tensor Tensor::reshape_as(const Tensor& other) const { return minidl::reshape(*this, other.shape()); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return minidl::flatten(*this, start_dim, end_dim); }
Tensor Tensor::squeeze(int64_t dim) const { return minidl::squeeze(*this, dim); }
Tensor Tensor::squeeze() const { return minidl::squeeze(*this); }
Tensor Tensor::unsqueeze(int64_t dim) const { return minidl::unsqueeze(*this, dim); }
Tensor& Tensor::t_() const { return minidl::t_(self(*this)); }
Tensor& Tensor::transpose_(int64_t dim0, int64_t dim1) const { return minidl::transpose_(self(*this), dim0, dim1); }
Tensor& Tensor::squeeze_() const { return minidl::squeeze_(self(*this)); }
Tensor& Tensor::squeeze_(int64_t dim) const { return minidl::squeeze_(self(*this), dim); }
Tensor& Tensor::unsqueeze_(int64_t dim) const { return minidl::unsqueeze_(self(*this), dim); }
Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  return minidl::slice(*this, dim, start, end, step);
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return minidl::narrow(*this, dim, start, length);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return minidl::select(*this, dim, index); }
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return minidl::unbind(*this, dim); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return minidl::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return minidl::chunk(*this, chunks, dim); }
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t dim) const {
  return minidl::split(*this, sizes, dim);
}
std::vector<Tensor> Tensor::split_with_sizes(const std::vector<int64_t>& sizes, int64_t dim) const {
  return minidl::split_with_sizes(*this, sizes, dim);
}
std::vector<Tensor> Tensor::tensor_split(int64_t sections, int64_t dim) const {
  return minidl::tensor_split(*this, sections, dim);
}
std::vector<Tensor> Tensor::tensor_split(const std::vector<int64_t>& indices, int64_t dim) const {
  return minidl::tensor_split(*this, indices, dim);
}
Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  return minidl::diagonal(*this, offset, dim1, dim2);
}
Tensor Tensor::diag(int64_t diagonal) const { return minidl::diag(*this, diagonal); }
Tensor Tensor::diag_embed(int64_t offset, int64_t dim1, int64_t dim2) const {
  return minidl::diag_embed(*this, offset, dim1, dim2);
}
Tensor Tensor::trace() const { return minidl::trace(*this); }
Tensor Tensor::unfold(int64_t dim, int64_t size, int64_t step) const { return minidl::unfold(*this, dim, size, step); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return minidl::transpose(*this, dim0, dim1); }
Tensor Tensor::swapaxes(int64_t dim0, int64_t dim1) const { return minidl::transpose(*this, dim0, dim1); }
Tensor Tensor::swapdims(int64_t dim0, int64_t dim1) const { return minidl::transpose(*this, dim0, dim1); }
Tensor Tensor::permute(IntArrayRef dims) const { return minidl::permute(*this, dims); }
Tensor Tensor::movedim(IntArrayRef source, IntArrayRef destination) const {
  return minidl::movedim(*this, source, destination);
}
Tensor Tensor::unflatten(int64_t dim, IntArrayRef sizes) const { return minidl::unflatten(*this, dim, sizes); }
Tensor Tensor::expand(IntArrayRef size) const { return minidl::expand(*this, size); }
Tensor Tensor::expand_as(const Tensor& other) const { return minidl::expand(*this, other.shape()); }

// ---- reductions (sum() and mean() are defined beside their ops in ops/reduce.cpp) ----
Tensor Tensor::sum(IntArrayRef dim, bool keepdim) const { return minidl::sum(*this, dim, keepdim); }
Tensor Tensor::mean(IntArrayRef dim, bool keepdim) const { return minidl::mean(*this, dim, keepdim); }
Tensor Tensor::var(IntArrayRef dim, bool unbiased, bool keepdim) const {
  return minidl::var(*this, dim, unbiased, keepdim);
}
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return as_tuple(minidl::max(*this, dim, keepdim));
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return as_tuple(minidl::min(*this, dim, keepdim));
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return minidl::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return minidl::argmin(*this, dim, keepdim); }
Tensor Tensor::amax(IntArrayRef dim, bool keepdim) const { return minidl::amax(*this, dim, keepdim); }
Tensor Tensor::amin(IntArrayRef dim, bool keepdim) const { return minidl::amin(*this, dim, keepdim); }
Tensor Tensor::softmax(int64_t dim) const { return minidl::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return minidl::log_softmax(*this, dim); }
Tensor Tensor::softmax(int64_t dim, DType dtype) const { return minidl::softmax(*this, dim, dtype); }
Tensor Tensor::log_softmax(int64_t dim, DType dtype) const { return minidl::log_softmax(*this, dim, dtype); }
Tensor Tensor::sum(DType dtype) const { return minidl::sum(*this, dtype); }
Tensor Tensor::sum(IntArrayRef dim, bool keepdim, DType dtype) const { return minidl::sum(*this, dim, keepdim, dtype); }
Tensor Tensor::mean(DType dtype) const { return minidl::mean(*this, dtype); }
Tensor Tensor::mean(IntArrayRef dim, bool keepdim, DType dtype) const {
  return minidl::mean(*this, dim, keepdim, dtype);
}

// ---- products ----
Tensor Tensor::matmul(const Tensor& other) const { return minidl::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& mat2) const { return minidl::mm(*this, mat2); }
Tensor Tensor::bmm(const Tensor& mat2) const { return minidl::bmm(*this, mat2); }
Tensor Tensor::mv(const Tensor& vec) const { return minidl::mv(*this, vec); }
Tensor Tensor::dot(const Tensor& other) const { return minidl::dot(*this, other); }
Tensor Tensor::outer(const Tensor& vec2) const { return minidl::outer(*this, vec2); }
Tensor Tensor::cross(const Tensor& other, std::optional<int64_t> dim) const { return minidl::cross(*this, other, dim); }
Tensor Tensor::addmm(const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) const {
  return minidl::addmm(*this, mat1, mat2, beta, alpha);
}
Tensor Tensor::baddbmm(const Tensor& batch1, const Tensor& batch2, const Scalar& beta, const Scalar& alpha) const {
  return minidl::baddbmm(*this, batch1, batch2, beta, alpha);
}
Tensor Tensor::addbmm(const Tensor& batch1, const Tensor& batch2, const Scalar& beta, const Scalar& alpha) const {
  return minidl::addbmm(*this, batch1, batch2, beta, alpha);
}
Tensor Tensor::addmv(const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha) const {
  return minidl::addmv(*this, mat, vec, beta, alpha);
}
Tensor Tensor::addr(const Tensor& vec1, const Tensor& vec2, const Scalar& beta, const Scalar& alpha) const {
  return minidl::addr(*this, vec1, vec2, beta, alpha);
}

// ---- arithmetic ----
Tensor Tensor::add(const Tensor& other, const Scalar& alpha) const { return minidl::add(*this, other, alpha); }
Tensor Tensor::add(const Scalar& other, const Scalar& alpha) const { return minidl::add(*this, other, alpha); }
Tensor Tensor::sub(const Tensor& other, const Scalar& alpha) const { return minidl::sub(*this, other, alpha); }
Tensor Tensor::sub(const Scalar& other, const Scalar& alpha) const { return minidl::sub(*this, other, alpha); }
Tensor Tensor::addcmul(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) const {
  return minidl::addcmul(*this, tensor1, tensor2, value);
}
Tensor Tensor::addcdiv(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) const {
  return minidl::addcdiv(*this, tensor1, tensor2, value);
}
Tensor Tensor::lerp(const Tensor& end, const Scalar& weight) const { return minidl::lerp(*this, end, weight); }
Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const { return minidl::lerp(*this, end, weight); }
Tensor Tensor::mul(const Tensor& other) const { return minidl::mul(*this, other); }
Tensor Tensor::mul(const Scalar& other) const { return minidl::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return minidl::div(*this, other); }
Tensor Tensor::div(const Scalar& other) const { return minidl::div(*this, other); }
Tensor Tensor::div(const Tensor& other, std::optional<std::string_view> rounding_mode) const {
  return minidl::div(*this, other, rounding_mode);
}
Tensor Tensor::div(const Scalar& other, std::optional<std::string_view> rounding_mode) const {
  return minidl::div(*this, other, rounding_mode);
}
Tensor Tensor::floor_divide(const Tensor& other) const { return minidl::floor_divide(*this, other); }
Tensor Tensor::floor_divide(const Scalar& other) const { return minidl::floor_divide(*this, other); }
Tensor Tensor::remainder(const Tensor& other) const { return minidl::remainder(*this, other); }
Tensor Tensor::remainder(const Scalar& other) const { return minidl::remainder(*this, other); }
Tensor Tensor::pow(const Tensor& exponent) const { return minidl::pow(*this, exponent); }
Tensor Tensor::pow(const Scalar& exponent) const { return minidl::pow(*this, exponent); }
Tensor Tensor::neg() const { return minidl::neg(*this); }
Tensor Tensor::exp() const { return minidl::exp(*this); }
Tensor Tensor::log() const { return minidl::log(*this); }
Tensor Tensor::sqrt() const { return minidl::sqrt(*this); }
Tensor Tensor::abs() const { return minidl::abs(*this); }
Tensor Tensor::relu() const { return minidl::relu(*this); }
Tensor Tensor::sigmoid() const { return minidl::sigmoid(*this); }
Tensor Tensor::tanh() const { return minidl::tanh(*this); }

// ---- comparisons and selection ----
Tensor Tensor::eq(const Tensor& other) const { return minidl::eq(*this, other); }
Tensor Tensor::eq(const Scalar& other) const { return minidl::eq(*this, other); }
Tensor Tensor::ne(const Tensor& other) const { return minidl::ne(*this, other); }
Tensor Tensor::ne(const Scalar& other) const { return minidl::ne(*this, other); }
Tensor Tensor::lt(const Tensor& other) const { return minidl::lt(*this, other); }
Tensor Tensor::lt(const Scalar& other) const { return minidl::lt(*this, other); }
Tensor Tensor::le(const Tensor& other) const { return minidl::le(*this, other); }
Tensor Tensor::le(const Scalar& other) const { return minidl::le(*this, other); }
Tensor Tensor::gt(const Tensor& other) const { return minidl::gt(*this, other); }
Tensor Tensor::gt(const Scalar& other) const { return minidl::gt(*this, other); }
Tensor Tensor::ge(const Tensor& other) const { return minidl::ge(*this, other); }
Tensor Tensor::ge(const Scalar& other) const { return minidl::ge(*this, other); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return minidl::where(condition, *this, other);
}
Tensor Tensor::where(const Tensor& condition, const Scalar& other) const {
  return minidl::where(condition, *this, other);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  return minidl::masked_fill(*this, mask, value.to_double());
}
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  return minidl::masked_fill(*this, mask, value);
}
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return minidl::clamp(*this, min, max);
}
Tensor Tensor::clip(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return minidl::clip(*this, min, max);
}
Tensor Tensor::clamp_min(const Scalar& min) const { return minidl::clamp(*this, min, std::nullopt); }
Tensor Tensor::clamp_max(const Scalar& max) const { return minidl::clamp(*this, std::nullopt, max); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return minidl::index_select(*this, dim, index);
}

// ---- in place ----
Tensor& Tensor::add_(const Tensor& other, const Scalar& alpha) const { return minidl::add_(self(*this), other, alpha); }
Tensor& Tensor::add_(const Scalar& other, const Scalar& alpha) const { return minidl::add_(self(*this), other, alpha); }
Tensor& Tensor::sub_(const Tensor& other, const Scalar& alpha) const { return minidl::sub_(self(*this), other, alpha); }
Tensor& Tensor::sub_(const Scalar& other, const Scalar& alpha) const { return minidl::sub_(self(*this), other, alpha); }
Tensor& Tensor::mul_(const Tensor& other) const { return minidl::mul_(self(*this), other); }
Tensor& Tensor::mul_(const Scalar& other) const { return minidl::mul_(self(*this), other); }
Tensor& Tensor::div_(const Tensor& other) const { return minidl::div_(self(*this), other); }
Tensor& Tensor::div_(const Scalar& other) const { return minidl::div_(self(*this), other); }
Tensor& Tensor::div_(const Tensor& other, std::optional<std::string_view> rounding_mode) const {
  return minidl::div_(self(*this), other, rounding_mode);
}
Tensor& Tensor::div_(const Scalar& other, std::optional<std::string_view> rounding_mode) const {
  return minidl::div_(self(*this), other, rounding_mode);
}
Tensor& Tensor::fill_(const Scalar& value) const { return minidl::fill_(self(*this), value); }
Tensor& Tensor::zero_() const { return minidl::zero_(self(*this)); }
Tensor& Tensor::relu_() const { return minidl::relu_(self(*this)); }
Tensor& Tensor::sigmoid_() const { return minidl::sigmoid_(self(*this)); }
Tensor& Tensor::tanh_() const { return minidl::tanh_(self(*this)); }
Tensor& Tensor::exp_() const { return minidl::exp_(self(*this)); }
Tensor& Tensor::log_() const { return minidl::log_(self(*this)); }
Tensor& Tensor::sqrt_() const { return minidl::sqrt_(self(*this)); }
Tensor& Tensor::neg_() const { return minidl::neg_(self(*this)); }
Tensor& Tensor::abs_() const { return minidl::abs_(self(*this)); }
Tensor& Tensor::pow_(const Scalar& exponent) const { return minidl::pow_(self(*this), exponent); }
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return minidl::clamp_(self(*this), min, max);
}
Tensor& Tensor::clamp_min_(const Scalar& min) const { return minidl::clamp_min_(self(*this), min); }
Tensor& Tensor::clamp_max_(const Scalar& max) const { return minidl::clamp_max_(self(*this), max); }
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) const {
  return minidl::masked_fill_(self(*this), mask, value);
}
Tensor& Tensor::addcmul_(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) const {
  return minidl::addcmul_(self(*this), tensor1, tensor2, value);
}
Tensor& Tensor::addcdiv_(const Tensor& tensor1, const Tensor& tensor2, const Scalar& value) const {
  return minidl::addcdiv_(self(*this), tensor1, tensor2, value);
}
Tensor& Tensor::lerp_(const Tensor& end, const Scalar& weight) const { return minidl::lerp_(self(*this), end, weight); }
Tensor& Tensor::index_fill_(int64_t dim, const Tensor& index, const Scalar& value) const {
  return minidl::index_fill_(self(*this), dim, index, value);
}
Tensor& Tensor::index_copy_(int64_t dim, const Tensor& index, const Tensor& source) const {
  return minidl::index_copy_(self(*this), dim, index, source);
}
Tensor& Tensor::tril_(int64_t diagonal) const { return minidl::tril_(self(*this), diagonal); }
Tensor& Tensor::triu_(int64_t diagonal) const { return minidl::triu_(self(*this), diagonal); }
Tensor& Tensor::fill_diagonal_(const Scalar& fill_value, bool wrap) const {
  return minidl::fill_diagonal_(self(*this), fill_value, wrap);
}
Tensor& Tensor::copy_(const Tensor& src, bool /*non_blocking*/) const { return minidl::copy_(self(*this), src); }
Tensor& Tensor::uniform_(double from, double to) const { return minidl::uniform_(self(*this), from, to); }
Tensor& Tensor::normal_(double mean, double std) const { return minidl::normal_(self(*this), mean, std); }
Tensor& Tensor::bernoulli_(double p) const { return minidl::bernoulli_(self(*this), p); }
Tensor& Tensor::bernoulli_(const Tensor& p) const { return minidl::bernoulli_(self(*this), p); }
Tensor& Tensor::random_(int64_t from, std::optional<int64_t> to) const { return minidl::random_(self(*this), from, to); }
Tensor& Tensor::random_(int64_t to) const { return minidl::random_(self(*this), to); }
Tensor& Tensor::random_() const { return minidl::random_(self(*this)); }
Tensor& Tensor::exponential_(double lambd) const { return minidl::exponential_(self(*this), lambd); }
Tensor& Tensor::geometric_(double p) const { return minidl::geometric_(self(*this), p); }
Tensor& Tensor::log_normal_(double mean, double std) const { return minidl::log_normal_(self(*this), mean, std); }
Tensor& Tensor::cauchy_(double median, double sigma) const { return minidl::cauchy_(self(*this), median, sigma); }

// ---- math ----
Tensor Tensor::sin() const { return minidl::sin(*this); }
Tensor Tensor::cos() const { return minidl::cos(*this); }
Tensor Tensor::tan() const { return minidl::tan(*this); }
Tensor Tensor::asin() const { return minidl::asin(*this); }
Tensor Tensor::acos() const { return minidl::acos(*this); }
Tensor Tensor::atan() const { return minidl::atan(*this); }
Tensor Tensor::sinh() const { return minidl::sinh(*this); }
Tensor Tensor::cosh() const { return minidl::cosh(*this); }
Tensor Tensor::square() const { return minidl::square(*this); }
Tensor Tensor::exp2() const { return minidl::exp2(*this); }
Tensor Tensor::floor() const { return minidl::floor(*this); }
Tensor Tensor::ceil() const { return minidl::ceil(*this); }
Tensor Tensor::round() const { return minidl::round(*this); }
Tensor Tensor::round(int64_t decimals) const { return minidl::round(*this, decimals); }
Tensor Tensor::trunc() const { return minidl::trunc(*this); }
Tensor Tensor::sign() const { return minidl::sign(*this); }
Tensor Tensor::rsqrt() const { return minidl::rsqrt(*this); }
Tensor Tensor::reciprocal() const { return minidl::reciprocal(*this); }
Tensor Tensor::log1p() const { return minidl::log1p(*this); }
Tensor Tensor::expm1() const { return minidl::expm1(*this); }
Tensor Tensor::log2() const { return minidl::log2(*this); }
Tensor Tensor::log10() const { return minidl::log10(*this); }
Tensor Tensor::erf() const { return minidl::erf(*this); }
Tensor Tensor::asinh() const { return minidl::asinh(*this); }
Tensor Tensor::acosh() const { return minidl::acosh(*this); }
Tensor Tensor::atanh() const { return minidl::atanh(*this); }
Tensor Tensor::arcsinh() const { return minidl::arcsinh(*this); }
Tensor Tensor::arccosh() const { return minidl::arccosh(*this); }
Tensor Tensor::arctanh() const { return minidl::arctanh(*this); }
Tensor Tensor::erfc() const { return minidl::erfc(*this); }
Tensor Tensor::erfinv() const { return minidl::erfinv(*this); }
Tensor Tensor::lgamma() const { return minidl::lgamma(*this); }
Tensor Tensor::digamma() const { return minidl::digamma(*this); }
Tensor Tensor::polygamma(int64_t n) const { return minidl::polygamma(n, *this); }
Tensor Tensor::mvlgamma(int64_t p) const { return minidl::mvlgamma(*this, p); }
Tensor Tensor::hypot(const Tensor& other) const { return minidl::hypot(*this, other); }
Tensor Tensor::copysign(const Tensor& other) const { return minidl::copysign(*this, other); }
Tensor Tensor::copysign(const Scalar& other) const { return minidl::copysign(*this, other); }
Tensor Tensor::signbit() const { return minidl::signbit(*this); }
Tensor Tensor::i0() const { return minidl::i0(*this); }
Tensor Tensor::nextafter(const Tensor& other) const { return minidl::nextafter(*this, other); }
Tensor Tensor::gcd(const Tensor& other) const { return minidl::gcd(*this, other); }
Tensor Tensor::lcm(const Tensor& other) const { return minidl::lcm(*this, other); }
Tensor Tensor::ldexp(const Tensor& exponent) const { return minidl::ldexp(*this, exponent); }
std::tuple<Tensor, Tensor> Tensor::frexp() const { return minidl::frexp(*this); }
Tensor Tensor::maximum(const Tensor& other) const { return minidl::maximum(*this, other); }
Tensor Tensor::fmax(const Tensor& other) const { return minidl::fmax(*this, other); }
Tensor Tensor::fmin(const Tensor& other) const { return minidl::fmin(*this, other); }
Tensor Tensor::minimum(const Tensor& other) const { return minidl::minimum(*this, other); }
Tensor Tensor::fmod(const Tensor& other) const { return minidl::fmod(*this, other); }
Tensor Tensor::fmod(const Scalar& other) const { return minidl::fmod(*this, other); }
Tensor Tensor::atan2(const Tensor& other) const { return minidl::atan2(*this, other); }
Tensor Tensor::logical_and(const Tensor& other) const { return minidl::logical_and(*this, other); }
Tensor Tensor::logical_or(const Tensor& other) const { return minidl::logical_or(*this, other); }
Tensor Tensor::logical_xor(const Tensor& other) const { return minidl::logical_xor(*this, other); }
Tensor Tensor::logical_not() const { return minidl::logical_not(*this); }
Tensor Tensor::isnan() const { return minidl::isnan(*this); }
Tensor Tensor::isinf() const { return minidl::isinf(*this); }
Tensor Tensor::isposinf() const { return minidl::isposinf(*this); }
Tensor Tensor::isneginf() const { return minidl::isneginf(*this); }
Tensor Tensor::logaddexp(const Tensor& other) const { return minidl::logaddexp(*this, other); }
Tensor Tensor::logaddexp2(const Tensor& other) const { return minidl::logaddexp2(*this, other); }
Tensor Tensor::xlogy(const Tensor& other) const { return minidl::xlogy(*this, other); }
Tensor Tensor::sinc() const { return minidl::sinc(*this); }
Tensor Tensor::heaviside(const Tensor& values) const { return minidl::heaviside(*this, values); }
Tensor Tensor::deg2rad() const { return minidl::deg2rad(*this); }
Tensor Tensor::rad2deg() const { return minidl::rad2deg(*this); }
Tensor Tensor::frac() const { return minidl::frac(*this); }
Tensor Tensor::float_power(const Tensor& exponent) const { return minidl::float_power(*this, exponent); }
Tensor Tensor::float_power(const Scalar& exponent) const { return minidl::float_power(*this, exponent); }
Tensor Tensor::true_divide(const Tensor& other) const { return minidl::true_divide(*this, other); }
Tensor Tensor::kron(const Tensor& other) const { return minidl::kron(*this, other); }
Tensor Tensor::matrix_power(int64_t n) const { return minidl::matrix_power(*this, n); }
Tensor Tensor::dist(const Tensor& other, double p) const { return minidl::dist(*this, other, p); }
Tensor Tensor::renorm(double p, int64_t dim, double maxnorm) const { return minidl::renorm(*this, p, dim, maxnorm); }
Tensor Tensor::rot90(int64_t k, IntArrayRef dims) const { return minidl::rot90(*this, k, dims.vec()); }
Tensor Tensor::flipud() const { return minidl::flipud(*this); }
Tensor Tensor::fliplr() const { return minidl::fliplr(*this); }
Tensor Tensor::masked_scatter(const Tensor& mask, const Tensor& source) const {
  return minidl::masked_scatter(*this, mask, source);
}
Tensor Tensor::isfinite() const { return minidl::isfinite(*this); }
Tensor Tensor::nan_to_num(std::optional<double> nan, std::optional<double> posinf, std::optional<double> neginf) const {
  return minidl::nan_to_num(*this, nan, posinf, neginf);
}

// ---- more reductions, scans, sorting ----
Tensor Tensor::max() const { return minidl::max(*this); }
Tensor Tensor::min() const { return minidl::min(*this); }
Tensor Tensor::prod() const { return minidl::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return minidl::prod(*this, dim, keepdim); }
Tensor Tensor::any() const { return minidl::any(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return minidl::any(*this, dim, keepdim); }
Tensor Tensor::all() const { return minidl::all(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return minidl::all(*this, dim, keepdim); }
Tensor Tensor::var() const { return minidl::var(*this); }
Tensor Tensor::std() const { return minidl::std(*this); }
Tensor Tensor::std(IntArrayRef dim, bool unbiased, bool keepdim) const {
  return minidl::std(*this, dim.vec(), unbiased, keepdim);
}
Tensor Tensor::norm(const Scalar& p) const { return minidl::norm(*this, p); }
Tensor Tensor::norm(const Scalar& p, IntArrayRef dim, bool keepdim) const {
  return minidl::norm(*this, p, dim.vec(), keepdim);
}
Tensor Tensor::logsumexp(IntArrayRef dim, bool keepdim) const { return minidl::logsumexp(*this, dim.vec(), keepdim); }
Tensor Tensor::nansum(IntArrayRef dim, bool keepdim) const { return minidl::nansum(*this, dim.vec(), keepdim); }
Tensor Tensor::nanmean(IntArrayRef dim, bool keepdim) const { return minidl::nanmean(*this, dim.vec(), keepdim); }
Tensor Tensor::count_nonzero(IntArrayRef dim) const { return minidl::count_nonzero(*this, dim.vec()); }
std::tuple<Tensor, Tensor> Tensor::aminmax(std::optional<int64_t> dim, bool keepdim) const {
  return minidl::aminmax(*this, dim, keepdim);
}
Tensor Tensor::median() const { return minidl::median(*this); }
std::tuple<Tensor, Tensor> Tensor::median(int64_t dim, bool keepdim) const { return minidl::median(*this, dim, keepdim); }
Tensor Tensor::nanmedian() const { return minidl::nanmedian(*this); }
std::tuple<Tensor, Tensor> Tensor::nanmedian(int64_t dim, bool keepdim) const {
  return minidl::nanmedian(*this, dim, keepdim);
}
std::tuple<Tensor, Tensor> Tensor::kthvalue(int64_t k, int64_t dim, bool keepdim) const {
  return minidl::kthvalue(*this, k, dim, keepdim);
}
std::tuple<Tensor, Tensor> Tensor::mode(int64_t dim, bool keepdim) const { return minidl::mode(*this, dim, keepdim); }
Tensor Tensor::quantile(double q, std::optional<int64_t> dim, bool keepdim, const std::string& interpolation) const {
  return minidl::quantile(*this, q, dim, keepdim, interpolation);
}
Tensor Tensor::quantile(const Tensor& q, std::optional<int64_t> dim, bool keepdim, const std::string& interpolation) const {
  return minidl::quantile(*this, q, dim, keepdim, interpolation);
}
Tensor Tensor::nanquantile(double q, std::optional<int64_t> dim, bool keepdim, const std::string& interpolation) const {
  return minidl::nanquantile(*this, q, dim, keepdim, interpolation);
}
Tensor Tensor::nanquantile(const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                           const std::string& interpolation) const {
  return minidl::nanquantile(*this, q, dim, keepdim, interpolation);
}
Tensor Tensor::bincount(const std::optional<Tensor>& weights, int64_t minlength) const {
  return minidl::bincount(*this, weights, minlength);
}
Tensor Tensor::histc(int64_t bins, const Scalar& min, const Scalar& max) const {
  return minidl::histc(*this, bins, min, max);
}
Tensor Tensor::cov(int64_t correction, const std::optional<Tensor>& fweights, const std::optional<Tensor>& aweights) const {
  return minidl::cov(*this, correction, fweights, aweights);
}
Tensor Tensor::corrcoef() const { return minidl::corrcoef(*this); }
bool Tensor::allclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return minidl::allclose(*this, other, rtol, atol, equal_nan);
}
Tensor Tensor::isclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return minidl::isclose(*this, other, rtol, atol, equal_nan);
}
bool Tensor::equal(const Tensor& other) const { return minidl::equal(*this, other); }
Tensor Tensor::cumsum(int64_t dim) const { return minidl::cumsum(*this, dim); }
Tensor Tensor::diff(int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) const {
  return minidl::diff(*this, n, dim, prepend, append);
}
Tensor Tensor::cumprod(int64_t dim) const { return minidl::cumprod(*this, dim); }
Tensor Tensor::logcumsumexp(int64_t dim) const { return minidl::logcumsumexp(*this, dim); }
std::tuple<Tensor, Tensor> Tensor::cummax(int64_t dim) const { return minidl::cummax(*this, dim); }
std::tuple<Tensor, Tensor> Tensor::cummin(int64_t dim) const { return minidl::cummin(*this, dim); }
Tensor Tensor::multinomial(int64_t num_samples, bool replacement) const {
  return minidl::multinomial(*this, num_samples, replacement);
}
std::tuple<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  return minidl::sort(*this, dim, descending);
}
Tensor Tensor::argsort(int64_t dim, bool descending) const { return minidl::argsort(*this, dim, descending); }
Tensor Tensor::msort() const { return minidl::msort(*this); }
std::tuple<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return minidl::topk(*this, k, dim, largest, sorted);
}

// ---- gathers, scatters, rearrangements ----
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return minidl::gather(*this, dim, index); }
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return minidl::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Scalar& value) const {
  return minidl::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return minidl::scatter_add(*this, dim, index, src);
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) const {
  return minidl::scatter_(self(*this), dim, index, src);
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Scalar& value) const {
  return minidl::scatter_(self(*this), dim, index, value);
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) const {
  return minidl::scatter_add_(self(*this), dim, index, src);
}
Tensor Tensor::scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                              bool include_self) const {
  return minidl::scatter_reduce(*this, dim, index, src, reduce, include_self);
}
Tensor& Tensor::scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                                bool include_self) const {
  return minidl::scatter_reduce_(self(*this), dim, index, src, reduce, include_self);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) const {
  return minidl::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::take(const Tensor& index) const { return minidl::take(*this, index); }
Tensor Tensor::take_along_dim(const Tensor& indices, std::optional<int64_t> dim) const {
  return minidl::take_along_dim(*this, indices, dim);
}
Tensor Tensor::index_fill(int64_t dim, const Tensor& index, const Scalar& value) const {
  return minidl::index_fill(*this, dim, index, value);
}
Tensor Tensor::index_fill(int64_t dim, const Tensor& index, const Tensor& value) const {
  return minidl::index_fill(*this, dim, index, value);
}
Tensor Tensor::index_copy(int64_t dim, const Tensor& index, const Tensor& source) const {
  return minidl::index_copy(*this, dim, index, source);
}
Tensor Tensor::masked_select(const Tensor& mask) const { return minidl::masked_select(*this, mask); }
Tensor Tensor::nonzero() const { return minidl::nonzero(*this); }
Tensor Tensor::repeat(IntArrayRef repeats) const { return minidl::repeat(*this, repeats.vec()); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return minidl::repeat_interleave(*this, repeats, dim);
}
Tensor Tensor::flip(IntArrayRef dims) const { return minidl::flip(*this, dims.vec()); }
Tensor Tensor::roll(IntArrayRef shifts, IntArrayRef dims) const { return minidl::roll(*this, shifts.vec(), dims.vec()); }
Tensor Tensor::tril(int64_t diagonal) const { return minidl::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return minidl::triu(*this, diagonal); }

}  // namespace minidl
