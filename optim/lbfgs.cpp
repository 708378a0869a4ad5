// L-BFGS (Nocedal and Wright, Numerical Optimization, algorithms 7.4 and 3.5-3.6), with PyTorch's
// choices: the first step scaled by 1 / sum|g|, the history updated only where y . s > 1e-10, the
// line search bracketing with cubic interpolation. The parameters are handled as one flat vector:
// its pieces are views of that vector's copies, and the vector ops run on the parameters' device.
#include "optim/lbfgs.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/mm.h"
#include "ops/reduce.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl::optim {

namespace {

double dot_of(const Tensor& a, const Tensor& b) { return dot(a, b).item<double>(); }

// The closure runs with grad mode on, as PyTorch's torch.enable_grad() around it: its backward must
// record even though the step itself does not.
Tensor call(const LossClosure& closure) {
  AutoGradMode grad_on(true);
  Tensor loss = closure();
  MINIDL_CHECK(loss.defined() && loss.numel() == 1, "LBFGS: expected the closure to return the loss (one element), got ",
               loss.defined() ? detail::concat("shape ", loss.shape()) : std::string("an undefined tensor"));
  return loss;
}
double abs_max(const Tensor& v) { return amax(abs(v)).item<double>(); }

// The minimum of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, kept inside
// [lo, hi] (the two points when no bounds are given); their midpoint when the cubic has none.
double cubic_minimum(double x1, double f1, double g1, double x2, double f2, double g2,
                     std::optional<std::pair<double, double>> bounds = std::nullopt) {
  const auto [lo, hi] = bounds.value_or(x1 <= x2 ? std::pair{x1, x2} : std::pair{x2, x1});
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square < 0) return (lo + hi) / 2;
  const double d2 = std::sqrt(d2_square);
  const double at = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                             : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
  return std::min(std::max(at, lo), hi);
}

}  // namespace

LBFGS::LBFGS(std::vector<Tensor> params, LBFGSOptions options)
    : Optimizer({ParamGroup(std::move(params))}, options.lr(), "LBFGS"), options_(options) {
  const std::vector<Tensor>& ps = groups_[0].params;
  for (const Tensor& p : ps) {
    MINIDL_CHECK(is_floating(p.dtype()), "LBFGS: expected floating parameters, got ", p.dtype());
    MINIDL_CHECK(p.dtype() == ps[0].dtype() && p.device() == ps[0].device(),
                 "LBFGS: expected every parameter of one dtype and device, got ", ps[0].dtype(), " on ",
                 ps[0].device(), " and ", p.dtype(), " on ", p.device());
  }
  MINIDL_CHECK(options.max_iter() > 0, "LBFGS: expected max_iter > 0, got ", options.max_iter());
  MINIDL_CHECK(options.history_size() > 0, "LBFGS: expected history_size > 0, got ", options.history_size());
  MINIDL_CHECK(!options.line_search_fn() || *options.line_search_fn() == "strong_wolfe",
               "LBFGS: expected line_search_fn \"strong_wolfe\" or none, got \"", options.line_search_fn().value_or(""),
               "\"");
}

void LBFGS::step() {
  MINIDL_FAIL("LBFGS: step() needs a closure that re-evaluates the model: step([&] { zero_grad(); Tensor loss = ...; "
              "loss.backward(); return loss; })");
}

Tensor LBFGS::flat_grad() const {
  std::vector<Tensor> pieces;
  for (const Tensor& p : groups_[0].params) {
    const Tensor g = p.grad();
    pieces.push_back(g.defined() ? g.reshape({p.numel()}) : zeros({p.numel()}, p.dtype(), p.device()));
  }
  return cat(pieces, 0);
}

void LBFGS::add_to_params(double step, const Tensor& direction) {
  int64_t offset = 0;
  for (Tensor& p : groups_[0].params) {
    const Tensor piece = narrow(direction, 0, offset, p.numel()).reshape(p.shape());
    p.add_(piece, step);
    offset += p.numel();
  }
}

