r"""Numba kernels between multivectors and their matrices (:mod:`galinear.matrix_rep`).

``to_matrix`` turns tokens x (B, P, 2**n) (shortlex coefficients) into the matrices
:math:`\varphi_\rho(x)` laid out (P * irreps, N, B, N): row, token, column, rows and columns in
the block order. In that layout a left product by a rotor's diagonal block is one GEMM over all
tokens, (W, W) x (W, B N), and a right product by a column block another, (N B, W) x (W, W)
(H = 2 blocks of W = N / 2 where rotors are block diagonal, else H = 1, W = N). ``from_matrix``
reads the output of the right products, (H, P * irreps, N, B, W), and applies the inverse formula.
Real representations (n = 0, 1, 2 mod 8) use real matrices, the others complex ones.

Per token the work is a signed gather of the 2**n coefficients into the real (and imaginary)
part of an N x N buffer that stays in L1, a Walsh-Hadamard transform of m = n // 2 butterfly
levels along its rows (contiguous runs, vectorised) and the xor placement of
:func:`galinear.matrix_rep.placement`. Parallel jobs are (chunk pair and representation, block of
``TOKENS_PER_JOB`` tokens); every token is computed by the same operations whatever the thread
count.
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit, prange
from galinear.rotor_kernels import bounds
from galinear.rotor_kernels.spinor_tables import kernel_tables  # noqa: F401 - part of this module's interface
from galinear.matrix_rep import representation

__all__ = ["TOKENS_PER_JOB", "BlockTransforms", "to_matrix", "from_matrix", "kernel_tables", "matrix_dtype"]

TOKENS_PER_JOB = 8
_FASTMATH = {"contract"}


@jit(fastmath=_FASTMATH)
def _hadamard_rows(u, N):
    """Each N x N part of u (parts * N * N,) real, row-major: u[i, :] <- sum_z (-1)^{|z & i|} u[z, :]
    (unnormalised); the rows are contiguous runs, so the butterflies vectorise."""
    for half in range(u.shape[0] // (N * N)):
        base = half * N * N
        h = 1
        while h < N:
            for r0 in range(0, N, 2 * h):
                for t in range(h):
                    a = base + (r0 + t) * N
                    ua = u[a:a + N]
                    ub = u[a + h * N:a + h * N + N]
                    for col in range(N):
                        p = ua[col]
                        q = ub[col]
                        ua[col] = p + q
                        ub[col] = p - q
            h *= 2


@jit(fastmath=_FASTMATH)
def _fill(u, xt, s0, g0, s1, g1, shared, N):
    """u = the signed placement of one token's coefficients, then the transform along rows."""
    if shared:
        for q in range(u.shape[0]):
            u[q] = g0[q] * xt[s0[q]] + g1[q] * xt[s1[q]]
    else:
        for q in range(u.shape[0]):
            u[q] = g0[q] * xt[s0[q]]
    _hadamard_rows(u, N)


@jit(fastmath=_FASTMATH)
def _read(u, yt, tr, sr, first):
    """yt (+)= sr * u[tr] (one representation's share of the inverse formula)."""
    if first:
        for c in range(yt.shape[0]):
            yt[c] = sr[c] * u[tr[c]]
    else:
        for c in range(yt.shape[0]):
            yt[c] += sr[c] * u[tr[c]]


