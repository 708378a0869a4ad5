#pragma once
// Parameter initialization, in place, from the global seeded generator (PyTorch's nn::init).
#include "core/tensor.h"

namespace minidl::nn::init {

/// Which side of a weight the variance is kept on: inputs (fan_in, the forward) or outputs (the backward).
enum class FanMode { FanIn, FanOut };
/// The nonlinearity a layer feeds, for calculate_gain.
enum class Nonlinearity { Linear, Sigmoid, Tanh, ReLU, LeakyReLU };

/// Fan-in of a weight: size(1) times the receptive field (kh*kw for a conv weight).
int64_t fan_in(const Tensor& weight);
/// Fan-out of a weight: size(0) times the receptive field.
int64_t fan_out(const Tensor& weight);
/// PyTorch's recommended gains: 1 (linear, sigmoid), 5/3 (tanh), sqrt(2) (relu),
/// sqrt(2 / (1 + slope^2)) (leaky_relu with negative slope `param`).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

/// U(-bound, bound) with bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a): PyTorch's
/// kaiming_uniform_. Linear and Conv2d use a = sqrt(5) with leaky_relu.   kaiming_uniform_(w, std::sqrt(5.0));
void kaiming_uniform_(Tensor& weight, double a = 0, FanMode mode = FanMode::FanIn,
                      Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
/// N(0, std^2) with std = gain / sqrt(fan).   kaiming_normal_(conv->weight, 0, FanMode::FanOut, Nonlinearity::ReLU);
void kaiming_normal_(Tensor& weight, double a = 0, FanMode mode = FanMode::FanIn,
                     Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
/// U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot).   xavier_uniform_(fc->weight);
void xavier_uniform_(Tensor& weight, double gain = 1);
/// N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
void xavier_normal_(Tensor& weight, double gain = 1);
void uniform_(Tensor& tensor, double low, double high);
void normal_(Tensor& tensor, double mean = 0, double stddev = 1);
/// N(mean, std^2) restricted to [a, b] (values drawn by the inverse CDF, so none fall outside), as
/// PyTorch's trunc_normal_.   trunc_normal_(embedding, 0, 0.02, -0.04, 0.04);
void trunc_normal_(Tensor& tensor, double mean = 0, double stddev = 1, double a = -2, double b = 2);
/// A (semi-)orthogonal matrix times gain, from the QR decomposition of a normal draw, as PyTorch's
/// orthogonal_: rows orthonormal when size(0) <= numel / size(0), columns otherwise; dims past 1
/// are flattened.   orthogonal_(lstm->weight_hh_l0);
void orthogonal_(Tensor& tensor, double gain = 1);
void constant_(Tensor& tensor, double value);
void zeros_(Tensor& tensor);
void ones_(Tensor& tensor);

}  // namespace minidl::nn::init
