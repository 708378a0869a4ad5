// select(x, dim, i) = narrow(x, dim, i, 1) squeezed at dim, so its gradient comes from those two.
#include "ops/select.h"

#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  MINIDL_CHECK(x.dim() >= 1, "select: cannot select from a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "select");
  const int64_t size = x.size(dim);
  MINIDL_CHECK(index >= -size && index < size, "select: index ", index, " out of range for tensor of size ",
               x.shape(), " at dimension ", dim);
  if (index < 0) index += size;
  return squeeze(narrow(x, dim, index, 1), dim);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  MINIDL_CHECK(x.dim() >= 1, "unbind: cannot unbind a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(x.size(dim)));
  for (int64_t i = 0; i < x.size(dim); ++i) out.push_back(select(x, dim, i));
  return out;
}

}  // namespace minidl