@jit(parallel=True, nogil=True, fastmath=_FASTMATH)
def _to_matrix_kernel(x, b0, src, sgn, shared, back, parts, out):
    """out[p * irreps + rho, r, t] = row r of phi_rho(x[b0 + t, p]) (block order); ``out`` real,
    (G, N, nb, parts * N) with real and imaginary parts interleaved when ``parts`` is 2 (a real
    view of the complex matrices)."""
    P = x.shape[1]
    irreps = src.shape[0]
    G = P * irreps
    N = out.shape[1]
    nb = out.shape[2]
    NN = N * N
    per = TOKENS_PER_JOB
    n_bj = (nb + per - 1) // per
    for job in prange(G * n_bj):
        g = job // n_bj
        p = g // irreps
        rho = g % irreps
        t0 = (job % n_bj) * per
        u = np.empty(parts * NN, dtype=x.dtype)
        for t in range(t0, min(nb, t0 + per)):
            _fill(u, x[b0 + t, p], src[rho, 0], sgn[rho, 0], src[rho, 1], sgn[rho, 1], shared, N)
            for r in range(N):
                dst = out[g, r, t]
                row = back[r * N:(r + 1) * N]
                if parts == 2:
                    for j in range(N):
                        q = row[j]
                        dst[2 * j] = u[q]
                        dst[2 * j + 1] = u[q + NN]
                else:
                    for j in range(N):
                        dst[j] = u[row[j]]


@jit(parallel=True, nogil=True, fastmath=_FASTMATH)
def _from_matrix_kernel(Y, b0, tgt, sgnc, back, scale, parts, y):
    """y[b0 + t, p] = (1/s) Re sum_rho tr(phi_rho(e_A)^H Y_rho) for Y (H, P * irreps, N, nb,
    parts * W) real (interleaved parts when ``parts`` is 2): entry (r, j) of token t at
    Y[j // W, g, r, t, j % W]."""
    H = Y.shape[0]
    G = Y.shape[1]
    N = Y.shape[2]
    nb = Y.shape[3]
    W = Y.shape[4] // parts
    irreps = tgt.shape[0]
    P = G // irreps
    NN = N * N
    per = TOKENS_PER_JOB
    n_bj = (nb + per - 1) // per
    inv = 1.0 / scale
    for job in prange(P * n_bj):
        p = job // n_bj
        t0 = (job % n_bj) * per
        u = np.empty(parts * NN, dtype=y.dtype)
        for t in range(t0, min(nb, t0 + per)):
            yt = y[b0 + t, p]
            for rho in range(irreps):
                g = p * irreps + rho
                for r in range(N):
                    for hb in range(H):
                        srow = Y[hb, g, r, t]
                        base = r * N + hb * W
                        if parts == 2:
                            for w in range(W):
                                q = back[base + w]
                                u[q] = srow[2 * w]
                                u[q + NN] = srow[2 * w + 1]
                        else:
                            for w in range(W):
                                u[back[base + w]] = srow[w]
                _hadamard_rows(u, N)
                _read(u, yt, tgt[rho], sgnc[rho], rho == 0)
            for c in range(yt.shape[0]):
                yt[c] *= inv


def _check_real(x, name):
    if not isinstance(x, np.ndarray) or x.ndim != 3 or x.dtype not in (np.float32, np.float64):
        raise ValueError(f"{name} must be a float32/float64 array (B, P, 2**n), got "
                         f"{getattr(x, 'dtype', type(x))} {getattr(x, 'shape', '')}")
    d = x.shape[2]
    n = d.bit_length() - 1
    if d < 2 or 2**n != d:
        raise ValueError(f"the last axis of {name} must hold 2**n coefficients (n >= 1), got {d}")
    return n


def matrix_dtype(n: int, dtype):
    """The dtype of the matrices of Cl(n) for real ``dtype``: itself for real representations,
    else its complex type."""
    if representation(n).real:
        return np.dtype(dtype)
    return np.dtype(np.complex64 if np.dtype(dtype) == np.float32 else np.complex128)


