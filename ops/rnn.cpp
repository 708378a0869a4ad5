// Recurrent networks (ops/rnn.h). Shapes (L steps, N batch, I inputs, H hidden, D directions, G gates):
//   input  [L, N, I]             ([N, L, I] with batch_first: transposed on the way in and out)
//   hx, cx [layers*D, N, H]      entry layer*D + d belongs to layer `layer`, direction d (1: reverse)
//   output [L, N, D*H]           the last layer's hidden states, both directions side by side
// Composed path, per layer and direction:
//   gi     [L, N, G*H] = x @ w_ih^T + b_ih, one GEMM for all steps (it needs no recurrence)
//   step t: gates [N, G*H] = gi[t] + h @ w_hh^T + b_hh, then the cell's nonlinearities
// GRU keeps b_hn inside r * (W_hn h + b_hn), so its hidden projection is added gate by gate.
// The cuDNN path computes the same function as one tape entry whose output packs y, h_n and c_n
// side by side in one buffer; the three results are views of it.
#include "ops/rnn.h"

#include <atomic>

#include "core/autograd.h"
#include "ops/creation.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/matmul.h"
#include "ops/slice.h"
#include "ops/view.h"

namespace minidl {

namespace {

std::atomic<RnnBackend> backend_setting{RnnBackend::Auto};

// cuDNN's numbering of the cells (Kernels::RnnConfig::cell).
enum class Cell { RnnRelu = 0, RnnTanh = 1, Lstm = 2, Gru = 3 };

int64_t gates_of(Cell cell) { return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1; }

const char* name_of(Cell cell) {
  switch (cell) {
    case Cell::RnnRelu: return "rnn_relu";
    case Cell::RnnTanh: return "rnn_tanh";
    case Cell::Lstm: return "lstm";
    case Cell::Gru: return "gru";
  }
  return "rnn";
}

// h' (and c' for LSTM) from the input projection gi [N, G*H] (b_ih included) and the state.
std::pair<Tensor, Tensor> step(Cell cell, const Tensor& gi, const Tensor& h, const Tensor& c, const Tensor& w_hh,
                               const Tensor& b_hh) {
  const Tensor gh = linear(h, w_hh, b_hh);
  switch (cell) {
    case Cell::RnnRelu: return {relu(gi + gh), Tensor()};
    case Cell::RnnTanh: return {tanh(gi + gh), Tensor()};
    case Cell::Lstm: {
      const std::vector<Tensor> g = chunk(gi + gh, 4, 1);
      const Tensor i = sigmoid(g[0]), f = sigmoid(g[1]), cand = tanh(g[2]), o = sigmoid(g[3]);
      Tensor c_next = f * c + i * cand;
      Tensor h_next = o * tanh(c_next);
      return {h_next, c_next};
    }
    case Cell::Gru: {
      const std::vector<Tensor> x = chunk(gi, 3, 1), s = chunk(gh, 3, 1);
      const Tensor r = sigmoid(x[0] + s[0]), z = sigmoid(x[1] + s[1]);
      const Tensor n = tanh(x[2] + r * s[2]);
      return {n + z * (h - n), Tensor()};  // (1 - z) * n + z * h
    }
  }
  return {};
}

struct DirectionResult {
  Tensor output, h, c;  // output [L, N, H]
};

// One layer in one direction over x [L, N, I].
DirectionResult run_direction(Cell cell, const Tensor& x, Tensor h, Tensor c, const Tensor& w_ih, const Tensor& w_hh,
                              const Tensor& b_ih, const Tensor& b_hh, bool reverse) {
  const int64_t steps = x.size(0), batch = x.size(1), width = w_ih.size(0);
  const Tensor gi = linear(x.reshape({steps * batch, x.size(2)}), w_ih, b_ih).reshape({steps, batch, width});
  std::vector<Tensor> outputs(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    auto [h_next, c_next] = step(cell, narrow(gi, 0, t, 1).reshape({batch, width}), h, c, w_hh, b_hh);
    h = h_next;
    c = c_next;
    outputs[static_cast<size_t>(t)] = h;
  }
  return {stack(outputs, 0), h, c};
}

struct Network {
  Cell cell;
  bool has_biases;
  int64_t num_layers, directions;
  double dropout;
  bool train;
  int64_t hidden = 0;
  // The parameters of layer l, direction d: w_ih, w_hh, b_ih, b_hh (undefined without biases).
  std::vector<Tensor> params_of(const std::vector<Tensor>& params, int64_t l, int64_t d) const {
    const int64_t per = has_biases ? 4 : 2;
    const size_t at = static_cast<size_t>((l * directions + d) * per);
    return {params[at], params[at + 1], has_biases ? params[at + 2] : Tensor(), has_biases ? params[at + 3] : Tensor()};
  }
};

void check_tensor_shape(const char* op, const char* what, const Tensor& t, const Shape& expected) {
  MINIDL_CHECK(t.defined(), op, ": ", what, " is undefined");
  MINIDL_CHECK(t.shape() == expected, op, ": expected ", what, " of shape ", expected, ", got ", t.shape());
}

// Checks everything the op takes and returns the hidden size.
int64_t check_network(const char* op, Network& net, const Tensor& input, const std::vector<Tensor>& hx,
                      const std::vector<Tensor>& params, bool batch_first) {
  MINIDL_CHECK(net.num_layers >= 1, op, ": expected num_layers >= 1, got ", net.num_layers);
  MINIDL_CHECK(net.dropout >= 0 && net.dropout <= 1, op, ": expected dropout in [0, 1], got ", net.dropout);
  MINIDL_CHECK(input.defined(), op, ": input is undefined");
  MINIDL_CHECK(input.dim() == 3, op, ": expected input of 3 dimensions ([L, N, I], or [N, L, I] with batch_first), got shape ",
               input.shape());
  MINIDL_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got ", input.dtype());
  const int64_t per = net.has_biases ? 4 : 2;
  const int64_t count = net.num_layers * net.directions * per;
  MINIDL_CHECK(static_cast<int64_t>(params.size()) == count, op, ": expected ", count, " parameters (", net.num_layers,
               " layers, ", net.directions, " directions, ", per, " each), got ", params.size());
  MINIDL_CHECK(params[0].defined() && params[0].dim() == 2, op, ": expected w_ih of 2 dimensions [G*H, I]");
  MINIDL_CHECK(params[1].defined() && params[1].dim() == 2, op, ": expected w_hh of 2 dimensions [G*H, H]");
  const int64_t hidden = params[1].size(1), width = gates_of(net.cell) * hidden;
  net.hidden = hidden;
  for (int64_t l = 0; l < net.num_layers; ++l) {
    const int64_t in = l == 0 ? params[0].size(-1) : net.directions * hidden;
    for (int64_t d = 0; d < net.directions; ++d) {
      const auto p = net.params_of(params, l, d);
      check_tensor_shape(op, "w_ih", p[0], {width, in});
      check_tensor_shape(op, "w_hh", p[1], {width, hidden});
      if (net.has_biases) {
        check_tensor_shape(op, "b_ih", p[2], {width});
        check_tensor_shape(op, "b_hh", p[3], {width});
      }
      for (const Tensor& t : p)
        if (t.defined()) {
          MINIDL_CHECK(t.dtype() == input.dtype(), op, ": expected parameters of the input's dtype ", input.dtype(),
                       ", got ", t.dtype());
          check_same_device(op, {input, t});
        }
    }
  }
  const int64_t batch = input.size(batch_first ? 0 : 1);
  MINIDL_CHECK(input.size(2) == params[0].size(1), op, ": expected input with ", params[0].size(1),
               " features (input_size), got shape ", input.shape(), " (features last)");
  for (const Tensor& h : hx) {
    check_tensor_shape(op, "hx", h, {net.num_layers * net.directions, batch, hidden});
    MINIDL_CHECK(h.dtype() == input.dtype(), op, ": expected hx of the input's dtype ", input.dtype(), ", got ",
                 h.dtype());
    check_same_device(op, {input, h});
  }
  return hidden;
}

// All layers on the composed ops; x is [L, N, I].
std::vector<Tensor> composed(const Network& net, const Tensor& x, const Tensor& hx, const Tensor& cx,
                             const std::vector<Tensor>& params) {
  Tensor layer_input = x;
  std::vector<Tensor> h_n, c_n;
  for (int64_t l = 0; l < net.num_layers; ++l) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < net.directions; ++d) {
      const auto p = net.params_of(params, l, d);
      const int64_t at = l * net.directions + d;
      const Tensor h0 = narrow(hx, 0, at, 1).squeeze(0);
      const Tensor c0 = cx.defined() ? narrow(cx, 0, at, 1).squeeze(0) : Tensor();
      DirectionResult r = run_direction(net.cell, layer_input, h0, c0, p[0], p[1], p[2], p[3], d == 1);
      outputs.push_back(r.output);
      h_n.push_back(r.h);
      if (cx.defined()) c_n.push_back(r.c);
    }
    layer_input = outputs.size() == 1 ? outputs[0] : cat(outputs, 2);
    if (l + 1 < net.num_layers) layer_input = dropout(layer_input, net.dropout, net.train);
  }
  return {layer_input, stack(h_n, 0), cx.defined() ? stack(c_n, 0) : Tensor()};
}

