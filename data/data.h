#pragma once
// Data loading: IDX files, MNIST / Fashion-MNIST, character-level text and the DataLoader.   `#include "data/data.h"`
#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/datasets.h"
#include "data/example.h"
#include "data/idx.h"
#include "data/mnist.h"
#include "data/paths.h"
#include "data/sampler.h"
#include "data/stateless_loader.h"
#include "data/text.h"
#include "data/transforms.h"
