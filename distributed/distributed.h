#pragma once
// Data-parallel training on several GPUs and machines: `#include "distributed/distributed.h"`.
#include "distributed/ddp.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"