// The cuDNN path; empty where cuDNN cannot run it. x is [L, N, I].
std::vector<Tensor> cudnn_path(const char* op, const Network& net, const Tensor& x, const Tensor& hx, const Tensor& cx,
                               const std::vector<Tensor>& params) {
  const RnnBackend backend = rnn_backend();
  if (backend == RnnBackend::Composed || x.device().is_cpu()) return {};
  if (net.train && net.dropout > 0 && net.num_layers > 1) {
    MINIDL_CHECK(backend != RnnBackend::Cudnn, op,
                 ": RnnBackend::Cudnn cannot run dropout between layers in training (the composed path can)");
    return {};
  }
  const bool lstm = net.cell == Cell::Lstm;
  Kernels::RnnConfig c;
  c.cell = static_cast<int>(net.cell);
  c.input_size = x.size(2);
  c.hidden_size = net.hidden;
  c.num_layers = net.num_layers;
  c.seq_len = x.size(0);
  c.batch = x.size(1);
  c.bidirectional = net.directions == 2;
  c.has_biases = net.has_biases;
  bool record = grad_mode_enabled() && (x.requires_grad() || hx.requires_grad() || (lstm && cx.requires_grad()));
  for (const Tensor& p : params) record = record || (grad_mode_enabled() && p.requires_grad());
  c.training = record;

  Tensor xc, hxc, cxc;
  std::vector<Tensor> pc;
  {
    NoGradGuard no_grad;  // layout plumbing, not graph nodes
    xc = x.contiguous();
    hxc = hx.contiguous();
    if (lstm) cxc = cx.contiguous();
    for (const Tensor& p : params) pc.push_back(p.contiguous());
  }
  const int64_t L = c.seq_len, N = c.batch, DH = net.directions * net.hidden;
  const Shape y_shape{L, N, DH}, h_shape{net.num_layers * net.directions, N, net.hidden};
  const int64_t ny = L * N * DH, nh = shape_numel(h_shape);
  Tensor flat = Tensor::empty({ny + nh + (lstm ? nh : 0)}, x.dtype(), x.device());
  auto piece = [](const Tensor& base, const Shape& shape, int64_t at) {
    return Tensor::make_view(base, shape, contiguous_strides(shape), base.offset() + at);
  };
  Tensor y = piece(flat, y_shape, 0), hy = piece(flat, h_shape, ny), cy = lstm ? piece(flat, h_shape, ny + nh) : Tensor();
  std::vector<Tensor> state;
  if (!kernels_for(x.device()).rnn_cudnn(c, xc, hxc, cxc, pc, y, hy, cy, state)) {
    MINIDL_CHECK(backend != RnnBackend::Cudnn, op, ": RnnBackend::Cudnn, but cuDNN cannot run this network on ",
                 x.device(), " (", x.dtype(), "; a build without cuDNN has no such path)");
    return {};
  }
  if (record) {
    std::vector<Tensor> inputs{x, hx};
    if (lstm) inputs.push_back(cx);
    inputs.insert(inputs.end(), params.begin(), params.end());
    std::vector<Tensor> saved = inputs;
    saved.push_back(flat);
    autograd::record(
        "CudnnRnnBackward0", flat, inputs, saved,
        [c, xc, hxc, cxc, pc, y, state, y_shape, h_shape, ny, nh, lstm, piece](const Tensor& grad,
                                                                            const std::vector<bool>& needs) {
          const Tensor g = grad.contiguous();
          const Tensor dy = piece(g, y_shape, 0), dhy = piece(g, h_shape, ny);
          const Tensor dcy = lstm ? piece(g, h_shape, ny + nh) : Tensor();
          const size_t first_param = lstm ? 3 : 2;
          bool weight_grads = false;
          for (size_t i = first_param; i < needs.size(); ++i) weight_grads = weight_grads || needs[i];
          Tensor dx, dhx, dcx;
          std::vector<Tensor> dparams;
          const bool done = kernels_for(g.device())
                                .rnn_cudnn_backward(c, xc, hxc, cxc, y, dy, dhy, dcy, pc, state, weight_grads, dx, dhx,
                                                    dcx, dparams);
          MINIDL_CHECK(done, "CudnnRnnBackward0: cuDNN's backward did not run");
          std::vector<Tensor> out{dx, dhx};
          if (lstm) out.push_back(dcx);
          for (size_t i = 0; i < pc.size(); ++i) out.push_back(weight_grads ? dparams[i] : Tensor());
          return out;
        });
  }
  std::vector<Tensor> out{narrow(flat, 0, 0, ny).view(y_shape), narrow(flat, 0, ny, nh).view(h_shape)};
  out.push_back(lstm ? narrow(flat, 0, ny + nh, nh).view(h_shape) : Tensor());
  return out;
}

