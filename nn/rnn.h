#pragma once
// Recurrent layers, as PyTorch's C++ frontend: LSTM, GRU and RNN (multi-layer, bidirectional,
// batch_first, unbatched input) and their one-step cells. Parameters are named and shaped as
// PyTorch's (weight_ih_l0 [G*H, I], weight_hh_l0 [G*H, H], bias_ih_l0, bias_hh_l0, "_reverse" for
// the backward direction) and initialized from U(-1/sqrt(H), 1/sqrt(H)). On CUDA they run on cuDNN
// (ops/rnn.h says when, and how to force the composed path).
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "nn/module.h"
#include "nn/options.h"

namespace minidl {
namespace enumtype {
struct kTanh {};
struct kReLU {};
}  // namespace enumtype
/// The nonlinearities of an Elman RNN, as torch::kTanh and torch::kReLU.
inline constexpr enumtype::kTanh kTanh{};
inline constexpr enumtype::kReLU kReLU{};
}  // namespace minidl

namespace minidl::nn {

using RNNNonlinearity = std::variant<enumtype::kTanh, enumtype::kReLU>;

/// Options of nn::RNN.   nn::RNNOptions(10, 20).num_layers(2).nonlinearity(kReLU)
struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(int64_t, input_size);
  MINIDL_ARG(int64_t, hidden_size);
  MINIDL_ARG(int64_t, num_layers) = 1;
  MINIDL_ARG(RNNNonlinearity, nonlinearity) = kTanh;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(bool, batch_first) = false;
  MINIDL_ARG(double, dropout) = 0.0;
  MINIDL_ARG(bool, bidirectional) = false;
};

/// Options of nn::LSTM.   nn::LSTMOptions(10, 20).num_layers(2).batch_first(true).bidirectional(true)
struct LSTMOptions {
  LSTMOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(int64_t, input_size);
  MINIDL_ARG(int64_t, hidden_size);
  MINIDL_ARG(int64_t, num_layers) = 1;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(bool, batch_first) = false;
  MINIDL_ARG(double, dropout) = 0.0;
  MINIDL_ARG(bool, bidirectional) = false;
};

/// Options of nn::GRU.   nn::GRUOptions(10, 20).dropout(0.2).num_layers(3)
struct GRUOptions {
  GRUOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(int64_t, input_size);
  MINIDL_ARG(int64_t, hidden_size);
  MINIDL_ARG(int64_t, num_layers) = 1;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(bool, batch_first) = false;
  MINIDL_ARG(double, dropout) = 0.0;
  MINIDL_ARG(bool, bidirectional) = false;
};

namespace detail {

/// What the three recurrent layers share: options, parameters and their initialization.
struct RNNOptionsBase {
  int mode = 0;  // 0 relu RNN, 1 tanh RNN, 2 LSTM, 3 GRU
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bias = true, batch_first = false;
  double dropout = 0;
  bool bidirectional = false;
};

class RNNImplBase : public Module {
 public:
  explicit RNNImplBase(const RNNOptionsBase& options);
  /// Redraws every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch.
  void reset_parameters();
  /// The parameters in PyTorch's order (per layer, per direction: w_ih, w_hh, b_ih, b_hh).
  const std::vector<Tensor>& flat_weights() const { return flat_weights_; }
  /// The same grouped per layer and direction, as PyTorch's all_weights.
  std::vector<std::vector<Tensor>> all_weights() const;
  /// Kept for PyTorch's API: parameters stay separate tensors (the cuDNN path packs them per call).
  void flatten_parameters() {}
  std::string extra_repr() const override;

  RNNOptionsBase options_base;

 protected:
  /// Checks input and hx shapes as PyTorch does; returns the input made batched (3-D) and whether
  /// it was unbatched. `hx` is made batched too where given.
  std::pair<Tensor, bool> prepare(const char* op, const Tensor& input,
                                  const std::vector<std::pair<const char*, Tensor*>>& hx) const;
  /// Zeros [num_layers * D, N, H] like `input` (batched).
  Tensor zero_state(const Tensor& input) const;

  std::vector<Tensor> flat_weights_;
};

}  // namespace detail

/// A multi-layer Elman RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh) (or relu).
///   nn::RNN rnn(nn::RNNOptions(10, 20).num_layers(2));  auto [out, h_n] = rnn(x);  // x [L, N, 10]
class RNNImpl : public detail::RNNImplBase {
 public:
  MINIDL_CLONE_FROM_OPTIONS(RNNImpl)
  RNNImpl(int64_t input_size, int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  explicit RNNImpl(const RNNOptions& options);
  /// (output [L, N, D*H], h_n [num_layers*D, N, H]); hx defaults to zeros. Input [L, N, I]
  /// ([N, L, I] with batch_first) or unbatched [L, I] (hx then [num_layers*D, H]).
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {});
  std::string name() const override { return "RNN"; }

  RNNOptions options;
};
MINIDL_MODULE(RNN);

