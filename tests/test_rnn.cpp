// Recurrent layers on the CPU: outputs against a reference written here with plain loops from the
// equations of PyTorch's documentation (torch.nn.LSTM, GRU, RNN), gradients by gradcheck, a short
// training run, and the errors of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "test_util.h"

namespace minidl::rnn_test {

namespace {

using testing::expect_error;

enum class Kind { Tanh, Relu, Lstm, Gru };

int64_t gates(Kind k) { return k == Kind::Lstm ? 4 : k == Kind::Gru ? 3 : 1; }
double sigm(double v) { return 1 / (1 + std::exp(-v)); }

using Params = std::map<std::string, std::vector<double>>;

Params params_of(const nn::Module& m) {
  Params p;
  for (const auto& [name, t] : m.named_parameters()) p[name] = t.to(kFloat64).to_vector<double>();
  return p;
}

struct Ref {
  std::vector<double> out, h, c;  // out [L][N][D*H], h and c [layers*D][N][H]
};

// The network, time step by time step, from the equations: x is [L][N][I], h0 and c0 [layers*D][N][H].
Ref reference(Kind kind, const std::vector<double>& x, int64_t L, int64_t N, int64_t I, int64_t H, int64_t layers,
              bool bidirectional, bool bias, Params p, const std::vector<double>& h0, const std::vector<double>& c0,
              const std::string& prefix = "") {
  const int64_t G = gates(kind), D = bidirectional ? 2 : 1;
  std::vector<double> in = x;
  int64_t in_size = I;
  Ref r;
  r.h.assign(static_cast<size_t>(layers * D * N * H), 0);
  r.c = r.h;
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<double> out(static_cast<size_t>(L * N * D * H));
    for (int64_t d = 0; d < D; ++d) {
      const std::string s = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      const auto& w_ih = p[prefix + "weight_ih" + s];
      const auto& w_hh = p[prefix + "weight_hh" + s];
      const std::vector<double> zero(static_cast<size_t>(G * H), 0.0);
      const auto& b_ih = bias ? p[prefix + "bias_ih" + s] : zero;
      const auto& b_hh = bias ? p[prefix + "bias_hh" + s] : zero;
      EXPECT_EQ(static_cast<int64_t>(w_ih.size()), G * H * in_size) << s;
      for (int64_t n = 0; n < N; ++n) {
        const size_t state_at = static_cast<size_t>(((l * D + d) * N + n) * H);
        std::vector<double> h(h0.begin() + state_at, h0.begin() + state_at + H);
        std::vector<double> c = kind == Kind::Lstm ? std::vector<double>(c0.begin() + state_at, c0.begin() + state_at + H)
                                                   : std::vector<double>(H, 0.0);
        for (int64_t step = 0; step < L; ++step) {
          const int64_t t = d ? L - 1 - step : step;
          std::vector<double> gi(G * H), gh(G * H);
          for (int64_t k = 0; k < G * H; ++k) {
            gi[k] = b_ih[k];
            for (int64_t j = 0; j < in_size; ++j) gi[k] += w_ih[k * in_size + j] * in[(t * N + n) * in_size + j];
            gh[k] = b_hh[k];
            for (int64_t j = 0; j < H; ++j) gh[k] += w_hh[k * H + j] * h[j];
          }
          for (int64_t k = 0; k < H; ++k) {
            switch (kind) {
              case Kind::Tanh: h[k] = std::tanh(gi[k] + gh[k]); break;
              case Kind::Relu: h[k] = std::max(0.0, gi[k] + gh[k]); break;
              case Kind::Lstm: {
                const double i = sigm(gi[k] + gh[k]), f = sigm(gi[H + k] + gh[H + k]);
                const double g = std::tanh(gi[2 * H + k] + gh[2 * H + k]), o = sigm(gi[3 * H + k] + gh[3 * H + k]);
                c[k] = f * c[k] + i * g;
                h[k] = o * std::tanh(c[k]);
                break;
              }
              case Kind::Gru: {
                const double rr = sigm(gi[k] + gh[k]), z = sigm(gi[H + k] + gh[H + k]);
                const double nn = std::tanh(gi[2 * H + k] + rr * gh[2 * H + k]);
                h[k] = (1 - z) * nn + z * h[k];
                break;
              }
            }
            out[static_cast<size_t>((t * N + n) * D * H + d * H + k)] = h[k];
          }
        }
        for (int64_t k = 0; k < H; ++k) {
          r.h[state_at + k] = h[k];
          r.c[state_at + k] = c[k];
        }
      }
    }
    in = out;
    in_size = D * H;
  }
  r.out = in;
  return r;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, const char* what,
                  double tol = 1e-10) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

// [N, L, F] -> [L][N][F] values, or as is when already sequence-major.
std::vector<double> seq_major(const Tensor& t, bool batch_first) {
  return (batch_first ? transpose(t, 0, 1) : t).contiguous().to_vector<double>();
}

struct Case {
  int64_t L = 4, N = 3, I = 5, H = 6, layers = 2;
  bool bidirectional = true, batch_first = false, bias = true, give_state = true;
};

template <class Module>
void check_against_reference(Kind kind, Module& m, const Case& c) {
  m->to(kFloat64);
  const int64_t D = c.bidirectional ? 2 : 1;
  Tensor x = c.batch_first ? randn({c.N, c.L, c.I}, kFloat64) : randn({c.L, c.N, c.I}, kFloat64);
  Tensor h0 = c.give_state ? randn({c.layers * D, c.N, c.H}, kFloat64) : zeros({c.layers * D, c.N, c.H}, kFloat64);
  Tensor c0 = c.give_state ? randn({c.layers * D, c.N, c.H}, kFloat64) : zeros({c.layers * D, c.N, c.H}, kFloat64);
  const Ref r = reference(kind, seq_major(x, c.batch_first), c.L, c.N, c.I, c.H, c.layers, c.bidirectional, c.bias,
                          params_of(*m), h0.to_vector<double>(), c0.to_vector<double>());
  Tensor out, h, cell;
  if constexpr (std::is_same_v<Module, nn::LSTM>) {
    auto [o, state] = c.give_state ? m(x, std::make_tuple(h0, c0)) : m(x);
    out = o;
    std::tie(h, cell) = state;
  } else {
    std::tie(out, h) = c.give_state ? m(x, h0) : m(x);
  }
  EXPECT_EQ(out.shape(), c.batch_first ? Shape({c.N, c.L, D * c.H}) : Shape({c.L, c.N, D * c.H}));
  EXPECT_EQ(h.shape(), Shape({c.layers * D, c.N, c.H}));
  expect_close(seq_major(out, c.batch_first), r.out, "output");
  expect_close(h.contiguous().to_vector<double>(), r.h, "h_n");
  if (kind == Kind::Lstm) expect_close(cell.contiguous().to_vector<double>(), r.c, "c_n");
}

TEST(RnnModules, LstmMatchesEquations) {
  manual_seed(1);
  Case c;
  nn::LSTM m(nn::LSTMOptions(c.I, c.H).num_layers(2).bidirectional(true));
  check_against_reference(Kind::Lstm, m, c);
}

TEST(RnnModules, LstmBatchFirstNoBiasDefaultState) {
  manual_seed(2);
  Case c;
  c.batch_first = true;
  c.bias = false;
  c.give_state = false;
  nn::LSTM m(nn::LSTMOptions(c.I, c.H).num_layers(2).bidirectional(true).batch_first(true).bias(false));
  EXPECT_EQ(m->parameters().size(), 8u);
  check_against_reference(Kind::Lstm, m, c);
}

TEST(RnnModules, GruMatchesEquations) {
  manual_seed(3);
  Case c;
  nn::GRU m(nn::GRUOptions(c.I, c.H).num_layers(2).bidirectional(true));
  check_against_reference(Kind::Gru, m, c);
  Case bf;
  bf.batch_first = true;
  bf.bidirectional = false;
  bf.layers = 3;
  nn::GRU m2(nn::GRUOptions(bf.I, bf.H).num_layers(3).batch_first(true));
  check_against_reference(Kind::Gru, m2, bf);
}

TEST(RnnModules, RnnTanhAndReluMatchEquations) {
  manual_seed(4);
  Case c;
  nn::RNN tanh_rnn(nn::RNNOptions(c.I, c.H).num_layers(2).bidirectional(true));
  check_against_reference(Kind::Tanh, tanh_rnn, c);
  Case bf;
  bf.batch_first = true;
  nn::RNN relu_rnn(nn::RNNOptions(bf.I, bf.H).num_layers(2).bidirectional(true).batch_first(true).nonlinearity(kReLU));
  check_against_reference(Kind::Relu, relu_rnn, bf);
}

TEST(RnnModules, LstmOneStepByHand) {
  // I = H = 1, every weight 0.5, no bias, x = 1, h0 = c0 = 0: every gate's input is 0.5, so
  // i = f = o = sigmoid(0.5) = 0.6224593312, g = tanh(0.5) = 0.4621171573,
  // c = i * g = 0.2876491366, h = o * tanh(c) = 0.6224593312 * 0.2799696461 = 0.1742697187.
  nn::LSTM m(nn::LSTMOptions(1, 1).bias(false));
  {
    NoGradGuard no_grad;
    for (Tensor p : m->parameters()) fill_(p, 0.5);
  }
  auto [out, state] = m(ones({1, 1, 1}));
  EXPECT_NEAR(std::get<1>(state).item<float>(), 0.2876491366f, 1e-6);
  EXPECT_NEAR(out.item<float>(), 0.1742697187f, 1e-6);
}

TEST(RnnModules, ParameterNamesShapesAndInit) {
  manual_seed(5);
  nn::LSTM m(nn::LSTMOptions(3, 5).num_layers(2).bidirectional(true));
  const std::vector<std::pair<std::string, Shape>> expected{
      {"weight_ih_l0", {20, 3}},          {"weight_hh_l0", {20, 5}},          {"bias_ih_l0", {20}},
      {"bias_hh_l0", {20}},               {"weight_ih_l0_reverse", {20, 3}},  {"weight_hh_l0_reverse", {20, 5}},
      {"bias_ih_l0_reverse", {20}},       {"bias_hh_l0_reverse", {20}},       {"weight_ih_l1", {20, 10}},
      {"weight_hh_l1", {20, 5}},          {"bias_ih_l1", {20}},               {"bias_hh_l1", {20}},
      {"weight_ih_l1_reverse", {20, 10}}, {"weight_hh_l1_reverse", {20, 5}}, {"bias_ih_l1_reverse", {20}},
      {"bias_hh_l1_reverse", {20}}};
  const auto named = m->named_parameters();
  ASSERT_EQ(named.size(), expected.size());
  const double bound = 1 / std::sqrt(5.0);
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(named[i].first, expected[i].first);
    EXPECT_EQ(named[i].second.shape(), expected[i].second) << named[i].first;
    for (float v : named[i].second.to_vector<float>()) {
      EXPECT_LE(std::abs(v), bound) << named[i].first;
    }
  }
  EXPECT_EQ(nn::GRU(nn::GRUOptions(3, 5))->named_parameters()[0].second.shape(), Shape({15, 3}));
  EXPECT_EQ(nn::RNN(3, 5)->named_parameters()[1].second.shape(), Shape({5, 5}));
  nn::GRUCell cell(3, 4);
  EXPECT_EQ(cell->weight_ih.shape(), Shape({12, 3}));
  EXPECT_EQ(cell->named_parameters()[3].first, "bias_hh");
}