// The multi-layer op: output, h_n and (LSTM) c_n.
std::vector<Tensor> run_network(Cell cell, const Tensor& input, const Tensor& hx, const Tensor& cx,
                                const std::vector<Tensor>& params, bool has_biases, int64_t num_layers, double p,
                                bool train, bool bidirectional, bool batch_first) {
  const char* op = name_of(cell);
  Network net{cell, has_biases, num_layers, bidirectional ? 2 : 1, p, train};
  std::vector<Tensor> states{hx};
  if (cell == Cell::Lstm) states.push_back(cx);
  check_network(op, net, input, states, params, batch_first);
  const Tensor x = batch_first ? transpose(input, 0, 1) : input;
  std::vector<Tensor> out = cudnn_path(op, net, x, hx, cx, params);
  if (out.empty()) out = composed(net, x, hx, cx, params);
  if (batch_first) out[0] = transpose(out[0], 0, 1);
  return out;
}

void check_cell(const char* op, Cell cell, const Tensor& input, const std::vector<Tensor>& hx, const Tensor& w_ih,
                const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  MINIDL_CHECK(input.defined(), op, ": input is undefined");
  MINIDL_CHECK(input.dim() == 2, op, ": expected input of 2 dimensions [N, I], got shape ", input.shape());
  MINIDL_CHECK(w_hh.defined() && w_hh.dim() == 2, op, ": expected w_hh of 2 dimensions [G*H, H]");
  const int64_t hidden = w_hh.size(1), width = gates_of(cell) * hidden;
  check_tensor_shape(op, "w_ih", w_ih, {width, input.size(1)});
  check_tensor_shape(op, "w_hh", w_hh, {width, hidden});
  if (b_ih.defined()) check_tensor_shape(op, "b_ih", b_ih, {width});
  if (b_hh.defined()) check_tensor_shape(op, "b_hh", b_hh, {width});
  for (const Tensor& h : hx) check_tensor_shape(op, "hx", h, {input.size(0), hidden});
}

