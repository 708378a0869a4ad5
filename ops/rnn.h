#pragma once
// Recurrent networks as ops, with libtorch's free functions: torch::lstm, gru, rnn_tanh, rnn_relu
// and their one-step cells. Parameters come as PyTorch lists them: for each layer, and within it
// for each direction (forward, then reverse), w_ih [G*H, I], w_hh [G*H, H], then b_ih [G*H] and
// b_hh [G*H] when has_biases; G = 4 for LSTM (gates i, f, g, o), 3 for GRU (r, z, n), 1 for RNN.
// On CUDA the whole network runs on cuDNN's RNN (one tape entry) where it can; everywhere else it is
// composed of differentiable ops, one GEMM for all time steps' input projections per layer and
// direction, then the recurrent GEMM and the gates step by step.
#include <cstdint>
#include <tuple>
#include <vector>

#include "core/tensor.h"

namespace minidl {

/// Which implementation the multi-layer recurrent ops take on CUDA: Auto takes cuDNN where it can
/// run (float32 / float64, no dropout between layers while training, a build with cuDNN) and the
/// composed ops otherwise; Cudnn insists on cuDNN (an error where it cannot run); Composed always
/// takes the composed ops, the reference cuDNN is tested against. The CPU always composes.
enum class RnnBackend { Auto, Cudnn, Composed };
/// The backend in force (Auto unless set).   if (rnn_backend() == RnnBackend::Composed) ...
RnnBackend rnn_backend();
/// Sets it for the whole process.   set_rnn_backend(RnnBackend::Composed);
void set_rnn_backend(RnnBackend backend);

/// A multi-layer LSTM over input [L, N, I] ([N, L, I] with batch_first) from hx = {h_0, c_0}, each
/// [num_layers * D, N, H] (D = 2 when bidirectional). Returns (output [L, N, D*H] (batch_first:
/// [N, L, D*H]), h_n, c_n). Dropout with probability `dropout` on each layer's output but the last
/// when `train`.   auto [out, h, c] = lstm(x, {h0, c0}, params, true, 2, 0.0, false, false, false);
std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, const std::vector<Tensor>& hx,
                                        const std::vector<Tensor>& params, bool has_biases, int64_t num_layers,
                                        double dropout, bool train, bool bidirectional, bool batch_first);
/// A multi-layer GRU, as lstm with hx = h_0 alone: returns (output, h_n).
///   auto [out, h] = gru(x, h0, params, true, 1, 0.0, false, false, false);
std::tuple<Tensor, Tensor> gru(const Tensor& input, const Tensor& hx, const std::vector<Tensor>& params,
                               bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional,
                               bool batch_first);
/// A multi-layer Elman RNN, h' = tanh(W_ih x + b_ih + W_hh h + b_hh), as gru.
std::tuple<Tensor, Tensor> rnn_tanh(const Tensor& input, const Tensor& hx, const std::vector<Tensor>& params,
                                    bool has_biases, int64_t num_layers, double dropout, bool train,
                                    bool bidirectional, bool batch_first);
/// The same with relu for tanh.
std::tuple<Tensor, Tensor> rnn_relu(const Tensor& input, const Tensor& hx, const std::vector<Tensor>& params,
                                    bool has_biases, int64_t num_layers, double dropout, bool train,
                                    bool bidirectional, bool batch_first);

/// One LSTM step: input [N, I], hx = {h [N, H], c [N, H]}; returns (h', c').
///   auto [h1, c1] = lstm_cell(x, {h, c}, w_ih, w_hh, b_ih, b_hh);
std::tuple<Tensor, Tensor> lstm_cell(const Tensor& input, const std::vector<Tensor>& hx, const Tensor& w_ih,
                                     const Tensor& w_hh, const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
/// One GRU step, PyTorch's formula: r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z likewise,
/// n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h.   h = gru_cell(x, h, w_ih, w_hh);
Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
/// One tanh RNN step: h' = tanh(W_ih x + b_ih + W_hh h + b_hh).
Tensor rnn_tanh_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
/// One relu RNN step.
Tensor rnn_relu_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

}  // namespace minidl
