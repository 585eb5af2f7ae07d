r"""Hadamard matrices of the orders the models use, and their fast application.

A Hadamard matrix H of order n has entries +-1 and :math:`H H^T = n I`. Orders that are a power of
two come from Sylvester's doubling :math:`H_{2m} = [[H_m, H_m], [H_m, -H_m]]`. The widths of the
models quantized here are not powers of two (SmolLM2: 576 = 36 x 16, MLP 1536 = 12 x 128;
Gemma-3-270M: 640 = 40 x 16), so a base order m is built by one of Paley's constructions and the
whole matrix is the Kronecker product :math:`H_m \otimes H_{2^k}`:

- Paley I: for a prime q = 3 (mod 4), order q + 1, from the quadratic-residue (Jacobsthal) matrix
  Q of GF(q): :math:`H = I + S` with :math:`S = [[0, 1^T], [-1, Q]]` (skew);
- Paley II: for a prime q = 1 (mod 4), order 2 (q + 1), from the symmetric conference matrix
  :math:`C = [[0, 1^T], [1, Q]]`: each entry of C becomes the 2 x 2 block
  :math:`\pm[[1, -1], [-1, -1]]` (for 0) or :math:`\pm[[1, 1], [1, -1]]`;
- Sylvester doublings of either (40 = 2 x 20, 20 from Paley I with q = 19).

Only prime fields are implemented (no prime powers), which covers the base orders the models need
(12, 20, 36, 40; the list: :data:`BASE_ORDERS`). A width whose odd part no known base order covers
is refused by :func:`hadamard_factors`, naming the nearest widths that work.
"""
from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["BASE_ORDERS", "hadamard", "hadamard_factors", "is_hadamard", "paley1", "paley2", "sylvester",
           "random_hadamard", "apply_hadamard"]


def _is_prime(q: int) -> bool:
    return q >= 2 and all(q % p for p in range(2, int(math.isqrt(q)) + 1))


def _jacobsthal(q: int) -> np.ndarray:
    """Q[i, j] = chi(j - i) over GF(q), chi the quadratic character (0 at 0)."""
    residues = {(x * x) % q for x in range(1, q)}
    chi = np.array([0] + [1 if a in residues else -1 for a in range(1, q)], dtype=np.int64)
    index = (np.arange(q)[None, :] - np.arange(q)[:, None]) % q
    return chi[index]


def sylvester(order: int) -> np.ndarray:
    """The Sylvester Hadamard matrix of a power-of-two ``order`` (int64 +-1)."""
    if order < 1 or order & (order - 1):
        raise ValueError(f"Sylvester's construction needs a power of two, got {order}")
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < order:
        h = np.block([[h, h], [h, -h]])
    return h


def paley1(q: int) -> np.ndarray:
    """Paley's first construction: a Hadamard matrix of order q + 1 for a prime q = 3 (mod 4)."""
    if not (_is_prime(q) and q % 4 == 3):
        raise ValueError(f"Paley I needs a prime q = 3 (mod 4), got {q}")
    S = np.zeros((q + 1, q + 1), dtype=np.int64)
    S[0, 1:] = 1
    S[1:, 0] = -1
    S[1:, 1:] = _jacobsthal(q)
    return np.eye(q + 1, dtype=np.int64) + S


def paley2(q: int) -> np.ndarray:
    """Paley's second construction: a Hadamard matrix of order 2 (q + 1) for a prime q = 1 (mod 4)."""
    if not (_is_prime(q) and q % 4 == 1):
        raise ValueError(f"Paley II needs a prime q = 1 (mod 4), got {q}")
    C = np.zeros((q + 1, q + 1), dtype=np.int64)
    C[0, 1:] = 1
    C[1:, 0] = 1
    C[1:, 1:] = _jacobsthal(q)
    zero = np.array([[1, -1], [-1, -1]], dtype=np.int64)
    sign = np.array([[1, 1], [1, -1]], dtype=np.int64)
    return np.block([[zero if c == 0 else c * sign for c in row] for row in C])


def _base_constructions(limit: int = 256) -> dict:
    """{order m: how to build it} for m not a power of two, m <= limit, m = 0 (mod 4)."""
    out = {}
    for q in range(3, limit):
        if _is_prime(q) and q % 4 == 3 and q + 1 <= limit:
            out.setdefault(q + 1, ("paley1", q))
        if _is_prime(q) and q % 4 == 1 and 2 * (q + 1) <= limit:
            out.setdefault(2 * (q + 1), ("paley2", q))
    for m in sorted(out):  # Sylvester doublings of a base order
        k = 2 * m
        while k <= limit:
            out.setdefault(k, ("double", m))
            k *= 2
    return {m: out[m] for m in sorted(out) if m & (m - 1)}