TEST(RnnModules, UnbatchedInputMatchesBatchOfOne) {
  manual_seed(6);
  nn::LSTM m(nn::LSTMOptions(4, 3).num_layers(2));
  Tensor x = randn({5, 4}), h0 = randn({2, 3}), c0 = randn({2, 3});
  auto [out, state] = m(x, std::make_tuple(h0, c0));
  auto [out1, state1] = m(x.unsqueeze(1), std::make_tuple(h0.unsqueeze(1), c0.unsqueeze(1)));
  EXPECT_EQ(out.shape(), Shape({5, 3}));
  EXPECT_EQ(std::get<0>(state).shape(), Shape({2, 3}));
  EXPECT_EQ(out.to_vector<float>(), out1.to_vector<float>());
  EXPECT_EQ(std::get<1>(state).to_vector<float>(), std::get<1>(state1).to_vector<float>());
  nn::GRU g(nn::GRUOptions(4, 3).batch_first(true));
  auto [gout, gh] = g(x);
  EXPECT_EQ(gout.shape(), Shape({5, 3}));
  EXPECT_EQ(gh.shape(), Shape({1, 3}));
}

TEST(RnnModules, CellsMatchEquations) {
  manual_seed(7);
  const int64_t N = 3, I = 4, H = 5;
  Tensor x = randn({N, I}, kFloat64), h = randn({N, H}, kFloat64), c = randn({N, H}, kFloat64);
  // A cell is one step of a one-layer network; the reference names parameters with "_l0".
  auto as_layer = [](const nn::Module& m) {
    Params p;
    for (const auto& [name, t] : m.named_parameters()) p[name + "_l0"] = t.to_vector<double>();
    return p;
  };
  nn::LSTMCell lc(I, H);
  lc->to(kFloat64);
  auto [h1, c1] = lc(x, std::make_tuple(h, c));
  Ref r = reference(Kind::Lstm, x.to_vector<double>(), 1, N, I, H, 1, false, true, as_layer(*lc), h.to_vector<double>(),
                    c.to_vector<double>());
  expect_close(h1.to_vector<double>(), r.h, "LSTMCell h");
  expect_close(c1.to_vector<double>(), r.c, "LSTMCell c");
  nn::GRUCell gc(I, H);
  gc->to(kFloat64);
  r = reference(Kind::Gru, x.to_vector<double>(), 1, N, I, H, 1, false, true, as_layer(*gc), h.to_vector<double>(), {});
  expect_close(gc(x, h).to_vector<double>(), r.h, "GRUCell");
  nn::RNNCell rc(nn::RNNCellOptions(I, H).nonlinearity(kReLU).bias(false));
  rc->to(kFloat64);
  r = reference(Kind::Relu, x.to_vector<double>(), 1, N, I, H, 1, false, false, as_layer(*rc), h.to_vector<double>(),
                {});
  expect_close(rc(x, h).to_vector<double>(), r.h, "RNNCell");
  // Unbatched: input [I], hx [H].
  Tensor one = narrow(x, 0, 1, 1).squeeze(0), h_one = narrow(h, 0, 1, 1).squeeze(0);
  const std::vector<double> row(r.h.begin() + H, r.h.begin() + 2 * H);
  expect_close(rc(one, h_one).to_vector<double>(), row, "RNNCell unbatched");
  EXPECT_EQ(std::get<0>(lc(one)).shape(), Shape({H}));
}

