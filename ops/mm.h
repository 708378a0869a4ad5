#pragma once
// mm and bmm: matmul with libtorch's stricter shape rules (exactly 2-D, exactly 3-D, no broadcasting).
#include "core/tensor.h"

namespace minidl {

/// [n, m] @ [m, p] -> [n, p]; both exactly 2-D.   mm(a, b)
Tensor mm(const Tensor& a, const Tensor& b);
/// [b, n, m] @ [b, m, p] -> [b, n, p]; both exactly 3-D with one batch size.   bmm(q, k.transpose(1, 2))
Tensor bmm(const Tensor& a, const Tensor& b);

}  // namespace minidl
