#include "nn/rnn.h"

#include <cmath>
#include <sstream>

#include "nn/init.h"
#include "ops/creation.h"
#include "ops/rnn.h"
#include "ops/view.h"

namespace minidl::nn {

namespace {

int64_t gates_of(int mode) { return mode == 2 ? 4 : mode == 3 ? 3 : 1; }

void check_sizes(const char* op, int64_t input_size, int64_t hidden_size) {
  MINIDL_CHECK(input_size > 0 && hidden_size > 0, op, ": expected positive input_size and hidden_size, got ",
               input_size, " and ", hidden_size);
}

template <class Options>
detail::RNNOptionsBase base_of(int mode, const Options& o) {
  detail::RNNOptionsBase b;
  b.mode = mode;
  b.input_size = o.input_size();
  b.hidden_size = o.hidden_size();
  b.num_layers = o.num_layers();
  b.bias = o.bias();
  b.batch_first = o.batch_first();
  b.dropout = o.dropout();
  b.bidirectional = o.bidirectional();
  return b;
}

int rnn_mode(const RNNNonlinearity& n) { return std::holds_alternative<enumtype::kReLU>(n) ? 0 : 1; }

}  // namespace

namespace detail {

RNNImplBase::RNNImplBase(const RNNOptionsBase& o) : options_base(o) {
  const char* op = o.mode == 2 ? "LSTM" : o.mode == 3 ? "GRU" : "RNN";
  check_sizes(op, o.input_size, o.hidden_size);
  MINIDL_CHECK(o.num_layers >= 1, op, ": expected num_layers >= 1, got ", o.num_layers);
  MINIDL_CHECK(o.dropout >= 0 && o.dropout <= 1, op, ": expected dropout in [0, 1], got ", o.dropout);
  const int64_t directions = o.bidirectional ? 2 : 1, width = gates_of(o.mode) * o.hidden_size;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    const int64_t in = l == 0 ? o.input_size : directions * o.hidden_size;
    for (int64_t d = 0; d < directions; ++d) {
      const std::string suffix = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      flat_weights_.push_back(register_parameter("weight_ih" + suffix, Tensor::empty({width, in})));
      flat_weights_.push_back(register_parameter("weight_hh" + suffix, Tensor::empty({width, o.hidden_size})));
      if (o.bias) {
        flat_weights_.push_back(register_parameter("bias_ih" + suffix, Tensor::empty({width})));
        flat_weights_.push_back(register_parameter("bias_hh" + suffix, Tensor::empty({width})));
      }
    }
  }
  reset_parameters();
}

void RNNImplBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(options_base.hidden_size));
  for (Tensor& w : flat_weights_) init::uniform_(w, -bound, bound);
}

std::vector<std::vector<Tensor>> RNNImplBase::all_weights() const {
  const size_t per = options_base.bias ? 4 : 2;
  std::vector<std::vector<Tensor>> out;
  for (size_t i = 0; i < flat_weights_.size(); i += per)
    out.emplace_back(flat_weights_.begin() + static_cast<std::ptrdiff_t>(i),
                     flat_weights_.begin() + static_cast<std::ptrdiff_t>(i + per));
  return out;
}

std::string RNNImplBase::extra_repr() const {
  const RNNOptionsBase& o = options_base;
  std::ostringstream os;
  os << "input_size=" << o.input_size << ", hidden_size=" << o.hidden_size << ", num_layers=" << o.num_layers
     << ", bias=" << (o.bias ? "true" : "false") << ", batch_first=" << (o.batch_first ? "true" : "false")
     << ", dropout=" << o.dropout << ", bidirectional=" << (o.bidirectional ? "true" : "false");
  if (o.mode == 0) os << ", nonlinearity=relu";
  return os.str();
}