// The free ops with every parameter as an input, for gradcheck.
Tensor run_flat(Kind kind, const std::vector<Tensor>& in, int64_t layers, bool bidirectional, bool batch_first) {
  const bool lstm = kind == Kind::Lstm;
  const std::vector<Tensor> params(in.begin() + (lstm ? 3 : 2), in.end());
  if (lstm) {
    auto [out, h, c] = minidl::lstm(in[0], {in[1], in[2]}, params, true, layers, 0.0, true, bidirectional, batch_first);
    return cat({out.flatten(), h.flatten(), c.flatten()});
  }
  auto run = kind == Kind::Gru ? minidl::gru : kind == Kind::Tanh ? minidl::rnn_tanh : minidl::rnn_relu;
  auto [out, h] = run(in[0], in[1], params, true, layers, 0.0, true, bidirectional, batch_first);
  return cat({out.flatten(), h.flatten()});
}

template <class Module>
void gradcheck_network(Kind kind, Module m, int64_t L, int64_t N, int64_t I, int64_t H, int64_t layers, bool bidir,
                       bool batch_first) {
  m->to(kFloat64);
  const int64_t D = bidir ? 2 : 1;
  std::vector<Tensor> in{batch_first ? randn({N, L, I}, kFloat64) : randn({L, N, I}, kFloat64),
                         randn({layers * D, N, H}, kFloat64)};
  if (kind == Kind::Lstm) in.push_back(randn({layers * D, N, H}, kFloat64));
  for (const Tensor& p : m->parameters()) in.push_back(p.detach().clone());
  for (Tensor& t : in) t.requires_grad_();
  auto r = gradcheck([&](const std::vector<Tensor>& v) { return run_flat(kind, v, layers, bidir, batch_first); }, in);
  EXPECT_TRUE(r) << r.message;
}

