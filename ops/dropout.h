#pragma once
#include "core/tensor.h"

namespace minidl {

/// Zeroes each element with probability p and scales the rest by 1/(1-p) when training; the
/// identity otherwise.   dropout(x, 0.5, is_training())
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);

}  // namespace minidl