def to_matrix(x: np.ndarray, out: np.ndarray, start: int = 0) -> np.ndarray:
    """Fill ``out`` (P * irreps, N, nb, N) complex with the matrices of tokens x[start:start + nb]
    (rows and columns in the block order of :mod:`galinear.matrix_rep`)."""
    n = _check_real(x, "x")
    src, sgn, back, _, _, _ = kernel_tables(n, x.dtype)
    tab = representation(n)
    G, N = x.shape[1] * tab.irreps, tab.N
    if (out.ndim != 4 or out.shape[:2] != (G, N) or out.shape[3] != N or not 0 <= start
            or start + out.shape[2] > x.shape[0]):
        raise ValueError(f"out must have shape (P * irreps, N, tokens, N) = ({G}, {N}, <= {x.shape[0] - start}, "
                         f"{N}), got {out.shape}")
    if out.dtype != matrix_dtype(n, x.dtype) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {matrix_dtype(n, x.dtype)} array, got {out.dtype}")
    parts = 1 if tab.real else 2
    _to_matrix_kernel(np.ascontiguousarray(x), start, src, sgn, bool(np.any(sgn[:, 1])), back, parts,
                      out.view(x.dtype))
    return out


def from_matrix(Y: np.ndarray, y: np.ndarray, start: int = 0) -> np.ndarray:
    """Write the multivectors of matrices Y (H, P * irreps, N, nb, W) (entry (r, j) of token t at
    Y[j // W, g, r, t, j % W]; H = blocks) into y[start:start + nb]."""
    n = _check_real(y, "y")
    _, _, back, tgt, sgnc, scale = kernel_tables(n, y.dtype)
    tab = representation(n)
    G, N, H = y.shape[1] * tab.irreps, tab.N, tab.blocks
    if (Y.ndim != 5 or Y.shape[:3] != (H, G, N) or Y.shape[4] != N // H or not 0 <= start
            or start + Y.shape[3] > y.shape[0]):
        raise ValueError(f"Y must have shape (H, P * irreps, N, tokens, N / H) = ({H}, {G}, {N}, "
                         f"<= {y.shape[0] - start}, {N // H}), got {Y.shape}")
    if Y.dtype != matrix_dtype(n, y.dtype):
        raise ValueError(f"Y must be {matrix_dtype(n, y.dtype)} for y of {y.dtype}, got {Y.dtype}")
    if not y.flags.c_contiguous:
        raise ValueError("y must be C-contiguous")
    _from_matrix_kernel(np.ascontiguousarray(Y).view(y.dtype), start, tgt, sgnc, back, scale, 1 if tab.real else 2, y)
    return y


