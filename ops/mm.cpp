// mm and bmm check their stricter shapes, then run matmul (and take its gradient).
#include "ops/mm.h"

#include "ops/autocast_policy.h"
#include "ops/matmul.h"

namespace minidl {

Tensor mm(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(mm, mm, a, b);
  MINIDL_CHECK(a.dim() == 2, "mm: expected self to be a 2-D matrix, got a ", a.dim(), "-d tensor of shape ", a.shape());
  MINIDL_CHECK(b.dim() == 2, "mm: expected mat2 to be a 2-D matrix, got a ", b.dim(), "-d tensor of shape ", b.shape());
  MINIDL_CHECK(a.size(1) == b.size(0), "mm: mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
               " and ", b.size(0), "x", b.size(1), ")");
  return matmul(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  MINIDL_AUTOCAST(bmm, bmm, a, b);
  MINIDL_CHECK(a.dim() == 3, "bmm: expected self to be a 3-D tensor, got ", a.dim(), "-d of shape ", a.shape());
  MINIDL_CHECK(b.dim() == 3, "bmm: expected mat2 to be a 3-D tensor, got ", b.dim(), "-d of shape ", b.shape());
  MINIDL_CHECK(a.size(0) == b.size(0), "bmm: expected one batch size, got ", a.size(0), " and ", b.size(0));
  MINIDL_CHECK(a.size(2) == b.size(1), "bmm: expected mat2's size 1 (", b.size(1), ") to equal self's size 2 (",
               a.size(2), "), got shapes ", a.shape(), " and ", b.shape());
  return matmul(a, b);
}

}  // namespace minidl