std::vector<Tensor> LBFGS::clone_params() const {
  std::vector<Tensor> out;
  for (const Tensor& p : groups_[0].params) out.push_back(p.detach().clone());
  return out;
}

void LBFGS::set_params(const std::vector<Tensor>& values) {
  for (size_t i = 0; i < values.size(); ++i) groups_[0].params[i].copy_(values[i]);
}

std::pair<double, Tensor> LBFGS::evaluate_at(const LossClosure& closure, const std::vector<Tensor>& start, double step,
                                             const Tensor& direction) {
  {
    NoGradGuard no_grad;
    add_to_params(step, direction);
  }
  const double loss = call(closure).item<double>();
  Tensor grad = flat_grad();
  NoGradGuard no_grad;
  set_params(start);
  return {loss, grad};
}

LBFGS::Search LBFGS::strong_wolfe(const LossClosure& closure, double step, const Tensor& direction, double loss,
                                  const Tensor& grad, double slope) {
  constexpr double c1 = 1e-4, c2 = 0.9;  // sufficient decrease; curvature
  constexpr int64_t max_ls = 25;
  const double tolerance = options_.tolerance_change();
  const double d_norm = abs_max(direction);
  const std::vector<Tensor> start = clone_params();

  // A point of the search: step, loss, gradient, slope along the direction.
  struct Point {
    double t, f;
    Tensor g;
    double gtd;
  };
  auto at = [&](double t) {
    auto [f, g] = evaluate_at(closure, start, t, direction);
    const double gtd = dot_of(g, direction);
    return Point{t, f, g, gtd};
  };
  const Point origin{0, loss, grad, slope};
  Point prev = origin, now = at(step);
  int64_t evals = 1, iter = 0;
  bool done = false;
  std::vector<Point> bracket;

  // Widen until a bracket holds a point that satisfies both conditions.
  while (iter < max_ls) {
    if (now.f > loss + c1 * now.t * slope || (iter > 1 && now.f >= prev.f)) {
      bracket = {prev, now};
      break;
    }
    if (std::abs(now.gtd) <= -c2 * slope) {
      bracket = {now};
      done = true;
      break;
    }
    if (now.gtd >= 0) {
      bracket = {prev, now};
      break;
    }
    const double next = cubic_minimum(prev.t, prev.f, prev.gtd, now.t, now.f, now.gtd,
                                      std::pair{now.t + 0.01 * (now.t - prev.t), now.t * 10});
    prev = now;
    now = at(next);
    ++evals;
    ++iter;
  }
  if (iter == max_ls) bracket = {origin, now};

  // Zoom: shrink the bracket until a point satisfies both conditions.
  bool insufficient_progress = false;
  size_t low = 0, high = 1;
  if (bracket.size() == 2 && bracket[0].f > bracket[1].f) std::swap(low, high);
  while (!done && iter < max_ls) {
    if (std::abs(bracket[1].t - bracket[0].t) * d_norm < tolerance) break;
    double t = cubic_minimum(bracket[0].t, bracket[0].f, bracket[0].gtd, bracket[1].t, bracket[1].f, bracket[1].gtd);
    // Too near an end of the bracket: a step a tenth of its width inside, unless the last one made progress.
    const double hi_t = std::max(bracket[0].t, bracket[1].t), lo_t = std::min(bracket[0].t, bracket[1].t);
    const double eps = 0.1 * (hi_t - lo_t);
    if (std::min(hi_t - t, t - lo_t) < eps) {
      if (insufficient_progress || t >= hi_t || t <= lo_t) {
        t = std::abs(t - hi_t) < std::abs(t - lo_t) ? hi_t - eps : lo_t + eps;
        insufficient_progress = false;
      } else {
        insufficient_progress = true;
      }
    } else {
      insufficient_progress = false;
    }
    const Point p = at(t);
    ++evals;
    ++iter;
    if (p.f > loss + c1 * p.t * slope || p.f >= bracket[low].f) {
      bracket[high] = p;
      low = bracket[0].f <= bracket[1].f ? 0 : 1;
      high = 1 - low;
    } else {
      if (std::abs(p.gtd) <= -c2 * slope) done = true;
      else if (p.gtd * (bracket[high].t - bracket[low].t) >= 0) bracket[high] = bracket[low];
      bracket[low] = p;
    }
  }
  const Point& best = bracket.size() == 1 ? bracket[0] : bracket[low];
  return {best.f, best.g, best.t, evals};
}

