#!/usr/bin/env python3
"""Fits the polynomial of GELU's normal CDF for 16-bit storage (ops/cuda/elementwise.cu).

erfc(z) = t * exp(P(t) - z^2) with t = 1 / (1 + z / 2), z >= 0. P is smooth on t in (0, 1]; this fits
it by least squares on Chebyshev nodes for z in [0, 10] (|x| = z * sqrt(2) up to 14, past which the
kernel's exp2 flushes to zero) and prints its coefficients in powers of t, with the largest error of
the fit as a relative error of erfc. Then it emulates the kernel's formula and
0.5 x (1 + erf(x / sqrt 2)) in float32 (erf rounded from double, the reciprocal and exp2 exact, so an
emulation, not the GPU's bits) on 400,000 normal inputs of standard deviation 2, and prints how many
of their bfloat16 and float16 roundings differ from the correctly rounded GELU, and the largest
distance from it in bfloat16 units on a grid over [-12, 8]. Needs numpy.

    python3 scripts/fit_gelu_cdf.py [degree]
"""
import math
import sys

import numpy as np
from numpy.polynomial import chebyshev, polynomial

f32 = np.float32


def log_ratio(t):  # P(t) = ln(erfc(z) / t) + z^2
    z = 2.0 / t - 2.0
    return np.array([math.log(math.erfc(zz) / tt) + zz * zz for zz, tt in zip(z, t)])


def fit(degree):
    lo = 1.0 / (1.0 + 10.0 / 2.0)
    nodes = np.cos(np.pi * (np.arange(4000) + 0.5) / 4000)
    t = lo + (1.0 - lo) * (nodes + 1.0) / 2.0
    cheb = chebyshev.chebfit(nodes, log_ratio(t), degree)
    # From u = 2 (t - lo) / (1 - lo) - 1 back to powers of t.
    coefs = polynomial.Polynomial(chebyshev.cheb2poly(cheb))(polynomial.Polynomial([-1.0 - 2.0 * lo / (1.0 - lo),
                                                                                    2.0 / (1.0 - lo)])).coef
    check = np.linspace(lo, 1.0, 40001)
    return coefs, np.abs(polynomial.polyval(check, coefs) - log_ratio(check)).max()


def kernel_gelu(x, coefs):  # normal_cdf_16bit's steps, each rounded to float32
    log2e = 1.0 / math.log(2.0)
    c = [f32((coefs[0] - math.log(2.0)) * log2e)] + [f32(k * log2e) for k in coefs[1:]]
    t = (f32(1) / (np.abs(x) * f32(0.5 * math.sqrt(0.5)) + f32(1)).astype(f32)).astype(f32)
    p = c[-1]
    for k in reversed(c[:-1]):
        p = (p * t + k).astype(f32)
    e = np.exp2((x * x * f32(-0.5 * log2e)).astype(f32) + p).astype(f32)
    cdf = np.where(x >= 0, f32(1) - t * e, t * e).astype(f32)
    return (x * cdf).astype(f32)


def erf_gelu(x):  # 0.5 x (1 + erff(x / sqrt 2)) in float32
    e = np.array([math.erf(v) for v in (x * f32(math.sqrt(0.5))).astype(f32).astype(float)], dtype=f32)
    return (f32(0.5) * x * (f32(1) + e)).astype(f32)


def bfloat16(a):  # round to nearest even, kept as float32
    u = np.asarray(a, f32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(f32)


def float16(a):
    return np.asarray(a, f32).astype(np.float16).astype(f32)


def main():
    degree = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    coefs, error = fit(degree)
    print(f"degree {degree}, largest relative error of erfc {error:.2e}")
    print(", ".join(f"{c:.9e}" for c in coefs))

    x = (np.random.default_rng(0).standard_normal(400000) * 2).astype(f32)
    grid = np.linspace(-12, 8, 20001).astype(f32)
    for name, gelu in (("kernel's formula", lambda v: kernel_gelu(v, coefs)), ("0.5 x (1 + erf)", erf_gelu)):
        y, g = gelu(x), gelu(grid)
        print(f"{name}: bfloat16 {100 * np.mean(bfloat16(y) != bfloat16(exact(x))):.4f}% and float16 "
              f"{100 * np.mean(float16(y) != float16(exact(x))):.4f}% off the correctly rounded GELU; "
              f"on [-12, 8] at most {bfloat16_units(g, exact(grid))} bfloat16 units off")


def exact(x):
    return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(float)]).astype(f32)


def bfloat16_units(a, b):  # the largest distance on the bfloat16 number line
    def ordered(v):
        bits = (bfloat16(v).view(np.uint32) >> 16).astype(np.int64)
        return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)
    return int(np.abs(ordered(a) - ordered(b)).max())


if __name__ == "__main__":
    main()
