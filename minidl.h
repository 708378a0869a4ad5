#pragma once
// Everything a model author needs: `#include "minidl.h"`.
#include "core/anomaly_mode.h"
#include "core/autograd.h"
#include "core/deterministic.h"
#include "core/dlpack.h"
#include "core/random.h"
#include "core/scalar.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "core/type_promotion.h"
#include "ops/ops.h"
