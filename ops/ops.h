#pragma once
// Every differentiable operation, one header per op family.
#include "ops/conv2d.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/gradcheck.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/max_pool2d.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/view.h"
