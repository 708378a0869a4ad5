#include "nn/pooling.h"

#include <sstream>

#include "ops/adaptive_max_pool2d.h"
#include "ops/avg_pool2d.h"
#include "ops/conv1d.h"

namespace minidl::nn {

std::string AvgPool2dImpl::extra_repr() const {
  std::string s = "kernel_size=" + repr(options.kernel_size()) +
                  ", stride=" + repr(options.stride().value_or(options.kernel_size())) +
                  ", padding=" + repr(options.padding());
  if (options.ceil_mode()) s += ", ceil_mode=true";
  if (!options.count_include_pad()) s += ", count_include_pad=false";
  return s;
}

Tensor AvgPool2dImpl::forward(const Tensor& input) {
  return avg_pool2d(input, options.kernel_size(), options.stride(), options.padding(), options.ceil_mode(),
                    options.count_include_pad());
}

AdaptiveAvgPool2dImpl::AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options) : options(options) {
  MINIDL_CHECK(options.output_size().h > 0 && options.output_size().w > 0,
               "AdaptiveAvgPool2d: expected a positive output size, got ", options.output_size().h, "x",
               options.output_size().w);
}

std::string AdaptiveAvgPool2dImpl::extra_repr() const { return "output_size=" + repr(options.output_size()); }

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& input) {
  return adaptive_avg_pool2d(input, options.output_size());
}

namespace {

InterpolateOptions interpolate_options(const UpsampleOptions& options) {
  InterpolateOptions o;
  o.mode(options.mode());
  if (options.size()) o.size(*options.size());
  if (options.scale_factor()) o.scale_factor(*options.scale_factor());
  return o;
}

}  // namespace

UpsampleImpl::UpsampleImpl(const UpsampleOptions& options) : options(options) {
  MINIDL_CHECK(options.size().has_value() != options.scale_factor().has_value(),
               "Upsample: expected exactly one of size and scale_factor, got ", options.size() ? "both" : "neither");
  MINIDL_CHECK(options.mode() == "nearest", "Upsample: mode \"", options.mode(),
               "\" is not supported; expected \"nearest\"");
  if (options.size()) {
    MINIDL_CHECK(options.size()->h > 0 && options.size()->w > 0, "Upsample: expected a positive size, got ",
                 options.size()->h, "x", options.size()->w);
  } else {
    MINIDL_CHECK(options.scale_factor()->h > 0 && options.scale_factor()->w > 0,
                 "Upsample: expected positive scale factors, got ", options.scale_factor()->h, "x",
                 options.scale_factor()->w);
  }
}

std::string UpsampleImpl::extra_repr() const {
  std::ostringstream os;
  if (options.size()) os << "size=" << repr(*options.size());
  else os << "scale_factor=[" << options.scale_factor()->h << ", " << options.scale_factor()->w << "]";
  os << ", mode='" << options.mode() << "'";
  return os.str();
}

Tensor UpsampleImpl::forward(const Tensor& input) { return interpolate(input, interpolate_options(options)); }

AdaptiveMaxPool2dImpl::AdaptiveMaxPool2dImpl(const AdaptiveMaxPool2dOptions& options) : options(options) {
  MINIDL_CHECK(options.output_size().h > 0 && options.output_size().w > 0,
               "AdaptiveMaxPool2d: expected a positive output size, got ", options.output_size().h, "x",
               options.output_size().w);
}

std::string AdaptiveMaxPool2dImpl::extra_repr() const { return "output_size=" + repr(options.output_size()); }

Tensor AdaptiveMaxPool2dImpl::forward(const Tensor& input) { return std::get<0>(forward_with_indices(input)); }

std::tuple<Tensor, Tensor> AdaptiveMaxPool2dImpl::forward_with_indices(const Tensor& input) {
  return adaptive_max_pool2d(input, options.output_size());
}

std::string MaxPool1dImpl::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << options.kernel_size() << ", stride=" << options.stride().value_or(options.kernel_size())
     << ", padding=" << options.padding() << ", dilation=" << options.dilation()
     << ", ceil_mode=" << (options.ceil_mode() ? "true" : "false");
  return os.str();
}

Tensor MaxPool1dImpl::forward(const Tensor& input) {
  return max_pool1d(input, options.kernel_size(), options.stride(), options.padding(), options.dilation(),
                    options.ceil_mode());
}

std::string AvgPool1dImpl::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << options.kernel_size() << ", stride=" << options.stride().value_or(options.kernel_size())
     << ", padding=" << options.padding();
  if (options.ceil_mode()) os << ", ceil_mode=true";
  if (!options.count_include_pad()) os << ", count_include_pad=false";
  return os.str();
}

Tensor AvgPool1dImpl::forward(const Tensor& input) {
  return avg_pool1d(input, options.kernel_size(), options.stride(), options.padding(), options.ceil_mode(),
                    options.count_include_pad());
}

}  // namespace minidl::nn
