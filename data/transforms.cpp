#include "data/transforms.h"

#include <random>

#include "core/random.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl::data::transforms {

namespace {

// A draw from the calling thread's generator: a loader worker's own, so augmentation is
// reproducible under manual_seed whatever the number of workers.
template <class Distribution>
auto draw(Distribution dist) {
  Generator& gen = default_generator();
  std::lock_guard lock(gen.mutex());
  return dist(gen.engine());
}

}  // namespace

Tensor normalize_statistic(const std::vector<double>& values, const char* what) {
  MINIDL_CHECK(!values.empty(), "Normalize: expected at least one ", what, " value, got none");
  if (std::string(what) == "stddev") {
    for (double v : values) MINIDL_CHECK(v != 0, "Normalize: stddev must not be 0, got ", v);
  }
  const auto n = static_cast<int64_t>(values.size());
  return Tensor::from_vector(values, n == 1 ? Shape{1} : Shape{n, 1, 1});
}

Tensor normalize(const Tensor& input, const Tensor& mean, const Tensor& stddev) {
  MINIDL_CHECK(mean.numel() == 1 || (input.dim() >= 3 && input.size(-3) == mean.numel()),
               "Normalize: ", mean.numel(), " channel statistics need images [..., ", mean.numel(),
               ", H, W], got shape ", input.shape());
  const DType dtype = is_floating(input.dtype()) ? input.dtype() : kFloat32;
  Tensor x = input.dtype() == dtype ? input : input.to(dtype);
  return div(sub(x, mean.to(dtype).to(x.device())), stddev.to(dtype).to(x.device()));
}

RandomCrop::RandomCrop(int64_t size, int64_t padding) : size_(size), padding_(padding) {
  MINIDL_CHECK(size > 0, "RandomCrop: size must be positive, got ", size);
  MINIDL_CHECK(padding >= 0, "RandomCrop: padding must not be negative, got ", padding);
}

Tensor RandomCrop::operator()(Tensor input) {
  MINIDL_CHECK(input.dim() >= 2, "RandomCrop: expected an image [..., H, W], got shape ", input.shape());
  const int64_t h = input.size(-2), w = input.size(-1);
  const int64_t ph = h + 2 * padding_, pw = w + 2 * padding_;
  MINIDL_CHECK(size_ <= ph && size_ <= pw, "RandomCrop: a ", size_, " x ", size_, " crop does not fit a ", h, " x ",
               w, " image padded by ", padding_);
  Shape padded_shape = input.shape();
  padded_shape[padded_shape.size() - 2] = ph;
  padded_shape[padded_shape.size() - 1] = pw;
  Tensor padded = zeros(padded_shape, input.dtype(), input.device());
  Tensor inner = slice(slice(padded, -2, padding_, padding_ + h), -1, padding_, padding_ + w);
  copy_(inner, input);
  const int64_t top = draw(std::uniform_int_distribution<int64_t>(0, ph - size_));
  const int64_t left = draw(std::uniform_int_distribution<int64_t>(0, pw - size_));
  return slice(slice(padded, -2, top, top + size_), -1, left, left + size_).contiguous();
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  MINIDL_CHECK(p >= 0 && p <= 1, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::operator()(Tensor input) {
  MINIDL_CHECK(input.dim() >= 1, "RandomHorizontalFlip: expected an image [..., W], got a 0-d tensor");
  if (!(draw(std::uniform_real_distribution<double>(0, 1)) < p_)) return input;
  const int64_t w = input.size(-1);
  std::vector<int64_t> reversed(static_cast<size_t>(w));
  for (int64_t i = 0; i < w; ++i) reversed[static_cast<size_t>(i)] = w - 1 - i;
  return index_select(input, input.dim() - 1, Tensor::from_vector(reversed).to(input.device()));
}

Example<> Stack<Example<>>::apply_batch(std::vector<Example<>> examples) {
  MINIDL_CHECK(!examples.empty(), "Stack: cannot stack an empty batch");
  std::vector<Tensor> data, target;
  data.reserve(examples.size());
  target.reserve(examples.size());
  for (Example<>& e : examples) {
    data.push_back(std::move(e.data));
    target.push_back(std::move(e.target));
  }
  return {stack(data), stack(target)};
}

Tensor Stack<Tensor>::apply_batch(std::vector<Tensor> tensors) {
  MINIDL_CHECK(!tensors.empty(), "Stack: cannot stack an empty batch");
  return stack(tensors);
}

}  // namespace minidl::data::transforms
