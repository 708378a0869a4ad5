// minidl as an installed package: a custom op with its own backward (squareplus.h) and a custom module
// (residual_block.h), both checked against central differences in float64, then trained briefly on
// random data. Exits non-zero when a check fails.
#include <cstdio>
#include <iostream>
#include <vector>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "residual_block.h"
#include "squareplus.h"

using namespace minidl;

static bool passed(const char* what, const GradcheckResult& result) {
  std::printf("gradcheck %-14s %s\n", what, result ? "ok" : ("FAILED: " + result.message).c_str());
  return result.ok;
}

int main() {
  manual_seed(0);
  bool ok = passed("squareplus", gradcheck([](const std::vector<Tensor>& in) { return squareplus(in[0]); },
                                           {randn({4, 5}, kFloat64).requires_grad_()}));
  ResidualBlock block(6, 16);
  block->to(kFloat64);
  ok &= passed("ResidualBlock", gradcheck([&](const std::vector<Tensor>& in) { return block(in[0]); },
                                          {randn({3, 6}, kFloat64).requires_grad_()}));

  // Regression onto squareplus of a random linear map, by a model that ends in squareplus itself.
  Tensor x = randn({256, 8});
  Tensor y = squareplus(matmul(x, randn({8, 1})));
  nn::Sequential model(nn::Linear(8, 32), ResidualBlock(32, 64), nn::Linear(32, 1));
  std::cout << *model << "\n";
  optim::Adam optimizer(model->parameters(), optim::AdamOptions(1e-2));
  float first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    optimizer.zero_grad();
    Tensor loss = nn::functional::mse_loss(squareplus(model(x)), y);
    loss.backward();
    optimizer.step();
    last = loss.item<float>();
    if (step == 0) first = last;
  }
  const bool learned = last < 0.1f * first;
  std::printf("training: mse %.4f -> %.4f %s\n", first, last, learned ? "ok" : "FAILED: expected a tenfold drop");
  return ok && learned ? 0 : 1;
}