TEST(RnnGradcheck, Lstm) {
  manual_seed(8);
  gradcheck_network(Kind::Lstm, nn::LSTM(nn::LSTMOptions(2, 2).num_layers(2).bidirectional(true)), 3, 2, 2, 2, 2,
                    true, false);
}

TEST(RnnGradcheck, Gru) {
  manual_seed(9);
  gradcheck_network(Kind::Gru, nn::GRU(nn::GRUOptions(2, 2).num_layers(2).bidirectional(true)), 3, 2, 2, 2, 2, true,
                    true);
}

TEST(RnnGradcheck, RnnTanhAndCells) {
  manual_seed(10);
  gradcheck_network(Kind::Tanh, nn::RNN(nn::RNNOptions(2, 3).num_layers(2)), 3, 2, 2, 3, 2, false, false);
  Tensor x = randn({2, 3}, kFloat64).requires_grad_(), h = randn({2, 2}, kFloat64).requires_grad_();
  Tensor c = randn({2, 2}, kFloat64).requires_grad_();
  Tensor w_ih = randn({8, 3}, kFloat64).requires_grad_(), w_hh = randn({8, 2}, kFloat64).requires_grad_();
  Tensor b = randn({8}, kFloat64).requires_grad_();
  auto r = gradcheck(
      [](const std::vector<Tensor>& v) {
        auto [h1, c1] = lstm_cell(v[0], {v[1], v[2]}, v[3], v[4], v[5]);
        return cat({h1.flatten(), c1.flatten()});
      },
      {x, h, c, w_ih, w_hh, b});
  EXPECT_TRUE(r) << r.message;
  Tensor gw_ih = randn({6, 3}, kFloat64).requires_grad_(), gw_hh = randn({6, 2}, kFloat64).requires_grad_();
  Tensor gb_ih = randn({6}, kFloat64).requires_grad_(), gb_hh = randn({6}, kFloat64).requires_grad_();
  r = gradcheck([](const std::vector<Tensor>& v) { return gru_cell(v[0], v[1], v[2], v[3], v[4], v[5]); },
                {x, h, gw_ih, gw_hh, gb_ih, gb_hh});
  EXPECT_TRUE(r) << r.message;
}

