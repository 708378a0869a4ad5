#pragma once
// Everything a model author needs: `#include "minidl.h"`.
#include "core/autograd.h"
#include "core/random.h"
#include "core/tensor.h"
#include "core/threads.h"
#include "ops/ops.h"
