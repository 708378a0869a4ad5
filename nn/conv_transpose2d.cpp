#include "nn/conv_transpose2d.h"

#include <cmath>
#include <sstream>

#include "nn/init.h"
#include "ops/conv_transpose2d.h"

namespace minidl::nn {

ConvTranspose2dImpl::ConvTranspose2dImpl(const ConvTranspose2dOptions& options) : options(options) {
  const int64_t in = options.in_channels(), out = options.out_channels(), groups = options.groups();
  const Size2 k = options.kernel_size();
  MINIDL_CHECK(in > 0 && out > 0 && k.h > 0 && k.w > 0,
               "ConvTranspose2d: expected positive channels and kernel size, got in=", in, ", out=", out, ", kernel=(",
               k.h, ", ", k.w, ")");
  MINIDL_CHECK(groups > 0 && in % groups == 0 && out % groups == 0, "ConvTranspose2d: expected groups (", groups,
               ") to be positive and to divide both in_channels (", in, ") and out_channels (", out, ")");
  const Size2 s = options.stride(), d = options.dilation(), op = options.output_padding();
  MINIDL_CHECK(op.h >= 0 && op.w >= 0 && (op.h < s.h || op.h < d.h) && (op.w < s.w || op.w < d.w),
               "ConvTranspose2d: output_padding must be non-negative and smaller than either the stride or the "
               "dilation, got output_padding ", op.h, "x", op.w, " with stride ", s.h, "x", s.w, " and dilation ", d.h,
               "x", d.w);
  weight = register_parameter("weight", Tensor::empty({in, out / groups, k.h, k.w}));
  if (options.bias()) bias = register_parameter("bias", Tensor::empty({out}));
  reset_parameters();
}

void ConvTranspose2dImpl::reset_parameters() {
  // PyTorch's _ConvNd.reset_parameters: fan_in is weight.size(1) * kh * kw, here (out / groups) * kh * kw.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in(weight)));
    init::uniform_(bias, -bound, bound);
  }
}

std::string ConvTranspose2dImpl::extra_repr() const {
  std::ostringstream os;
  os << options.in_channels() << ", " << options.out_channels() << ", kernel_size=" << repr(options.kernel_size())
     << ", stride=" << repr(options.stride());
  if (!(options.padding() == Size2(0))) os << ", padding=" << repr(options.padding());
  if (!(options.output_padding() == Size2(0))) os << ", output_padding=" << repr(options.output_padding());
  if (!(options.dilation() == Size2(1))) os << ", dilation=" << repr(options.dilation());
  if (options.groups() != 1) os << ", groups=" << options.groups();
  if (!options.bias()) os << ", bias=false";
  return os.str();
}

Tensor ConvTranspose2dImpl::run(const Tensor& input, Size2 output_padding) {
  return conv_transpose2d(input, weight, bias, options.stride(), options.padding(), output_padding, options.groups(),
                          options.dilation());
}

Tensor ConvTranspose2dImpl::forward(const Tensor& input) { return run(input, options.output_padding()); }

Tensor ConvTranspose2dImpl::forward(const Tensor& input, Size2 output_size) {
  MINIDL_CHECK(input.defined(), "ConvTranspose2d: input is undefined");
  MINIDL_CHECK(input.dim() == 4, "ConvTranspose2d: expected input of shape [N, C, H, W] (4-D), got shape ",
               input.shape());
  const Size2 k = options.kernel_size(), s = options.stride(), p = options.padding(), d = options.dilation();
  // The smallest output (output_padding 0); output_padding adds up to stride - 1 to it.
  const int64_t min_h = (input.size(2) - 1) * s.h - 2 * p.h + d.h * (k.h - 1) + 1;
  const int64_t min_w = (input.size(3) - 1) * s.w - 2 * p.w + d.w * (k.w - 1) + 1;
  MINIDL_CHECK(output_size.h >= min_h && output_size.h < min_h + s.h && output_size.w >= min_w &&
                   output_size.w < min_w + s.w,
               "ConvTranspose2d: requested output size ", output_size.h, "x", output_size.w, " is not reachable from ",
               "input of shape ", input.shape(), ": expected between ", min_h, "x", min_w, " and ", min_h + s.h - 1,
               "x", min_w + s.w - 1);
  return run(input, Size2(output_size.h - min_h, output_size.w - min_w));
}

}  // namespace minidl::nn