TEST(RnnTraining, LstmLearnsToSumASequence) {
  manual_seed(11);
  struct Net : nn::Module {
    Net() : lstm(nn::LSTMOptions(1, 16).batch_first(true)), head(16, 1) {
      register_module("lstm", lstm);
      register_module("head", head);
    }
    Tensor forward(const Tensor& x) override {
      auto [out, state] = lstm(x);
      return head(std::get<0>(state).squeeze(0));  // the last hidden state
    }
    nn::LSTM lstm;
    nn::Linear head;
  };
  auto net = std::make_shared<Net>();
  optim::Adam opt(net->parameters(), optim::AdamOptions(0.01));
  // Inputs from U(-1, 1): a target of variance 6/3 = 2, which predicting its mean (0) leaves as
  // the loss; learning the sum takes the loss far below it.
  auto batch_loss = [&] {
    Tensor x = uniform({32, 6, 1}, -1, 1);
    Tensor target = sum(x, {1});  // [32, 1]
    return mse_loss(net->forward(x), target);
  };
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    opt.zero_grad();
    Tensor loss = batch_loss();
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item<float>();
    last = loss.item<float>();
  }
  EXPECT_GT(first, 1.0);
  EXPECT_LT(last, 0.1) << "first " << first;
}

TEST(RnnModules, DropoutBetweenLayersOnlyWhenTraining) {
  manual_seed(12);
  nn::GRU m(nn::GRUOptions(3, 4).num_layers(2).dropout(0.5));
  Tensor x = randn({5, 2, 3});
  m->eval();
  const auto a = std::get<0>(m(x)).to_vector<float>(), b = std::get<0>(m(x)).to_vector<float>();
  EXPECT_EQ(a, b);
  m->train();
  const auto t = std::get<0>(m(x)).to_vector<float>();
  EXPECT_NE(t, a);
  // One layer has no layer to drop between: training changes nothing.
  nn::GRU one(nn::GRUOptions(3, 4).dropout(0.5));
  const auto u = std::get<0>(one(x)).to_vector<float>();
  one->eval();
  EXPECT_EQ(std::get<0>(one(x)).to_vector<float>(), u);
}