std::pair<Tensor, bool> RNNImplBase::prepare(const char* op, const Tensor& input,
                                             const std::vector<std::pair<const char*, Tensor*>>& hx) const {
  const RNNOptionsBase& o = options_base;
  MINIDL_CHECK(input.defined(), op, ": input is undefined");
  MINIDL_CHECK(input.dim() == 2 || input.dim() == 3, op,
               ": expected input of 2 dimensions (unbatched [L, I]) or 3 ([L, N, I], or [N, L, I] with batch_first), "
               "got shape ",
               input.shape());
  MINIDL_CHECK(input.size(-1) == o.input_size, op, ": expected input with ", o.input_size,
               " features (input_size) in its last dimension, got shape ", input.shape());
  const bool unbatched = input.dim() == 2;
  const int64_t batch_dim = o.batch_first ? 0 : 1;
  Tensor x = unbatched ? unsqueeze(input, batch_dim) : input;
  const int64_t states = o.num_layers * (o.bidirectional ? 2 : 1);
  const Shape expected = unbatched ? Shape{states, o.hidden_size} : Shape{states, x.size(batch_dim), o.hidden_size};
  for (const auto& [name, h] : hx) {
    if (!h->defined()) continue;
    MINIDL_CHECK(h->shape() == expected, op, ": expected ", name, " of shape ", expected, " (",
                 unbatched ? "[num_layers * directions, hidden_size] for unbatched input"
                           : "[num_layers * directions, batch, hidden_size]",
                 "), got ", h->shape());
    if (unbatched) *h = unsqueeze(*h, 1);
  }
  return {x, unbatched};
}

Tensor RNNImplBase::zero_state(const Tensor& input) const {
  const RNNOptionsBase& o = options_base;
  const int64_t batch = input.size(o.batch_first ? 0 : 1);
  return zeros({o.num_layers * (o.bidirectional ? 2 : 1), batch, o.hidden_size}, input.dtype(), input.device());
}

RNNCellImplBase::RNNCellImplBase(int64_t input_size, int64_t hidden_size, bool bias, int64_t gates)
    : input_size_(input_size), hidden_size_(hidden_size), bias_(bias) {
  check_sizes(gates == 4 ? "LSTMCell" : gates == 3 ? "GRUCell" : "RNNCell", input_size, hidden_size);
  weight_ih = register_parameter("weight_ih", Tensor::empty({gates * hidden_size, input_size}));
  weight_hh = register_parameter("weight_hh", Tensor::empty({gates * hidden_size, hidden_size}));
  if (bias) {
    bias_ih = register_parameter("bias_ih", Tensor::empty({gates * hidden_size}));
    bias_hh = register_parameter("bias_hh", Tensor::empty({gates * hidden_size}));
  }
  reset_parameters();
}

void RNNCellImplBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size_));
  for (Tensor* w : {&weight_ih, &weight_hh, &bias_ih, &bias_hh})
    if (w->defined()) init::uniform_(*w, -bound, bound);
}

std::string RNNCellImplBase::extra_repr() const {
  std::ostringstream os;
  os << input_size_ << ", " << hidden_size_ << ", bias=" << (bias_ ? "true" : "false");
  return os.str();
}

std::pair<Tensor, bool> RNNCellImplBase::prepare(const char* op, const Tensor& input,
                                                 const std::vector<std::pair<const char*, Tensor*>>& hx) const {
  MINIDL_CHECK(input.defined(), op, ": input is undefined");
  MINIDL_CHECK(input.dim() == 1 || input.dim() == 2, op,
               ": expected input of 1 dimension (unbatched [I]) or 2 ([N, I]), got shape ", input.shape());
  MINIDL_CHECK(input.size(-1) == input_size_, op, ": expected input with ", input_size_,
               " features (input_size) in its last dimension, got shape ", input.shape());
  const bool unbatched = input.dim() == 1;
  Tensor x = unbatched ? unsqueeze(input, 0) : input;
  const Shape expected = unbatched ? Shape{hidden_size_} : Shape{x.size(0), hidden_size_};
  for (const auto& [name, h] : hx) {
    if (!h->defined()) continue;
    MINIDL_CHECK(h->shape() == expected, op, ": expected ", name, " of shape ", expected, ", got ", h->shape());
    if (unbatched) *h = unsqueeze(*h, 0);
  }
  return {x, unbatched};
}

}  // namespace detail

RNNImpl::RNNImpl(const RNNOptions& options)
    : RNNImplBase(base_of(rnn_mode(options.nonlinearity()), options)), options(options) {}

std::tuple<Tensor, Tensor> RNNImpl::forward(const Tensor& input, Tensor hx) {
  const auto& o = options_base;
  auto [x, unbatched] = prepare("RNN", input, {{"hx", &hx}});
  if (!hx.defined()) hx = zero_state(x);
  auto run = o.mode == 0 ? rnn_relu : rnn_tanh;
  auto [out, h] =
      run(x, hx, flat_weights_, o.bias, o.num_layers, o.dropout, is_training(), o.bidirectional, o.batch_first);
  if (unbatched) return {squeeze(out, o.batch_first ? 0 : 1), squeeze(h, 1)};
  return {out, h};
}