Tensor simple_cell(Cell cell, const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                   const Tensor& b_ih, const Tensor& b_hh) {
  check_cell(name_of(cell), cell, input, {hx}, w_ih, w_hh, b_ih, b_hh);
  return step(cell, linear(input, w_ih, b_ih), hx, Tensor(), w_hh, b_hh).first;
}

}  // namespace

RnnBackend rnn_backend() { return backend_setting.load(std::memory_order_relaxed); }
void set_rnn_backend(RnnBackend backend) { backend_setting.store(backend, std::memory_order_relaxed); }

std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, const std::vector<Tensor>& hx,
                                        const std::vector<Tensor>& params, bool has_biases, int64_t num_layers,
                                        double dropout, bool train, bool bidirectional, bool batch_first) {
  MINIDL_CHECK(hx.size() == 2, "lstm: expected hx = {h_0, c_0}, got ", hx.size(), " tensors");
  auto out = run_network(Cell::Lstm, input, hx[0], hx[1], params, has_biases, num_layers, dropout, train,
                         bidirectional, batch_first);
  return {out[0], out[1], out[2]};
}

std::tuple<Tensor, Tensor> gru(const Tensor& input, const Tensor& hx, const std::vector<Tensor>& params,
                               bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional,
                               bool batch_first) {
  auto out = run_network(Cell::Gru, input, hx, Tensor(), params, has_biases, num_layers, dropout, train, bidirectional,
                         batch_first);
  return {out[0], out[1]};
}