TEST(RnnErrors, BadShapes) {
  nn::LSTM lstm(nn::LSTMOptions(3, 4).num_layers(2));
  expect_error([&] { lstm(randn({2, 2, 2, 3})); }, {"LSTM", "2 dimensions", "3", "[2, 2, 2, 3]"});
  expect_error([&] { lstm(randn({5, 2, 7})); }, {"LSTM", "3 features", "[5, 2, 7]"});
  expect_error([&] { lstm(randn({5, 2, 3}), std::make_tuple(randn({1, 2, 4}), randn({2, 2, 4}))); },
               {"LSTM", "h_0", "[2, 2, 4]", "[1, 2, 4]"});
  expect_error([&] { lstm(randn({5, 2, 3}), std::make_tuple(randn({2, 2, 4}), randn({2, 3, 4}))); },
               {"c_0", "[2, 2, 4]", "[2, 3, 4]"});
  expect_error([&] { lstm(randn({5, 3}), std::make_tuple(randn({2, 1, 4}), randn({2, 1, 4}))); },
               {"h_0", "[2, 4]", "unbatched"});
  nn::GRU gru(nn::GRUOptions(3, 4).bidirectional(true));
  expect_error([&] { gru(randn({5, 2, 3}), randn({1, 2, 4})); }, {"GRU", "hx", "[2, 2, 4]", "[1, 2, 4]"});
  expect_error([&] { nn::RNN(nn::RNNOptions(0, 4)); }, {"RNN", "positive"});
  nn::LSTMCell cell(3, 4);
  expect_error([&] { cell(randn({2, 5})); }, {"LSTMCell", "3 features"});
  expect_error([&] { cell(randn({2, 3}), std::make_tuple(randn({2, 5}), randn({2, 4}))); }, {"LSTMCell", "[2, 4]"});
  nn::GRUCell gcell(3, 4);
  expect_error([&] { gcell(randn({2, 2, 3})); }, {"GRUCell", "1 dimension"});
  // The free ops check what they are given too.
  Tensor w_ih = randn({4, 3}), w_hh = randn({4, 4});
  expect_error([&] { rnn_tanh(randn({5, 2, 3}), zeros({1, 2, 4}), {w_ih}, false, 1, 0, false, false, false); },
               {"rnn_tanh", "2 parameters"});
  expect_error([&] { rnn_tanh(randn({5, 2, 3}), zeros({1, 2, 4}), {w_ih, randn({5, 4})}, false, 1, 0, false, false,
                              false); },
               {"rnn_tanh", "w_hh", "[4, 4]", "[5, 4]"});
  expect_error([&] { rnn_tanh(randn({5, 2, 3}, kFloat64), zeros({1, 2, 4}, kFloat64), {w_ih, w_hh}, false, 1, 0,
                              false, false, false); },
               {"rnn_tanh", "dtype"});
  expect_error([&] { lstm_cell(randn({2, 3}), {zeros({2, 4})}, randn({16, 3}), randn({16, 4})); },
               {"lstm_cell", "hx"});
}

}  // namespace

}  // namespace minidl::rnn_test