Tensor LBFGS::step(const LossClosure& closure) {
  MINIDL_CHECK(static_cast<bool>(closure), "LBFGS: the closure is empty");
  MINIDL_CHECK(groups_.size() == 1, "LBFGS: expected one parameter group (it works on all parameters as one vector), "
               "got ", groups_.size());
  const double lr = *groups_[0].lr;
  const int64_t max_eval = options_.max_eval().value_or(options_.max_iter() * 5 / 4);
  const double tol_grad = options_.tolerance_grad(), tol_change = options_.tolerance_change();

  const Tensor first_loss = call(closure);
  double loss = first_loss.item<double>();
  int64_t evals = 1;
  ++func_evals_;
  Tensor grad = flat_grad();
  if (abs_max(grad) <= tol_grad) return first_loss;

  NoGradGuard no_grad;
  for (int64_t iter = 1; iter <= options_.max_iter(); ++iter) {
    ++n_iter_;
    if (n_iter_ == 1) {
      direction_ = neg(grad);
      old_dirs_.clear();
      old_steps_.clear();
      ro_.clear();
      h_diag_ = 1;
    } else {
      // The curvature pair of the last step, kept when it is positive.
      const Tensor y = grad - prev_flat_grad_, s = direction_ * step_;
      const double ys = dot_of(y, s);
      if (ys > 1e-10) {
        if (static_cast<int64_t>(old_dirs_.size()) == options_.history_size()) {
          old_dirs_.erase(old_dirs_.begin());
          old_steps_.erase(old_steps_.begin());
          ro_.erase(ro_.begin());
        }
        old_dirs_.push_back(y);
        old_steps_.push_back(s);
        ro_.push_back(1 / ys);
        h_diag_ = ys / dot_of(y, y);
      }
      // The two-loop recursion: the inverse Hessian's approximation applied to -grad.
      const size_t n = old_dirs_.size();
      std::vector<double> alpha(n);
      Tensor q = neg(grad);
      for (size_t i = n; i-- > 0;) {
        alpha[i] = dot_of(old_steps_[i], q) * ro_[i];
        q = q - old_dirs_[i] * alpha[i];
      }
      Tensor r = q * h_diag_;
      for (size_t i = 0; i < n; ++i) {
        const double beta = dot_of(old_dirs_[i], r) * ro_[i];
        r = r + old_steps_[i] * (alpha[i] - beta);
      }
      direction_ = r;
    }
    prev_flat_grad_ = grad.clone();
    prev_loss_ = loss;
    step_ = n_iter_ == 1 ? std::min(1.0, 1.0 / sum(abs(grad)).item<double>()) * lr : lr;
    const double slope = dot_of(grad, direction_);
    if (slope > -tol_change) break;  // not a descent direction any more

    int64_t search_evals = 0;
    bool optimal = false;
    if (options_.line_search_fn()) {
      const Search found = strong_wolfe(closure, step_, direction_, loss, grad, slope);
      loss = found.loss;
      grad = found.grad;
      step_ = found.step;
      search_evals = found.evals;
      add_to_params(step_, direction_);
      optimal = abs_max(grad) <= tol_grad;
    } else {
      add_to_params(step_, direction_);
      if (iter != options_.max_iter()) {
        loss = call(closure).item<double>();
        grad = flat_grad();
        optimal = abs_max(grad) <= tol_grad;
        search_evals = 1;
      }
    }
    evals += search_evals;
    func_evals_ += search_evals;

    if (iter == options_.max_iter() || evals >= max_eval || optimal) break;
    if (abs_max(direction_) * std::abs(step_) <= tol_change) break;
    if (std::abs(loss - prev_loss_) < tol_change) break;
  }
  return first_loss;
}

}  // namespace minidl::optim
