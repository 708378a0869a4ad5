#pragma once
// The layers and losses users build models from.
#include "nn/activation.h"
#include "nn/clip_grad.h"
#include "nn/containers.h"
#include "nn/conv2d.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/sequential.h"
