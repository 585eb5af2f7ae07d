r"""The complex matrix representation of Euclidean Cl(n) (numpy only).

Gamma matrices of size :math:`N = 2^m`, :math:`m = \lfloor n/2 \rfloor`, are Pauli strings (with
:math:`X_k, Y_k, Z_k` the Pauli matrices on bit k of the row index). For n = 0, 1, 2 mod 8,
where Cl(n) is a real matrix algebra, they are real strings (an even number of Y factors), the
first 2m mutually anticommuting ones with a diagonal product found by a depth-first search;
otherwise the Jordan-Wigner strings

.. math::

    \gamma_{2k} = Z_0 \cdots Z_{k-1} X_k, \quad \gamma_{2k+1} = Z_0 \cdots Z_{k-1} Y_k \quad (k < m).

For odd n, :math:`\gamma_{2m}` is :math:`\pm` the product of the others (times i where that
squares to -1). They are Hermitian, square to the identity and anticommute, so :math:`e_i \mapsto \gamma_i`
extends to an algebra homomorphism :math:`\varphi: Cl(n) \to M_N(\mathbb C)` with
:math:`\varphi(\tilde x) = \varphi(x)^\dagger` for real x. Every blade goes to a Pauli string,
:math:`\varphi(e_A) = i^{p_A} Z^{z_A} X^{x_A}` with :math:`(Z^z X^x)_{ij} = (-1)^{|z \wedge i|}
[j = i \oplus x]`, so a multivector becomes a matrix by a signed placement of its coefficients,
a Walsh-Hadamard transform along one axis and a xor placement along the other:
:math:`\varphi(x)_{i, i \oplus c} = \sum_z (-1)^{|z \wedge i|}\, u_{z c}` with
:math:`u_{z c} = \sum_{A: (z_A, x_A) = (z, c)} i^{p_A} x_A`.

Which real multivectors the image determines (Lounesto, *Clifford Algebras and Spinors*, ch. 16):

- n even: :math:`\varphi` is injective; even elements commute with the chirality
  :math:`\varphi(e_{1 \dots n})`, a Pauli string. Where it is diagonal (every even n except
  n = 2 mod 8, whose real form has a chirality squaring to -1) even elements are block diagonal
  in the order of :data:`RepresentationTables.order`, two blocks of N/2.
- n = 0, 1, 2 mod 8: every gamma matrix is real, so real multivectors have real matrices and
  the products run in real arithmetic (a quarter of the complex work).
- n = 3 mod 4: the pseudoscalar is central with square -1 and maps to :math:`\pm i`; two blades
  share each Pauli string with phases differing by :math:`\pm i`, so :math:`\varphi` is injective
  (Cl(3) = M_2(C), Cl(7) = M_8(C), Cl(11) = M_32(C)).
- n = 1 mod 4: the pseudoscalar squares to +1 and maps to :math:`\pm 1`, so one representation
  loses half of x; both (:math:`\gamma_{2m} = +Z^{\otimes m}` and :math:`-Z^{\otimes m}`) are kept.

The inverse: :math:`x_A = \frac{1}{s} \mathrm{Re} \sum_\rho \mathrm{tr}(\varphi_\rho(e_A)^\dagger
\varphi_\rho(x))` with :math:`s = N \times` (number of representations). A sandwich
:math:`R x \tilde S` becomes :math:`\varphi(R)\, \varphi(x)\, \varphi(S)^\dagger`: two products of
N x N matrices per token, :math:`O(d^{3/2})` work instead of :math:`O(d^2)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from galinear.blades import check_dimension, shortlex_bitmasks

__all__ = ["RepresentationTables", "representation", "gamma_matrices", "blade_matrix", "to_matrix",
           "from_matrix", "hadamard", "placement"]

_PHASES = np.array([1, 1j, -1, -1j], dtype=np.complex128)


def _popcount(a) -> np.ndarray:
    return np.bitwise_count(np.asarray(a, dtype=np.int64)).astype(np.int64)


def _times(a: tuple[int, int, int], b: tuple[int, int, int]) -> tuple[int, int, int]:
    """Product of Pauli strings in the normal form i^p Z^z X^x (X^x Z^z = (-1)^{x.z} Z^z X^x)."""
    pa, za, xa = a
    pb, zb, xb = b
    return ((pa + pb + 2 * bin(xa & zb).count("1")) % 4, za ^ zb, xa ^ xb)


def _anticommute(a, b) -> bool:
    return (bin(a[1] & b[2]).count("1") + bin(a[2] & b[1]).count("1")) % 2 == 1


def is_real(n: int) -> bool:
    """True when Euclidean Cl(n) is a real matrix algebra (or two): n = 0, 1, 2 mod 8."""
    return n % 8 in (0, 1, 2)


@lru_cache(maxsize=None)
def _real_strings(count: int, m: int, diagonal: bool) -> tuple[tuple[int, int, int], ...]:
    """``count`` anticommuting real symmetric Pauli strings on m qubits (with a diagonal product,
    x = 0, when ``diagonal``), the first found by a depth-first search in (z, x) order."""
    pool = []
    for z in range(1 << m):
        for x in range(1 << m):
            ys = bin(z & x).count("1")
            if (z or x) and ys % 2 == 0:
                pool.append(((3 * ys) % 4, z, x))        # Y = -i Z X on the qubits of z & x

    def search(chosen, candidates):
        if len(chosen) == count:
            x_all = 0
            for word in chosen:
                x_all ^= word[2]
            return chosen if x_all == 0 or not diagonal else None
        for index, word in enumerate(candidates):
            rest = [other for other in candidates[index + 1:] if _anticommute(word, other)]
            if len(chosen) + 1 + len(rest) < count:
                continue
            found = search(chosen + [word], rest)
            if found:
                return found
        return None

    found = search([], pool)
    if found is None:  # pragma: no cover - exists for every count = 2m with 2m = 0, 2 mod 8
        raise RuntimeError(f"no {count} real anticommuting Pauli strings on {m} qubits")
    return tuple(found)


def _generators(n: int, irrep: int) -> list[tuple[int, int, int]]:
    """(phase exponent p, z, x) of gamma_0 .. gamma_{n-1}: gamma_i = i**p Z^z X^x.

    Real Pauli strings (an even number of Y factors) for n = 0, 1, 2 mod 8, Jordan-Wigner strings
    otherwise; for odd n the last generator is +- the product of the others, made Hermitian.
    """
    m = n // 2
    if is_real(n):
        # n = 0 mod 8: the chirality squares to +1 and can be diagonal (two blocks); n = 2 mod 8:
        # it squares to -1, so no real diagonal form exists
        gens = list(_real_strings(2 * m, m, n % 8 == 0))
    else:
        gens = []
        for k in range(m):
            below = (1 << k) - 1
            gens.append((0, below, 1 << k))                  # Z_0..Z_{k-1} X_k
            gens.append((3, below | (1 << k), 1 << k))       # Z_0..Z_{k-1} Y_k, Y = -i Z X
    if n % 2:
        last = (0, 0, 0)
        for word in gens:
            last = _times(last, word)
        # (gamma_0 ... gamma_{2m-1})^2 = (-1)^{m(2m-1)}: times i when that is -1
        p = (last[0] + (1 if m % 2 else 0) + 2 * irrep) % 4
        gens.append((p, last[1], last[2]))
    return gens


@dataclass(frozen=True)
class RepresentationTables:
    """Where each shortlex coefficient of a multivector of Cl(n) goes in its matrix.

    Attributes
    ----------
    n, m, N : dimension, m = n // 2, matrix size N = 2**m.
    irreps : 1, or 2 for n = 1 mod 4 (both signs of gamma_{2m} kept).
    blocks : 2 where the chirality phi(e_{1..n}) is diagonal (even n, except n = 2 mod 8, whose real
        form has none): rotors are then block diagonal in ``order``; else 1.
    real : every phase is +-1, so real multivectors have real matrices (n = 0, 1, 2 mod 8).
    slot : (2**n,) int64, z_A * N + x_A of the shortlex coefficient A.
    phase : (irreps, 2**n) complex128, i**p_A per representation.
    z, x : (2**n,) int64.
    order : (N,) int64, the row/column index at each position of the block order (for even n the
        +1 eigenvectors of the diagonal chirality phi(e_{1..n}) first, identity for odd n);
        ``position`` is its inverse.
    scale : irreps * N, the s of the inverse formula.
    """

    n: int
    m: int
    N: int
    irreps: int
    blocks: int
    real: bool
    slot: np.ndarray
    phase: np.ndarray
    z: np.ndarray
    x: np.ndarray
    order: np.ndarray
    position: np.ndarray
    scale: int


@lru_cache(maxsize=None)
def representation(n: int) -> RepresentationTables:
    """The tables of :math:`\\varphi` for Euclidean Cl(n), n >= 1 (cached, read-only arrays)."""
    n = check_dimension(n)
    if n < 1:
        raise ValueError("the matrix representation needs n >= 1")
    m = n // 2
    N = 1 << m
    irreps = 2 if n % 4 == 1 else 1
    masks = shortlex_bitmasks(n)
    d = masks.size
    z = np.empty(d, dtype=np.int64)
    x = np.empty(d, dtype=np.int64)
    phase = np.empty((irreps, d), dtype=np.complex128)
    for rho in range(irreps):
        gens = _generators(n, rho)
        for c, mask in enumerate(masks):
            word = (0, 0, 0)
            for i in range(n):
                if (int(mask) >> i) & 1:
                    word = _times(word, gens[i])
            phase[rho, c] = _PHASES[word[0]]
            if rho == 0:
                z[c], x[c] = word[1], word[2]
    idx = np.arange(N, dtype=np.int64)
    chirality = (0, 0, 0)
    for word in _generators(n, 0):
        chirality = _times(chirality, word)
    blocks = 2 if n % 2 == 0 and chirality[2] == 0 else 1
    if blocks == 2:
        even = _popcount(idx & chirality[1]) % 2 == 0
        order = np.concatenate([idx[even], idx[~even]])
    else:
        order = idx.copy()
    position = np.empty_like(order)
    position[order] = idx
    slot = z * N + x
    for array in (slot, phase, z, x, order, position):
        array.setflags(write=False)
    real = bool(np.all(np.abs(phase.imag) < 0.5))
    return RepresentationTables(n, m, N, irreps, blocks, real, slot, phase, z, x, order,
                                position, irreps * N)


def _string_matrix(N: int, p: complex, z: int, x: int) -> np.ndarray:
    i = np.arange(N)
    out = np.zeros((N, N), dtype=np.complex128)
    out[i, i ^ x] = p * np.where(_popcount(z & i) % 2, -1.0, 1.0)
    return out


def gamma_matrices(n: int, irrep: int = 0) -> np.ndarray:
    """(n, N, N) complex128: gamma_i in the natural index order (``irrep`` 1 flips gamma_{2m})."""
    n = check_dimension(n)
    if irrep not in (0, 1) or (irrep == 1 and n % 4 != 1):
        raise ValueError("irrep 1 exists only for n = 1 mod 4")
    N = 1 << (n // 2)
    return np.stack([_string_matrix(N, _PHASES[p], z, x) for p, z, x in _generators(n, irrep)])


def blade_matrix(n: int, c: int, irrep: int = 0) -> np.ndarray:
    """(N, N) complex128: phi(e_A) of the blade at shortlex position c, natural index order."""
    tab = representation(n)
    return _string_matrix(tab.N, tab.phase[irrep, c], int(tab.z[c]), int(tab.x[c]))


@lru_cache(maxsize=None)
def placement(n: int) -> np.ndarray:
    """(N * N,) int64: for the matrix entry at row r, column j of the block order, its index
    i * N + c in the transformed coefficient grid (i = order[r], c = i xor order[j]); read-only."""
    tab = representation(n)
    i = tab.order[:, None]
    out = (i * tab.N + (i ^ tab.order[None, :])).reshape(-1).astype(np.int64)
    out.setflags(write=False)
    return out


def hadamard(N: int) -> np.ndarray:
    """(N, N) Walsh-Hadamard matrix H[i, z] = (-1)**popcount(i & z) (float64)."""
    i = np.arange(N)
    return np.where(_popcount(i[:, None] & i[None, :]) % 2, -1.0, 1.0)


def to_matrix(x: np.ndarray, n: int) -> np.ndarray:
    """phi(x) for multivectors x (..., 2**n): (..., irreps, N, N) complex, rows and columns in
    ``representation(n).order`` (reference implementation; the kernels do the same per token)."""
    tab = representation(n)
    x = np.asarray(x)
    N = tab.N
    u = np.zeros(x.shape[:-1] + (tab.irreps, N * N), dtype=np.complex128)
    for rho in range(tab.irreps):
        np.add.at(np.moveaxis(u[..., rho, :], -1, 0), tab.slot, np.moveaxis(tab.phase[rho] * x, -1, 0))
    hat = np.einsum("iz,...zc->...ic", hadamard(N), u.reshape(u.shape[:-1] + (N, N)))
    i = tab.order[:, None]
    j = tab.order[None, :]
    return hat[..., i, i ^ j]


def from_matrix(X: np.ndarray, n: int) -> np.ndarray:
    """The real multivectors (..., 2**n) of matrices X (..., irreps, N, N) in block order: the
    inverse formula of the module docstring (the inverse of :func:`to_matrix` on its image)."""
    tab = representation(n)
    N = tab.N
    i = np.arange(N)[:, None]
    c = np.arange(N)[None, :]
    natural = np.empty_like(X)
    natural[..., tab.order[:, None], tab.order[None, :]] = X
    hat = natural[..., i, i ^ c]                      # hat[i, c] = X[i, i xor c]
    u = np.einsum("zi,...ic->...zc", hadamard(N), hat).reshape(X.shape[:-2] + (N * N,))
    y = sum((np.conj(tab.phase[rho]) * u[..., rho, tab.slot]).real for rho in range(tab.irreps))
    return y / tab.scale
