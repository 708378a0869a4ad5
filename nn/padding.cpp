#include "nn/padding.h"

#include <sstream>

#include "ops/pad.h"

namespace minidl::nn {

PadLayerBase::PadLayerBase(const char* layer, size_t dims, const char* mode, const std::vector<int64_t>& padding,
                           double value)
    : layer_(layer), dims_(dims), mode_(mode), padding_(padding), value_(value) {
  std::ostringstream given;
  minidl::operator<<(given, Shape(padding));
  MINIDL_CHECK(padding.size() == 2 * dims, layer, ": expected ", 2 * dims, " pads (",
               dims == 1 ? "{left, right}" : "{left, right, top, bottom}", ") or one for every side, got ", given.str());
}

Tensor PadLayerBase::forward(const Tensor& input) {
  MINIDL_CHECK(input.defined(), layer_, ": the input is undefined");
  const int64_t d = static_cast<int64_t>(dims_);
  if (std::string(mode_) == "constant") {
    MINIDL_CHECK(input.dim() >= d, layer_, ": expected an input of at least ", d, " dims, got shape ", input.shape());
  } else {
    MINIDL_CHECK(input.dim() == d + 1 || input.dim() == d + 2, layer_, ": expected a ", d + 1, "D or ", d + 2,
                 "D input (", d == 1 ? "[C, W] or [N, C, W]" : "[C, H, W] or [N, C, H, W]", "), got ", input.dim(),
                 "D input of shape ", input.shape());
  }
  return pad(input, padding_, mode_, value_);
}

std::string PadLayerBase::extra_repr() const {
  std::ostringstream os;
  os << "padding=";
  minidl::operator<<(os, Shape(padding_));
  if (std::string(layer_).starts_with("ConstantPad")) os << ", value=" << value_;
  return os.str();
}

}  // namespace minidl::nn
