#!/usr/bin/env python3
"""Fits the polynomial of GELU's normal CDF for 16-bit storage (ops/cuda/elementwise.cu).

erfc(z) = t * exp(P(t) - z^2) with t = 1 / (1 + z / 2), z >= 0. P is smooth on t in (0, 1]; this fits
it by least squares on Chebyshev nodes for z in [0, 10] (|x| = z * sqrt(2) up to 14, past which the
kernel's exp2 flushes to zero) and prints its coefficients in powers of t, with the largest error of
the fit as a relative error of erfc. Needs numpy.

    python3 scripts/fit_gelu_cdf.py [degree]
"""
import math
import sys

import numpy as np
from numpy.polynomial import chebyshev, polynomial


def log_ratio(t):  # P(t) = ln(erfc(z) / t) + z^2
    z = 2.0 / t - 2.0
    return np.array([math.log(math.erfc(zz) / tt) + zz * zz for zz, tt in zip(z, t)])


def main():
    degree = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    lo = 1.0 / (1.0 + 10.0 / 2.0)
    nodes = np.cos(np.pi * (np.arange(4000) + 0.5) / 4000)
    t = lo + (1.0 - lo) * (nodes + 1.0) / 2.0
    fit = chebyshev.chebfit(nodes, log_ratio(t), degree)
    # From u = 2 (t - lo) / (1 - lo) - 1 back to powers of t.
    coefs = polynomial.Polynomial(chebyshev.cheb2poly(fit))(polynomial.Polynomial([-1.0 - 2.0 * lo / (1.0 - lo),
                                                                                   2.0 / (1.0 - lo)])).coef
    check = np.linspace(lo, 1.0, 40001)
    error = np.abs(polynomial.polyval(check, coefs) - log_ratio(check)).max()
    print(f"degree {degree}, largest relative error of erfc {error:.2e}")
    print(", ".join(f"{c:.9e}" for c in coefs))


if __name__ == "__main__":
    main()
