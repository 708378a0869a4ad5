// bilinear. Shapes: input1 [*, i], input2 [*, j], weight [o, i, j], bias [o] -> [*, o].
// One matmul of input1 [B, i] with the weight laid out as [i, o * j], then a product with input2
// broadcast over o and a sum over j: GEMM-sized work without an [B, o, i, j] intermediate.
#include "ops/bilinear.h"

#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace minidl {

Tensor bilinear(const Tensor& input1, const Tensor& input2, const Tensor& weight, const Tensor& bias) {
  const char* op = "bilinear";
  MINIDL_CHECK(input1.defined() && input2.defined() && weight.defined(), op, ": input1, input2 and weight must be defined");
  check_same_device(op, {input1, input2, weight});
  MINIDL_CHECK(input1.dim() >= 1 && input1.dim() == input2.dim(), op,
               ": expected input1 and input2 of one number of dims (at least 1), got shapes ", input1.shape(), " and ",
               input2.shape());
  for (int64_t d = 0; d + 1 < input1.dim(); ++d)
    MINIDL_CHECK(input1.size(d) == input2.size(d), op, ": expected input1 and input2 with the same leading dims, got shapes ",
                 input1.shape(), " and ", input2.shape());
  MINIDL_CHECK(weight.dim() == 3, op, ": expected a weight [out, in1, in2], got shape ", weight.shape());
  MINIDL_CHECK(input1.size(-1) == weight.size(1), op, ": input1's last dim ", input1.size(-1),
               " does not match the weight's in1 = ", weight.size(1), " (weight of shape ", weight.shape(), ")");
  MINIDL_CHECK(input2.size(-1) == weight.size(2), op, ": input2's last dim ", input2.size(-1),
               " does not match the weight's in2 = ", weight.size(2), " (weight of shape ", weight.shape(), ")");
  if (bias.defined()) {
    check_same_device(op, {weight, bias});
    MINIDL_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, ": expected a bias of shape [", weight.size(0),
                 "], got shape ", bias.shape());
  }
  const int64_t out = weight.size(0), in1 = weight.size(1), in2 = weight.size(2);
  MINIDL_CHECK(in1 > 0 && in2 > 0, op, ": expected a weight with in1, in2 > 0, got shape ", weight.shape());
  Shape result = input1.shape();
  result.back() = out;
  const int64_t rows = input1.numel() / in1;
  Tensor x1 = reshape(input1, {rows, in1}), x2 = reshape(input2, {rows, in2});
  Tensor t = matmul(x1, reshape(permute(weight, {1, 0, 2}), {in1, out * in2}));  // [B, o * j]
  Tensor y = sum(mul(reshape(t, {rows, out, in2}), unsqueeze(x2, 1)), {2});      // [B, o]
  if (bias.defined()) y = add(y, bias);
  return reshape(y, result);
}

}  // namespace minidl
