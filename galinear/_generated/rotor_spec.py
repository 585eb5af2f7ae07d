"""Generated from galinear.symbolic.rotor_maths; do not edit by hand.

Regenerate: galinear codegen --all (make codegen). Proved by galinear verify --only rotor_spec.
Plain Python numbers and arithmetic only: numpy, numba and torch read the same values.
"""

#: q = theta**2 below which the series replace the closed forms, per dtype.
SERIES_SWITCH = {'float32': 0.01, 'float64': 0.01}

#: Taylor coefficients in q (lowest first) of cos(theta), sinc(theta) = sin(theta)/theta and
#: d sinc(theta)/dq, per dtype.
COS_SERIES = {'float32': (1.0, -0.5, 0.041666666666666664), 'float64': (1.0, -0.5, 0.041666666666666664, -0.001388888888888889, 2.48015873015873e-05)}
SINC_SERIES = {'float32': (1.0, -0.16666666666666666, 0.008333333333333333), 'float64': (1.0, -0.16666666666666666, 0.008333333333333333, -0.0001984126984126984, 2.7557319223985893e-06)}
DSINC_SERIES = {'float32': (-0.16666666666666666, 0.016666666666666666, -0.0005952380952380953), 'float64': (-0.16666666666666666, 0.016666666666666666, -0.0005952380952380953, 1.1022927689594357e-05, -1.252605419272086e-07)}

#: Truncation error bounds of the series on [0, SERIES_SWITCH] (first omitted term).
COS_ERROR_BOUND = {'float32': 1.388888888888889e-09, 'float64': 2.7557319223985892e-17}
SINC_ERROR_BOUND = {'float32': 1.984126984126984e-10, 'float64': 2.5052108385441717e-18}
DSINC_ERROR_BOUND = {'float32': 1.1022927689594357e-11, 'float64': 9.635426302092969e-20}

#: Power iteration: stop tolerance on |v_new + v| per dtype, most steps per plane.
POWER_TOL = {'float32': 1e-05, 'float64': 1e-10}
POWER_MAX_ITER = 100

#: Power steps of the last plane (its remainder is simple), and the vanishing threshold
#: (POWER_VANISH * eps)**2 of |A^2 v| on the matrix scaled by max|b| (restart or stop).
POWER_LAST_PLANE_STEPS = 1
POWER_VANISH = 64

#: |b ^ b| <= SIMPLE_RTOL[dtype] * |b|**2 counts as a simple bivector (about sqrt(eps)).
SIMPLE_RTOL = {'float32': 0.00048828125, 'float64': 1.4901161193847656e-08}


def horner(coefficients, x):
    """sum_m coefficients[m] * x**m (floats, numpy arrays or torch tensors)."""
    total = coefficients[-1]
    for coefficient in coefficients[-2::-1]:
        total = total * x + coefficient
    return total


def wedge_square(vv, ww, vw):
    """theta**2 = |v ^ w|**2 from |v|**2, |w|**2 and v.w (may round below 0: clamp)."""
    return vv*ww - vw**2


def factor_scalar(cos_theta, sinc_theta, vw):
    """a of the factor R = a + s v w, s = sinc(theta), from cos(theta), sinc(theta) and v.w."""
    return cos_theta - sinc_theta*vw


def power_start(n):
    """Start vectors (k rows of n, not normalised): (1, ..., 1) + e_{2j} for plane j."""
    return [[1.0 + (i == 2 * j) for i in range(n)] for j in range(n // 2)]


def chunk_layout(d_in, d_out, chunk=None):
    """(c, I, J): chunk size (the largest power of two <= both widths when None), input and output chunk counts."""
    if chunk is None:
        chunk = 1 << (min(d_in, d_out).bit_length() - 1)
    return chunk, -(-d_in // chunk), -(-d_out // chunk)


def chunk_starts(size, chunks):
    """First coordinate of each of ``chunks`` chunks of a width-``size`` side: floor(i size / chunks)."""
    return [i * size // chunks for i in range(chunks)]