/// A multi-layer LSTM, gates i, f, g, o as PyTorch's.
///   nn::LSTM lstm(nn::LSTMOptions(10, 20).num_layers(2));  auto [out, state] = lstm(x);
///   auto [h_n, c_n] = state;
class LSTMImpl : public detail::RNNImplBase {
 public:
  MINIDL_CLONE_FROM_OPTIONS(LSTMImpl)
  LSTMImpl(int64_t input_size, int64_t hidden_size) : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const LSTMOptions& options);
  /// (output, (h_n, c_n)); hx_opt = (h_0, c_0) defaults to zeros. Shapes as RNN's.
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(const Tensor& input,
                                                         std::optional<std::tuple<Tensor, Tensor>> hx_opt = {});
  std::string name() const override { return "LSTM"; }

  LSTMOptions options;
};
MINIDL_MODULE(LSTM);

/// A multi-layer GRU, gates r, z, n with n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
///   nn::GRU gru(nn::GRUOptions(10, 20).bidirectional(true));  auto [out, h_n] = gru(x, h0);
class GRUImpl : public detail::RNNImplBase {
 public:
  MINIDL_CLONE_FROM_OPTIONS(GRUImpl)
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const GRUOptions& options);
  /// (output, h_n); hx defaults to zeros. Shapes as RNN's.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {});
  std::string name() const override { return "GRU"; }

  GRUOptions options;
};
MINIDL_MODULE(GRU);

/// Options of nn::RNNCell.   nn::RNNCellOptions(10, 20).nonlinearity(kReLU)
struct RNNCellOptions {
  RNNCellOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(int64_t, input_size);
  MINIDL_ARG(int64_t, hidden_size);
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(RNNNonlinearity, nonlinearity) = kTanh;
};

/// Options of nn::LSTMCell.   nn::LSTMCellOptions(10, 20).bias(false)
struct LSTMCellOptions {
  LSTMCellOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(int64_t, input_size);
  MINIDL_ARG(int64_t, hidden_size);
  MINIDL_ARG(bool, bias) = true;
};

/// Options of nn::GRUCell.   nn::GRUCellOptions(10, 20)
struct GRUCellOptions {
  GRUCellOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(int64_t, input_size);
  MINIDL_ARG(int64_t, hidden_size);
  MINIDL_ARG(bool, bias) = true;
};

namespace detail {

/// What the cells share: weight_ih [G*H, I], weight_hh [G*H, H], bias_ih, bias_hh [G*H].
class RNNCellImplBase : public Module {
 public:
  RNNCellImplBase(int64_t input_size, int64_t hidden_size, bool bias, int64_t gates);
  /// Redraws every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
  void reset_parameters();
  std::string extra_repr() const override;

  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  /// input [N, I] or unbatched [I]; hx [N, H] or [H] to match. Returns batched input and whether
  /// it was unbatched; makes hx batched where given.
  std::pair<Tensor, bool> prepare(const char* op, const Tensor& input,
                                  const std::vector<std::pair<const char*, Tensor*>>& hx) const;

  int64_t input_size_, hidden_size_;
  bool bias_;
};

}  // namespace detail

/// One step of an Elman RNN.   nn::RNNCell cell(10, 20);  Tensor h = cell(x, h);  // x [N, 10]
class RNNCellImpl : public detail::RNNCellImplBase {
 public:
  MINIDL_CLONE_FROM_OPTIONS(RNNCellImpl)
  RNNCellImpl(int64_t input_size, int64_t hidden_size) : RNNCellImpl(RNNCellOptions(input_size, hidden_size)) {}
  explicit RNNCellImpl(const RNNCellOptions& options);
  /// h' [N, H] (or [H] for unbatched input); hx defaults to zeros.
  Tensor forward(const Tensor& input, Tensor hx = {});
  std::string name() const override { return "RNNCell"; }

  RNNCellOptions options;
};
MINIDL_MODULE(RNNCell);

/// One LSTM step.   nn::LSTMCell cell(10, 20);  auto [h, c] = cell(x, std::make_tuple(h, c));
class LSTMCellImpl : public detail::RNNCellImplBase {
 public:
  MINIDL_CLONE_FROM_OPTIONS(LSTMCellImpl)
  LSTMCellImpl(int64_t input_size, int64_t hidden_size) : LSTMCellImpl(LSTMCellOptions(input_size, hidden_size)) {}
  explicit LSTMCellImpl(const LSTMCellOptions& options);
  /// (h', c'); hx_opt = (h, c) defaults to zeros.
  std::tuple<Tensor, Tensor> forward(const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx_opt = {});
  std::string name() const override { return "LSTMCell"; }

  LSTMCellOptions options;
};
MINIDL_MODULE(LSTMCell);

/// One GRU step.   nn::GRUCell cell(10, 20);  Tensor h = cell(x, h);
class GRUCellImpl : public detail::RNNCellImplBase {
 public:
  MINIDL_CLONE_FROM_OPTIONS(GRUCellImpl)
  GRUCellImpl(int64_t input_size, int64_t hidden_size) : GRUCellImpl(GRUCellOptions(input_size, hidden_size)) {}
  explicit GRUCellImpl(const GRUCellOptions& options);
  /// h'; hx defaults to zeros.
  Tensor forward(const Tensor& input, Tensor hx = {});
  std::string name() const override { return "GRUCell"; }

  GRUCellOptions options;
};
MINIDL_MODULE(GRUCell);

}  // namespace minidl::nn