LSTMImpl::LSTMImpl(const LSTMOptions& options) : RNNImplBase(base_of(2, options)), options(options) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTMImpl::forward(const Tensor& input,
                                                                 std::optional<std::tuple<Tensor, Tensor>> hx_opt) {
  const auto& o = options_base;
  Tensor h0, c0;
  if (hx_opt) {
    std::tie(h0, c0) = *hx_opt;
    MINIDL_CHECK(h0.defined() && c0.defined(), "LSTM: expected hx = (h_0, c_0) with both defined");
  }
  auto [x, unbatched] = prepare("LSTM", input, {{"h_0", &h0}, {"c_0", &c0}});
  if (!h0.defined()) {
    h0 = zero_state(x);
    c0 = zero_state(x);
  }
  auto [out, h, c] =
      lstm(x, {h0, c0}, flat_weights_, o.bias, o.num_layers, o.dropout, is_training(), o.bidirectional, o.batch_first);
  if (unbatched) return {squeeze(out, o.batch_first ? 0 : 1), {squeeze(h, 1), squeeze(c, 1)}};
  return {out, {h, c}};
}

GRUImpl::GRUImpl(const GRUOptions& options) : RNNImplBase(base_of(3, options)), options(options) {}

std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, Tensor hx) {
  const auto& o = options_base;
  auto [x, unbatched] = prepare("GRU", input, {{"hx", &hx}});
  if (!hx.defined()) hx = zero_state(x);
  auto [out, h] =
      gru(x, hx, flat_weights_, o.bias, o.num_layers, o.dropout, is_training(), o.bidirectional, o.batch_first);
  if (unbatched) return {squeeze(out, o.batch_first ? 0 : 1), squeeze(h, 1)};
  return {out, h};
}

RNNCellImpl::RNNCellImpl(const RNNCellOptions& options)
    : RNNCellImplBase(options.input_size(), options.hidden_size(), options.bias(), 1), options(options) {}

Tensor RNNCellImpl::forward(const Tensor& input, Tensor hx) {
  auto [x, unbatched] = prepare("RNNCell", input, {{"hx", &hx}});
  if (!hx.defined()) hx = zeros({x.size(0), hidden_size_}, x.dtype(), x.device());
  const bool relu = std::holds_alternative<enumtype::kReLU>(options.nonlinearity());
  Tensor h = (relu ? rnn_relu_cell : rnn_tanh_cell)(x, hx, weight_ih, weight_hh, bias_ih, bias_hh);
  return unbatched ? squeeze(h, 0) : h;
}

LSTMCellImpl::LSTMCellImpl(const LSTMCellOptions& options)
    : RNNCellImplBase(options.input_size(), options.hidden_size(), options.bias(), 4), options(options) {}

std::tuple<Tensor, Tensor> LSTMCellImpl::forward(const Tensor& input,
                                                 std::optional<std::tuple<Tensor, Tensor>> hx_opt) {
  Tensor h0, c0;
  if (hx_opt) {
    std::tie(h0, c0) = *hx_opt;
    MINIDL_CHECK(h0.defined() && c0.defined(), "LSTMCell: expected hx = (h, c) with both defined");
  }
  auto [x, unbatched] = prepare("LSTMCell", input, {{"h", &h0}, {"c", &c0}});
  if (!h0.defined()) {
    h0 = zeros({x.size(0), hidden_size_}, x.dtype(), x.device());
    c0 = zeros({x.size(0), hidden_size_}, x.dtype(), x.device());
  }
  auto [h, c] = lstm_cell(x, {h0, c0}, weight_ih, weight_hh, bias_ih, bias_hh);
  if (unbatched) return {squeeze(h, 0), squeeze(c, 0)};
  return {h, c};
}

GRUCellImpl::GRUCellImpl(const GRUCellOptions& options)
    : RNNCellImplBase(options.input_size(), options.hidden_size(), options.bias(), 3), options(options) {}

Tensor GRUCellImpl::forward(const Tensor& input, Tensor hx) {
  auto [x, unbatched] = prepare("GRUCell", input, {{"hx", &hx}});
  if (!hx.defined()) hx = zeros({x.size(0), hidden_size_}, x.dtype(), x.device());
  Tensor h = gru_cell(x, hx, weight_ih, weight_hh, bias_ih, bias_hh);
  return unbatched ? squeeze(h, 0) : h;
}

}  // namespace minidl::nn
