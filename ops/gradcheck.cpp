// Full-Jacobian check. Analytic rows come from one backward per output element (a one-hot seed);
// numeric columns from central differences, one input element at a time.
#include "ops/gradcheck.h"

#include <cmath>
#include <sstream>

#include "core/autograd.h"
#include "ops/copy.h"
#include "ops/creation.h"

namespace minidl {

namespace {

// The value of element `i` of a float64 tensor on any device, and a way to set it.
double get(const Tensor& t, int64_t i) { return t.to(Device::cpu()).contiguous().data<double>()[i]; }

void set(Tensor& t, int64_t i, double v) {
  Tensor host = t.to(Device::cpu()).contiguous();
  host.data<double>()[i] = v;
  copy_(t, host);
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> inputs,
                          GradcheckOptions options) {
  for (const Tensor& in : inputs) {
    MINIDL_CHECK(!in.defined() || !in.requires_grad() || in.dtype() == kFloat64,
                 "gradcheck: inputs that require grad must be float64 for a meaningful check, got ", in.dtype());
  }
  Tensor out0;
  {
    NoGradGuard no_grad;
    out0 = f(inputs).contiguous();
  }
  MINIDL_CHECK(out0.dtype() == kFloat64, "gradcheck: f must return float64, got ", out0.dtype());
  const int64_t n_out = out0.numel();

  // Analytic Jacobian per input: jac[k][o * numel + i].
  std::vector<std::vector<double>> analytic(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].defined() && inputs[k].requires_grad()) analytic[k].assign(static_cast<size_t>(n_out * inputs[k].numel()), 0);
  }
  for (int64_t o = 0; o < n_out; ++o) {
    for (Tensor& in : inputs)
      if (in.defined() && in.requires_grad()) in.set_grad(Tensor());
    Tensor out = f(inputs);
    MINIDL_CHECK(out.requires_grad(), "gradcheck: the output of f does not depend on any input that requires grad");
    Tensor seed = zeros(out.shape(), kFloat64, out.device());
    set(seed, o, 1.0);
    out.backward(seed);
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (analytic[k].empty()) continue;
      Tensor g = inputs[k].grad();
      if (!g.defined()) continue;  // no path from this input: a zero row
      std::vector<double> gv = g.to_vector<double>();
      for (size_t i = 0; i < gv.size(); ++i) analytic[k][static_cast<size_t>(o) * gv.size() + i] = gv[i];
    }
  }

  GradcheckResult result;
  double worst = -INFINITY;
  NoGradGuard no_grad;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (analytic[k].empty()) continue;
    Tensor& x = inputs[k];
    // Perturb a detached copy so the caller's tensor is left as it was.
    Tensor probe = x.detach().clone();
    std::vector<Tensor> args = inputs;
    args[k] = probe;
    const int64_t n_in = x.numel();
    for (int64_t i = 0; i < n_in; ++i) {
      double orig = get(probe, i);
      set(probe, i, orig + options.eps);
      std::vector<double> plus = f(args).contiguous().to_vector<double>();
      set(probe, i, orig - options.eps);
      std::vector<double> minus = f(args).contiguous().to_vector<double>();
      set(probe, i, orig);
      for (int64_t o = 0; o < n_out; ++o) {
        double numeric = (plus[o] - minus[o]) / (2 * options.eps);
        double a = analytic[k][static_cast<size_t>(o * n_in + i)];
        double excess = std::abs(a - numeric) - (options.atol + options.rtol * std::abs(numeric));
        if (!(excess <= 0) || excess > worst) {
          if (excess > worst || std::isnan(excess)) {
            worst = std::isnan(excess) ? INFINITY : excess;
            std::ostringstream os;
            os << "gradcheck: Jacobian mismatch for input " << k << " (shape " << x.shape() << ") at element " << i
               << ", output element " << o << ": analytic " << a << " vs numeric " << numeric << " (|diff| "
               << std::abs(a - numeric) << " > atol " << options.atol << " + rtol " << options.rtol << " * |numeric|)";
            result.message = os.str();
          }
        }
      }
    }
  }
  result.worst_error = worst;
  result.ok = worst <= 0;
  if (result.ok) result.message = "gradcheck: passed";
  return result;
}

}  // namespace minidl