#: Orders that are not powers of two, with their construction: ("paley1", q), ("paley2", q) or
#: ("double", m) (the Sylvester doubling of order m).
BASE_ORDERS = _base_constructions()


@functools.lru_cache(maxsize=64)
def _hadamard_cached(order: int) -> np.ndarray:
    if order & (order - 1) == 0:
        return sylvester(order)
    how, arg = BASE_ORDERS[order]
    if how == "paley1":
        return paley1(arg)
    if how == "paley2":
        return paley2(arg)
    h = _hadamard_cached(arg)
    return np.block([[h, h], [h, -h]])


def hadamard_factors(n: int) -> tuple[int, int]:
    """(m, 2^k) with m * 2^k = n, m 1 or a base order of :data:`BASE_ORDERS`, 2^k as large as possible.

    Raises ValueError, naming the widths nearby that work, when no known order covers ``n``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"a Hadamard width must be a positive integer, got {n!r}")
    found = _factors(n)
    if found is not None:
        return found
    near = [w for w in range(max(1, n - 64), n + 65) if w != n and _factors(w) is not None]
    close = sorted(near, key=lambda w: (abs(w - n), w))[:2]
    raise ValueError(f"no Hadamard matrix of order {n} is known to galinear: {n} = {n // (n & -n)} x {n & -n} and "
                     f"the odd part needs a base order m = 0 (mod 4) built by Paley's constructions (known: "
                     f"{', '.join(map(str, list(BASE_ORDERS)[:8]))}, ...); choose a rotation family that works at any "
                     f"width (cayley) or none, or a model whose width is covered (e.g. {' or '.join(map(str, close))})")


def _factors(n: int):
    """(m, 2^k) as :func:`hadamard_factors` says, or None when no known order covers ``n``."""
    power = n & -n
    while power >= 1:
        m = n // power
        if m == 1 or m in BASE_ORDERS:
            return m, power
        power //= 2
    return None


def hadamard(n: int) -> np.ndarray:
    """A Hadamard matrix of order ``n`` (int64 +-1): :math:`H_m \\otimes H_{2^k}` for
    :func:`hadamard_factors`'s (m, 2^k)."""
    m, power = hadamard_factors(n)
    return np.kron(_hadamard_cached(m), sylvester(power)) if m > 1 else sylvester(power)


def is_hadamard(h) -> bool:
    """Whether ``h`` has entries +-1 and :math:`H H^T = n I` exactly (in float64, exact for integers below 2^53:
    every entry of the product is a sum of n terms +-1)."""
    h = np.asarray(h)
    n = h.shape[0]
    if h.shape != (n, n) or not np.all(np.abs(h) == 1):
        return False
    f = h.astype(np.float64)
    return bool(np.array_equal(f @ f.T, n * np.eye(n)))


def random_hadamard(n: int, seed: int, dtype=None):
    """The orthogonal matrix :math:`D H / \\sqrt n` (torch), D a diagonal of random signs drawn from ``seed``
    (QuaRot's random Hadamard rotation), in float64 unless ``dtype`` says otherwise."""
    import torch

    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=n)
    matrix = signs[:, None] * hadamard(n).astype(np.float64) / math.sqrt(n)
    return torch.as_tensor(matrix, dtype=dtype or torch.float64)


def apply_hadamard(x, order: int | None = None):
    """``x @ H.T / sqrt(n)`` on the last axis (n its width) without forming the n x n matrix: the
    power-of-two factor by a fast Walsh-Hadamard transform (:func:`galinear.nn.functional.fwht`), the
    base order m by one m x m product. O(n log n + n m) a row instead of O(n^2)."""
    import torch

    from galinear.nn.functional import fwht

    n = x.shape[-1] if order is None else order
    m, power = hadamard_factors(n)
    y = fwht(x, power) if power > 1 else x
    if m == 1:
        return y
    base = torch.as_tensor(_hadamard_cached(m), dtype=x.dtype, device=x.device) / math.sqrt(m)
    lead = y.shape[:-1]
    y = y.reshape(*lead, m, power)
    return torch.einsum("ij,...jp->...ip", base, y).reshape(*lead, n)
