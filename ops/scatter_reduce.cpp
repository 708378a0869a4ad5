// scatter_reduce, as torch.scatter_reduce: every element of src is combined into x at the position
// index names along dim, by "sum", "prod", "mean", "amax" or "amin", with x's own value taking part
// (include_self) or not. Sum and mean are scatter_add; the product, maximum and minimum run
// Kernels::scatter_reduce, in index order on both devices. The gradients are PyTorch's: mean divides
// by the count, amax and amin share the gradient evenly among the elements equal to the result, and
// prod divides the result by each element, with zeros handled exactly (where one element is 0 it
// takes the product of the others; where two are, every element gets 0).
#include <string>

#include "core/autograd.h"
#include "ops/arithmetic.h"
#include "ops/compare.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/gather_scatter.h"
#include "ops/kernels.h"
#include "ops/logical.h"

namespace minidl {

namespace {

enum class Reduce { kSum, kProd, kMean, kAmax, kAmin };

Reduce parse_reduce(std::string_view name) {
  if (name == "sum") return Reduce::kSum;
  if (name == "prod") return Reduce::kProd;
  if (name == "mean") return Reduce::kMean;
  if (name == "amax") return Reduce::kAmax;
  if (name == "amin") return Reduce::kAmin;
  MINIDL_FAIL("scatter_reduce: expected reduce \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\", got \"", name, "\"");
}

// base with src combined in by the kernel's product, maximum or minimum.
Tensor combined(const Tensor& base, int64_t dim, const Tensor& index, const Tensor& src, ScanOp op) {
  Tensor out = base.clone();
  kernels_for(out.device()).scatter_reduce(src, dim, index, out, op);
  return out;
}

// d out / d e for each element e taking part in a product, from the number of zeros `zeros` and the
// product of the nonzero elements `nonzero_product` at its target, and the result `out` there.
Tensor product_factor(const Tensor& e, const Tensor& out, const Tensor& zeros, const Tensor& nonzero_product) {
  return where(ne(e, 0), where(eq(zeros, 0), out / e, 0.0), where(eq(zeros, 1), nonzero_product, 0.0));
}

}  // namespace

Tensor scatter_reduce(const Tensor& x_in, int64_t dim, const Tensor& index_in, const Tensor& src_in,
                      std::string_view reduce_name, bool include_self) {
  const char* op = "scatter_reduce";
  const Reduce reduce = parse_reduce(reduce_name);
  check_same_device(op, {x_in, index_in, src_in});
  MINIDL_CHECK(src_in.dtype() == x_in.dtype(), op, ": expected src of the input's dtype ", x_in.dtype(), ", got ",
               src_in.dtype());
  MINIDL_CHECK(x_in.dtype() != kBool, op, ": expected a floating or integral input, got bool");
  auto as_1d = [](const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; };
  const Tensor x = as_1d(x_in), src = as_1d(src_in);
  const Tensor index = detail::checked_scatter_geometry(op, x, dim, as_1d(index_in), &src);
  Tensor out, hit, count;
  {
    NoGradGuard no_grad;
    const Tensor xd = x.detach(), sd = src.detach();
    // The targeted positions, which matter only where x does not take part there.
    if (!include_self) hit = scatter(zeros(x.shape(), kBool, x.device()), dim, index, true);
    // Where x does not take part, a targeted position starts from the identity of the sum or the
    // product, or from one of its own src elements for the maximum and minimum (taking part twice
    // changes neither; integers have no infinity to start from).
    const bool extreme = reduce == Reduce::kAmax || reduce == Reduce::kAmin;
    const Tensor base = include_self ? xd
                        : extreme    ? scatter(xd, dim, index, sd)
                                     : where(hit, Scalar(reduce == Reduce::kProd ? 1 : 0), xd);
    switch (reduce) {
      case Reduce::kSum: out = scatter_add(base, dim, index, sd); break;
      case Reduce::kMean: {
        count = scatter_add(include_self ? ones_like(xd) : zeros_like(xd), dim, index, ones_like(sd));
        count = clamp(count, Scalar(1));  // an untargeted position keeps x: its sum over a count of 1
        const Tensor sum = scatter_add(base, dim, index, sd);
        out = is_floating(x.dtype()) ? div(sum, count) : div(sum, count, "floor");
        break;
      }
      case Reduce::kProd: out = combined(base, dim, index, sd, ScanOp::Prod); break;
      case Reduce::kAmax: out = combined(base, dim, index, sd, ScanOp::Max); break;
      case Reduce::kAmin: out = combined(base, dim, index, sd, ScanOp::Min); break;
    }
  }
  if (autograd::needs_recording({x, src})) {
    const Tensor xs = x.detach(), ss = src.detach(), os = out.detach();
    autograd::record("ScatterReduceBackward0", out, {x, src}, {xs, ss, os},
                     [=](const Tensor& g, const std::vector<bool>&) {
      Tensor gx, gs;
      switch (reduce) {
        case Reduce::kSum:
          gx = include_self ? g : masked_fill(g, hit, 0.0);
          gs = gather(g, dim, index);
          break;
        case Reduce::kMean: {
          const Tensor share = g / count;
          gx = include_self ? share : masked_fill(g, hit, 0.0);
          gs = gather(share, dim, index);
          break;
        }
        case Reduce::kAmax:
        case Reduce::kAmin: {
          // Every element equal to the result shares its gradient evenly.
          const Tensor x_takes = include_self ? eq(xs, os) : logical_not(hit);
          const Tensor src_takes = eq(ss, gather(os, dim, index));
          const Tensor takers = scatter_add(x_takes.to(g.dtype()), dim, index, src_takes.to(g.dtype()));
          const Tensor share = g / takers;
          gx = where(x_takes, share, 0.0);
          gs = where(src_takes, gather(share, dim, index), 0.0);
          break;
        }
        case Reduce::kProd: {
          Tensor zeros_at, nonzero_product;
          {
            NoGradGuard no_grad;
            const Tensor x_zero = include_self ? eq(xs, 0) : zeros(xs.shape(), kBool, xs.device());
            zeros_at = scatter_add(x_zero.to(g.dtype()), dim, index, eq(ss, 0).to(g.dtype()));
            const Tensor base = include_self ? where(x_zero, 1.0, xs) : where(hit, 1.0, xs);
            nonzero_product = combined(base, dim, index, where(eq(ss, 0), 1.0, ss), ScanOp::Prod);
          }
          gx = include_self ? g * product_factor(xs, os, zeros_at, nonzero_product) : masked_fill(g, hit, 0.0);
          gs = gather(g, dim, index) * product_factor(ss, gather(os, dim, index), gather(zeros_at, dim, index),
                                                      gather(nonzero_product, dim, index));
          break;
        }
      }
      return std::vector<Tensor>{gx, gs};
    });
  }
  return x_in.dim() == 0 ? out.reshape({}) : out;
}

Tensor& scatter_reduce_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                        bool include_self) {
  return x.copy_(scatter_reduce(x, dim, index, src, reduce, include_self));
}

}  // namespace minidl
