// conv1d, max_pool1d, avg_pool1d. Each runs its 2-d op on the input with a height of one (an
// unsqueezed dim 2, and a kernel of height one): the 2-d kernels, cuDNN paths and backwards are
// then the 1-d ones, exactly, with nothing new to test per device. Groups, which conv2d lacks,
// are a cat of one convolution per group along the channels.
#include "ops/conv1d.h"

#include "ops/autocast_policy.h"
#include "ops/avg_pool2d.h"
#include "ops/conv2d.h"
#include "ops/max_pool2d.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace {

// [N, C, L] -> [N, C, 1, L]; [C, L] -> [1, C, 1, L]. The second says whether a batch was added.
std::pair<Tensor, bool> as_image(const char* op, const Tensor& x) {
  MINIDL_CHECK(x.defined(), op, ": x is undefined");
  MINIDL_CHECK(x.dim() == 2 || x.dim() == 3, op, ": expected x of shape [N, C, L] or [C, L], got shape ", x.shape(),
               " (", x.dim(), "-D)");
  const bool batched = x.dim() == 3;
  return {unsqueeze(batched ? x : unsqueeze(x, 0), 2), !batched};
}

Tensor from_image(const Tensor& y, bool unbatched) {
  Tensor out = squeeze(y, 2);
  return unbatched ? squeeze(out, 0) : out;
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  MINIDL_AUTOCAST(conv1d, conv1d, x, weight, bias, stride, padding, dilation, groups);
  auto [image, unbatched] = as_image("conv1d", x);
  MINIDL_CHECK(weight.defined() && weight.dim() == 3, "conv1d: expected weight of shape [O, C / groups, k], got ",
               weight.defined() ? weight.shape() : Shape{});
  MINIDL_CHECK(groups >= 1 && image.size(1) % groups == 0 && weight.size(0) % groups == 0, "conv1d: groups = ", groups,
               " must divide the input channels (", image.size(1), ") and the output channels (", weight.size(0), ")");
  MINIDL_CHECK(weight.size(1) * groups == image.size(1), "conv1d: expected weight of shape [O, ", image.size(1) / groups,
               ", k] for ", image.size(1), " input channels in ", groups, " groups, got weight of shape ", weight.shape());
  Tensor w = unsqueeze(weight, 2);
  if (groups == 1)
    return from_image(conv2d(image, w, bias, Size2(1, stride), Size2(0, padding), Size2(1, dilation)), unbatched);
  const int64_t in_per = image.size(1) / groups, out_per = weight.size(0) / groups;
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < groups; ++g)
    parts.push_back(conv2d(narrow(image, 1, g * in_per, in_per), narrow(w, 0, g * out_per, out_per),
                           bias.defined() ? narrow(bias, 0, g * out_per, out_per) : Tensor(), Size2(1, stride),
                           Size2(0, padding), Size2(1, dilation)));
  return from_image(cat(parts, 1), unbatched);
}

Tensor max_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride, int64_t padding,
                  int64_t dilation, bool ceil_mode) {
  auto [image, unbatched] = as_image("max_pool1d", x);
  return from_image(max_pool2d(image, Size2(1, kernel_size), Size2(1, stride.value_or(kernel_size)), Size2(0, padding),
                               Size2(1, dilation), ceil_mode),
                    unbatched);
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel_size, std::optional<int64_t> stride, int64_t padding, bool ceil_mode,
                  bool count_include_pad) {
  auto [image, unbatched] = as_image("avg_pool1d", x);
  return from_image(avg_pool2d(image, Size2(1, kernel_size), Size2(1, stride.value_or(kernel_size)), Size2(0, padding),
                               ceil_mode, count_include_pad),
                    unbatched);
}

}  // namespace minidl