class BlockTransforms:
    """:func:`to_matrix` of tokens x and :func:`from_matrix` into results y (None: none), block after
    block, with the tables, the arrays' checks and their real views prepared once: a call per block
    checks only its buffer and token range (the same kernels, the same results)."""

    def __init__(self, x: np.ndarray, y: np.ndarray | None = None):
        n = _check_real(x, "x")
        if y is not None and (_check_real(y, "y") != n or y.shape != x.shape or y.dtype != x.dtype):
            raise ValueError(f"y must have x's dtype {x.dtype} and shape {x.shape}, got {y.dtype} {y.shape}")
        if not x.flags.c_contiguous or not (y is None or (y.flags.c_contiguous and y.flags.writeable)):
            raise ValueError("x and y must be C-contiguous (y writable)")
        tab = representation(n)
        self.src, self.sgn, self.back, self.tgt, self.sgnc, self.scale = kernel_tables(n, x.dtype)
        self.shared = bool(np.any(self.sgn[:, 1]))
        self.parts = 1 if tab.real else 2
        self.G, self.N, self.H = x.shape[1] * tab.irreps, tab.N, tab.blocks
        self.matrix_dtype = matrix_dtype(n, x.dtype)
        self.x, self.y = x, y

    def _check(self, buffer, leading, last, start, name):
        """``buffer`` (*leading, tokens, last) of the matrix dtype, C-contiguous, its tokens within x."""
        if (buffer.ndim != len(leading) + 2 or buffer.shape[:-2] != leading or buffer.shape[-1] != last
                or buffer.dtype != self.matrix_dtype or not buffer.flags.c_contiguous or not 0 <= start
                or start + buffer.shape[-2] > self.x.shape[0]):
            raise ValueError(f"{name} must be a C-contiguous {self.matrix_dtype} array of shape {(*leading, 'tokens', last)}"
                             f" with at most {self.x.shape[0] - start} tokens, got {buffer.dtype} {buffer.shape}")

    def to_matrix(self, out: np.ndarray, start: int) -> np.ndarray:
        """out (P * irreps, N, nb, N) = the matrices of x[start:start + nb], as :func:`to_matrix`."""
        self._check(out, (self.G, self.N), self.N, start, "out")
        _to_matrix_kernel(self.x, start, self.src, self.sgn, self.shared, self.back, self.parts,
                          out.view(self.x.dtype))
        return out

    def from_matrix(self, Y: np.ndarray, start: int) -> None:
        """y[start:start + nb] = the multivectors of Y (H, P * irreps, N, nb, W), as :func:`from_matrix`."""
        if self.y is None:
            raise ValueError("these transforms have no results array y; pass y to BlockTransforms")
        self._check(Y, (self.H, self.G, self.N), self.N // self.H, start, "Y")
        _from_matrix_kernel(Y.view(self.x.dtype), start, self.tgt, self.sgnc, self.back, self.scale, self.parts,
                            self.y)


@jit(fastmath=_FASTMATH)
def _block_products(Ar, Ai, Xr, Xi, Br, Bi, s, Zr, Zi, Yr, Yi, H, W, cplx):
    """Y += s A X B for one representation: A, B diagonal blocks (H, W, W), X, Y (N, N), Z (W, W);
    row-times-row updates (contiguous runs of W, vectorised)."""
    for hr in range(H):
        for hc in range(H):
            r0 = hr * W
            c0 = hc * W
            Zr[:, :] = 0
            if cplx:
                Zi[:, :] = 0
            for a in range(W):                       # Z = A_hr X[hr, hc]
                zr = Zr[a]
                zi = Zi[a]
                for k in range(W):
                    ar = Ar[hr, a, k]
                    xr = Xr[r0 + k, c0:c0 + W]
                    if cplx:
                        ai = Ai[hr, a, k]
                        xi = Xi[r0 + k, c0:c0 + W]
                        for b in range(W):
                            zr[b] += ar * xr[b] - ai * xi[b]
                            zi[b] += ar * xi[b] + ai * xr[b]
                    else:
                        for b in range(W):
                            zr[b] += ar * xr[b]
            for a in range(W):                       # Y[hr, hc] += s Z B_hc
                yr = Yr[r0 + a, c0:c0 + W]
                yi = Yi[r0 + a, c0:c0 + W]
                for k in range(W):
                    br = Br[hc, k]
                    zr = s * Zr[a, k]
                    if cplx:
                        bi = Bi[hc, k]
                        zi = s * Zi[a, k]
                        for b in range(W):
                            yr[b] += zr * br[b] - zi * bi[b]
                            yi[b] += zr * bi[b] + zi * br[b]
                    else:
                        for b in range(W):
                            yr[b] += zr * br[b]


@jit(fastmath=_FASTMATH)
def _gadget_kernel(x, in_index, out_index, out_scale, pair_scale, Ar, Ai, Br, Bi, src, sgn, shared, back, tgt, sgnc,
                   scale, cplx, out):
    """out[t] += a whole chunked rotor layer applied to x[t] through the matrices of its chunk
    pairs (decoding: a few tokens, one thread). x (T, in), in_index (I, c), out_index (J c,),
    out_scale (out,), pair_scale (P,) = alpha, Ar/Ai/Br/Bi (P, irreps, H, W, W)."""
    T = x.shape[0]
    I, c = in_index.shape
    P = pair_scale.shape[0]
    J = P // I
    irreps = src.shape[0]
    H = Ar.shape[2]
    W = Ar.shape[3]
    N = H * W
    NN = N * N
    parts = 2 if cplx else 1
    u = np.empty(parts * NN, dtype=x.dtype)
    xc = np.empty(c, dtype=x.dtype)
    Xr = np.empty((I, irreps, N, N), dtype=x.dtype)
    Xi = np.zeros((I, irreps, N, N), dtype=x.dtype)
    Yr = np.empty((irreps, N, N), dtype=x.dtype)
    Yi = np.zeros((irreps, N, N), dtype=x.dtype)
    Zr = np.empty((W, W), dtype=x.dtype)
    Zi = np.zeros((W, W), dtype=x.dtype)
    yc = np.empty(c, dtype=x.dtype)
    inv = 1.0 / scale
    for t in range(T):
        for i in range(I):
            for k in range(c):
                xc[k] = x[t, in_index[i, k]]
            for rho in range(irreps):
                _fill(u, xc, src[rho, 0], sgn[rho, 0], src[rho, 1], sgn[rho, 1], shared, N)
                for r in range(N):
                    for j in range(N):
                        q = back[r * N + j]
                        Xr[i, rho, r, j] = u[q]
                        if cplx:
                            Xi[i, rho, r, j] = u[q + NN]
        for jo in range(J):
            Yr[:] = 0
            if cplx:
                Yi[:] = 0
            for i in range(I):
                p = jo * I + i
                for rho in range(irreps):
                    _block_products(Ar[p, rho], Ai[p, rho], Xr[i, rho], Xi[i, rho], Br[p, rho], Bi[p, rho],
                                    pair_scale[p], Zr, Zi, Yr[rho], Yi[rho], H, W, cplx)
            for rho in range(irreps):
                for r in range(N):
                    for j in range(N):
                        q = back[r * N + j]
                        u[q] = Yr[rho, r, j]
                        if cplx:
                            u[q + NN] = Yi[rho, r, j]
                _hadamard_rows(u, N)
                _read(u, yc, tgt[rho], sgnc[rho], rho == 0)
            for k in range(c):
                f = out_index[jo * c + k]
                out[t, f] += yc[k] * inv * out_scale[f]


def prepare_gadget(A, B, dtype):
    """(Ar, Ai, Br, Bi, cplx) for :func:`gadget_forward` from the chunk pairs' diagonal blocks A, B
    (P, irreps, H, W, W), real or complex numpy arrays; imaginary parts alias the real ones when
    the representation is real (never read)."""
    cplx = bool(np.iscomplexobj(A))
    Ar, Br = np.ascontiguousarray(A.real, dtype=dtype), np.ascontiguousarray(B.real, dtype=dtype)
    if cplx:
        return Ar, np.ascontiguousarray(A.imag, dtype=dtype), Br, np.ascontiguousarray(B.imag, dtype=dtype), True
    return Ar, Ar, Br, Br, False


def _frozen(a):
    """A private copy of ``a``: no other object holds it, so what a checked decoder indexes cannot
    change after its check (writable, as the unchecked entry points pass it: one compile each)."""
    return np.array(a, copy=True)


def _frozen_gadget(g):
    """The tuple ``g`` (:func:`gadget_tuple`) with the layer's index tables as private copies."""
    in_index, out_index, out_scale, pair_scale, Ar, Ai, Br, Bi, src, sgn, shared, back, tgt, sgnc, scale, cplx = g
    return (_frozen(in_index), _frozen(out_index), out_scale, pair_scale, Ar, Ai, Br, Bi, src, sgn, shared, back, tgt,
            sgnc, scale, cplx)  # src, back, tgt: galinear's own tables, which the bounds checks recognise


class CheckedGadget:
    """One chunked rotor layer whose index tables were checked once against the arrays they index
    (:func:`galinear.rotor_kernels.bounds.gadget_in_bounds`) and copied where no one else holds them, so a
    call checks only
    the tokens and the output (shape and dtype) before the compiled kernel: for decoding, where
    the tables' pass would cost as much as the kernel. Same result as :func:`gadget_forward`."""

    def __init__(self, in_index, out_index, out_scale, pair_scale, prepared, dtype, width: int):
        bounds.check_index(in_index, "gadget input index", width, ndim=2)
        gadget = _frozen_gadget(gadget_tuple(in_index, out_index, out_scale, pair_scale, prepared, dtype))
        probe = np.zeros((1, width), dtype=dtype)
        self.out_features = int(np.asarray(out_scale).shape[0])
        bounds.gadget_in_bounds(probe, gadget, np.zeros((1, self.out_features), dtype=dtype))
        self.gadget, self.width, self.dtype = gadget, int(width), np.dtype(dtype)

    def __call__(self, x, out):
        """``out += `` the layer on tokens x (T, width) of the gadget's dtype; returns out."""
        if not isinstance(x, np.ndarray) or x.ndim != 2 or x.shape[1] != self.width or x.dtype != self.dtype:
            raise ValueError(f"x must be a {self.dtype} array of shape (tokens, {self.width}), got "
                             f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}")
        if (not isinstance(out, np.ndarray) or out.shape != (x.shape[0], self.out_features) or out.dtype != self.dtype
                or not out.flags.writeable):
            raise ValueError(f"out must be a writable {self.dtype} array of shape ({x.shape[0]}, {self.out_features}), "
                             f"got {getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}")
        _gadget_kernel(x, *self.gadget, out)
        return out


def gadget_forward(x, in_index, out_index, out_scale, pair_scale, prepared, out):
    """``out += `` the chunked rotor layer on tokens x (T, in): chunk i of token t is
    x[t, in_index[i]] (shortlex coefficients), pair p = j I + i maps it by its matrices
    (``prepared`` by :func:`prepare_gadget`) with weight pair_scale[p], and output chunk j adds
    into out[t, out_index[j c:(j + 1) c]] times out_scale there. One thread, x's real dtype; for
    decoding, where only the chunks' small matrices are read."""
    bounds.check_tokens(x)
    bounds.check_index(in_index, "gadget input index", x.shape[1], ndim=2)
    c = in_index.shape[1]
    n = c.bit_length() - 1
    src, sgn, back, tgt, sgnc, scale = kernel_tables(n, x.dtype)
    Ar, Ai, Br, Bi, cplx = prepared
    bounds.gadget_in_bounds(x, gadget_tuple(in_index, out_index, out_scale, pair_scale, prepared, x.dtype), out)
    _gadget_kernel(x, in_index, out_index, out_scale, pair_scale, Ar, Ai, Br, Bi, src, sgn, bool(np.any(sgn[:, 1])),
                   back, tgt, sgnc, scale, cplx, out)
    return out


@jit(fastmath=_FASTMATH)
def _run_gadget(g, x):
    in_index, out_index, out_scale, pair_scale, Ar, Ai, Br, Bi, src, sgn, shared, back, tgt, sgnc, scale, cplx = g
    out = np.zeros((x.shape[0], out_scale.shape[0]), dtype=x.dtype)
    _gadget_kernel(x, in_index, out_index, out_scale, pair_scale, Ar, Ai, Br, Bi, src, sgn, shared, back, tgt, sgnc,
                   scale, cplx, out)
    return out


@jit(fastmath=_FASTMATH)
def _norm_act(z, perm, eps, slope):
    """PReLU(LayerNorm(z[:, perm])) per row (no affine parameters), biased variance as torch."""
    T, D = z.shape[0], perm.shape[0]
    out = np.empty((T, D), dtype=z.dtype)
    for t in range(T):
        mean = 0.0
        for k in range(D):
            mean += z[t, perm[k]]
        mean /= D
        var = 0.0
        for k in range(D):
            v = z[t, perm[k]] - mean
            var += v * v
        inv = 1.0 / np.sqrt(var / D + eps)
        for k in range(D):
            v = (z[t, perm[k]] - mean) * inv
            out[t, k] = v if v >= 0 else slope * v
    return out


@jit(fastmath=_FASTMATH)
def _network_kernel(x, gadgets, input_perm, hidden_perms, branch, slope, eps):
    """The rotor q/k/v network (galinear.nn.RotorNetwork) on a few tokens in one call."""
    h = _norm_act(_run_gadget(gadgets[0], x), input_perm, eps, slope)
    L, breadth = branch.shape
    for layer in range(L):
        acc = np.zeros_like(h)
        for b in range(breadth):
            z = _norm_act(_run_gadget(gadgets[1 + layer * breadth + b], h), hidden_perms[layer, b], eps, slope)
            acc += branch[layer, b] * z
        h = acc
    return _run_gadget(gadgets[len(gadgets) - 1], h)


def gadget_tuple(in_index, out_index, out_scale, pair_scale, prepared, dtype):
    """The arguments of one gadget for :func:`network_forward`, tables included."""
    n = in_index.shape[1].bit_length() - 1
    src, sgn, back, tgt, sgnc, scale = kernel_tables(n, dtype)
    Ar, Ai, Br, Bi, cplx = prepared
    return (in_index, out_index, out_scale, pair_scale, Ar, Ai, Br, Bi, src, sgn, bool(np.any(sgn[:, 1])), back, tgt,
            sgnc, scale, cplx)


def network_list(tuples):
    """A numba typed list of :func:`gadget_tuple` results (build once, reuse for every call)."""
    from numba.typed import List

    out = List()
    for item in tuples:
        out.append(item)
    return out


class CheckedNetwork:
    """The rotor network of :func:`network_forward` with every index table and permutation checked
    once (:func:`galinear.rotor_kernels.bounds.network_in_bounds`) and privately copied; a call checks
    only the tokens. Same result as :func:`network_forward`."""

    def __init__(self, tuples, input_perm, hidden_perms, branch, slope, eps, width: int, dtype):
        self.gadgets = network_list([_frozen_gadget(g) for g in tuples])
        self.input_perm, self.hidden_perms = _frozen(input_perm), _frozen(hidden_perms)
        self.branch, self.slope, self.eps = _frozen(branch), float(slope), float(eps)
        self.width, self.dtype = int(width), np.dtype(dtype)
        bounds.network_in_bounds(np.zeros((1, width), dtype=dtype), self.gadgets, self.input_perm, self.hidden_perms,
                                 self.branch)

    def __call__(self, x):
        if not isinstance(x, np.ndarray) or x.ndim != 2 or x.shape[1] != self.width or x.dtype != self.dtype:
            raise ValueError(f"x must be a {self.dtype} array of shape (tokens, {self.width}), got "
                             f"{getattr(x, 'dtype', type(x).__name__)} {getattr(x, 'shape', '')}")
        return _network_kernel(x, self.gadgets, self.input_perm, self.hidden_perms, self.branch, self.slope, self.eps)


def network_forward(x, gadgets, input_perm, hidden_perms, branch, slope, eps):
    """y = the rotor network on tokens x (T, in): gadgets from :func:`network_list` (input,
    hidden layer by layer and branch by branch, output), permutations, branch weights (L,
    breadth), the PReLU slope and the LayerNorm epsilon. One thread; for decoding. Every index
    and permutation is checked against the axis it indexes first (:mod:`galinear.rotor_kernels.bounds`):
    ValueError, never an access outside an array.

    The checked entry to the network kernel for callers that hold their own tables (the tests
    call it with damaged ones); :class:`~galinear.nn.RotorNetwork` decodes through a
    :class:`CheckedNetwork`, which checks its tables once and then only the tokens of a call."""
    bounds.network_in_bounds(x, gadgets, input_perm, hidden_perms, branch)
    return _network_kernel(x, gadgets, input_perm, hidden_perms, branch, float(slope), float(eps))
