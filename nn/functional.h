#pragma once
// nn::functional: the ops as PyTorch users call them, e.g. nn::functional::cross_entropy(logits, target).
#include "ops/conv2d.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/max_pool2d.h"
#include "ops/softmax.h"
#include "ops/view.h"

namespace minidl::nn::functional {
using minidl::conv2d;
using minidl::cross_entropy;
using minidl::dropout;
using minidl::flatten;
using minidl::linear;
using minidl::log_softmax;
using minidl::max_pool2d;
using minidl::mse_loss;
using minidl::nll_loss;
using minidl::relu;
using minidl::sigmoid;
using minidl::softmax;
using minidl::tanh;
}  // namespace minidl::nn::functional
