#pragma once
#include "optim/adam.h"
#include "optim/checkpoint.h"
#include "optim/graphed_step.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/reduce_lr_on_plateau.h"
#include "optim/sgd.h"
