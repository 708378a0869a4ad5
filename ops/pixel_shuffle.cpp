// pixel_shuffle / pixel_unshuffle. Shapes: [*, C r^2, H, W] <-> [*, C, H r, W r]. The channel dim is
// split into (C, r, r) and the two r's are interleaved with H and W by one permute; the reshapes'
// and the permute's backwards give the gradient.
#include "ops/pixel_shuffle.h"

#include "ops/view.h"

namespace minidl {

namespace {

// The leading (batch) dims of x, before its last three.
Shape leading(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 3); }

// The permutation of the last `tail` dims given by `order`, leaving the leading ones in place.
std::vector<int64_t> permutation(int64_t lead, const std::vector<int64_t>& order) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (int64_t o : order) dims.push_back(lead + o);
  return dims;
}

}  // namespace

Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor) {
  MINIDL_CHECK(x.defined(), "pixel_shuffle: the input is undefined");
  MINIDL_CHECK(x.dim() >= 3, "pixel_shuffle: expected an input of at least 3 dims ([*, C * r^2, H, W]), got shape ",
               x.shape());
  const int64_t r = upscale_factor;
  MINIDL_CHECK(r > 0, "pixel_shuffle: expected a positive upscale_factor, got ", r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  MINIDL_CHECK(c % (r * r) == 0, "pixel_shuffle: expected the channel dim (-3) divisible by upscale_factor^2 = ", r * r,
               ", got input of shape ", x.shape(), " with ", c, " channels");
  const Shape lead = leading(x);
  Shape split = lead;
  split.insert(split.end(), {c / (r * r), r, r, h, w});
  Shape out = lead;
  out.insert(out.end(), {c / (r * r), h * r, w * r});
  // [*, C, r, r, H, W] -> [*, C, H, r, W, r]
  return reshape(permute(reshape(x, split), permutation(static_cast<int64_t>(lead.size()), {0, 3, 1, 4, 2})), out);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor) {
  MINIDL_CHECK(x.defined(), "pixel_unshuffle: the input is undefined");
  MINIDL_CHECK(x.dim() >= 3, "pixel_unshuffle: expected an input of at least 3 dims ([*, C, H * r, W * r]), got shape ",
               x.shape());
  const int64_t r = downscale_factor;
  MINIDL_CHECK(r > 0, "pixel_unshuffle: expected a positive downscale_factor, got ", r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  MINIDL_CHECK(h % r == 0 && w % r == 0, "pixel_unshuffle: expected height and width divisible by downscale_factor ",
               r, ", got input of shape ", x.shape());
  const Shape lead = leading(x);
  Shape split = lead;
  split.insert(split.end(), {c, h / r, r, w / r, r});
  Shape out = lead;
  out.insert(out.end(), {c * r * r, h / r, w / r});
  // [*, C, H, r, W, r] -> [*, C, r, r, H, W]
  return reshape(permute(reshape(x, split), permutation(static_cast<int64_t>(lead.size()), {0, 2, 4, 1, 3})), out);
}

}  // namespace minidl