std::tuple<Tensor, Tensor> rnn_tanh(const Tensor& input, const Tensor& hx, const std::vector<Tensor>& params,
                                    bool has_biases, int64_t num_layers, double dropout, bool train,
                                    bool bidirectional, bool batch_first) {
  auto out = run_network(Cell::RnnTanh, input, hx, Tensor(), params, has_biases, num_layers, dropout, train,
                         bidirectional, batch_first);
  return {out[0], out[1]};
}

std::tuple<Tensor, Tensor> rnn_relu(const Tensor& input, const Tensor& hx, const std::vector<Tensor>& params,
                                    bool has_biases, int64_t num_layers, double dropout, bool train,
                                    bool bidirectional, bool batch_first) {
  auto out = run_network(Cell::RnnRelu, input, hx, Tensor(), params, has_biases, num_layers, dropout, train,
                         bidirectional, batch_first);
  return {out[0], out[1]};
}

std::tuple<Tensor, Tensor> lstm_cell(const Tensor& input, const std::vector<Tensor>& hx, const Tensor& w_ih,
                                     const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  MINIDL_CHECK(hx.size() == 2, "lstm_cell: expected hx = {h, c}, got ", hx.size(), " tensors");
  check_cell("lstm_cell", Cell::Lstm, input, hx, w_ih, w_hh, b_ih, b_hh);
  auto [h, c] = step(Cell::Lstm, linear(input, w_ih, b_ih), hx[0], hx[1], w_hh, b_hh);
  return {h, c};
}

Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                const Tensor& b_hh) {
  return simple_cell(Cell::Gru, input, hx, w_ih, w_hh, b_ih, b_hh);
}

Tensor rnn_tanh_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  return simple_cell(Cell::RnnTanh, input, hx, w_ih, w_hh, b_ih, b_hh);
}

Tensor rnn_relu_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  return simple_cell(Cell::RnnRelu, input, hx, w_ih, w_hh, b_ih, b_hh);
}

}  // namespace minidl
