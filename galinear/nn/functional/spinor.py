r"""The ``"spinor"`` sandwich backend: rotor maps as products of small (complex or real) matrices.

Through the matrix representation :math:`\varphi` of :mod:`galinear.matrix_rep`
(:math:`N = 2^{\lfloor n/2 \rfloor}`), :math:`\varphi(R x \tilde S) = A\, \varphi(x)\, B` with
:math:`A = \varphi(R)`, :math:`B = \varphi(S)^\dagger`, and

.. math::

    \varphi(R_j) = \cos\theta_j\, I + \operatorname{sinc}\theta_j\,
    (\varphi(v_j)\varphi(w_j) - (v_j \cdot w_j) I), \qquad \varphi(v) = \textstyle\sum_i v_i \gamma_i,

so A and B are built from the factors by k products of N x N matrices and the tokens cost two
GEMMs: about :math:`4 d^{3/2}` real multiply-adds per token
for complex matrices (half where rotors are block diagonal, twice for n = 1 mod 4, which keeps
two representations, a quarter where the representation is real: n = 0, 1, 2 mod 8) instead of
an nn.Linear of the same width (:math:`d^2`); the table is in docs/performance.md. The
transforms between coefficients and matrices are numba kernels on the CPU
(:mod:`galinear.rotor_kernels.spinor`), Triton kernels on CUDA for n >= 8 in float32 when triton is
installed (:mod:`galinear.nn.functional.spinor_triton`), and torch index operations otherwise:
the plan chooses (:func:`galinear.nn.functional.plan.spinor_transform`; ``GALINEAR_SPINOR_TRANSFORM=torch``
forces the torch ones) and passes its choice as the option ``transform``. Tokens go through in blocks whose matrices take about 1 MiB (at most :data:`TOKENS_PER_BLOCK`
tokens), so the buffers stay in the caches and their size does not grow with the batch.

The backend computes values only: the exact gradient (:mod:`galinear.nn.dexp`) needs nothing
else (the input gradient is the same map with transposed factors), and
:func:`galinear.nn.functional.rotor_sandwich` runs the differentiable ``"factored"`` backend
where autograd through the map is needed. A direct call whose inputs require gradients while
grad mode is on raises a ValueError. :func:`rotor_matrices` itself is differentiable.
"""
from __future__ import annotations

import weakref

import torch

from galinear import matrix_rep
from galinear.nn.functional import plan as dispatch
from galinear.nn.functional._common import _TABLE_CACHE
from galinear.nn.functional.rotors import simple_rotor_coefficients
from galinear.nn.functional.threads import caller_threads, for_each_block

__all__ = ["TOKENS_PER_BLOCK", "rotor_matrices", "spinor_sandwich", "spinor_sandwich_backward"]

#: Tokens per pass of the transforms and GEMMs (bounds the complex buffers).
TOKENS_PER_BLOCK = 256

_COMPLEX = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def _matrix_dtype(n: int, dtype: torch.dtype) -> torch.dtype:
    """Real ``dtype`` for real representations (n = 0, 1, 2 mod 8), else its complex type."""
    return dtype if matrix_rep.representation(n).real else _COMPLEX[dtype]


def _gammas(n: int, device, dtype) -> torch.Tensor:
    """(irreps, n, N, N) gamma matrices in block order, in ``dtype`` (real for real representations)."""
    key = ("spinor-gammas", n, str(device), dtype)
    if key not in _TABLE_CACHE:
        tab = matrix_rep.representation(n)
        order = tab.order
        mats = [matrix_rep.gamma_matrices(n, rho)[:, order][:, :, order] for rho in range(tab.irreps)]
        stacked = torch.stack([torch.as_tensor(m) for m in mats])
        _TABLE_CACHE[key] = (stacked.real if not dtype.is_complex else stacked).to(device=device, dtype=dtype)
    return _TABLE_CACHE[key]


def rotor_matrices(V: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    r"""Diagonal blocks of :math:`\varphi_\rho(R)` for factors (P, k, n): (P * irreps, H, W, W),
    complex or real (H = 2 blocks of W = N / 2 where rotors are block diagonal, else H = 1 block
    of N; see :class:`galinear.matrix_rep.RepresentationTables`), differentiable."""
    P, k, n = V.shape
    tab = matrix_rep.representation(n)
    cdtype = _matrix_dtype(n, V.dtype)
    gam = _gammas(n, V.device, cdtype)                       # (irreps, n, N, N)
    N = tab.N
    eye = torch.eye(N, dtype=cdtype, device=V.device)
    out = eye.expand(P, tab.irreps, N, N)
    if k:
        cos, sinc = simple_rotor_coefficients(V, W)          # (P, k)
        dot = (V * W).sum(-1)
        Vm = torch.einsum("pki,rimn->pkrmn", V.to(cdtype), gam)
        Wm = torch.einsum("pki,rimn->pkrmn", W.to(cdtype), gam)
        scal = (cos - sinc * dot).to(cdtype)[..., None, None, None]
        factors = scal * eye + sinc.to(cdtype)[..., None, None, None] * (Vm @ Wm)  # (P, k, irreps, N, N)
        out = factors[:, 0]
        for j in range(1, k):
            out = out @ factors[:, j]
    if tab.blocks == 2:
        h = N // 2
        out = torch.stack([out[..., :h, :h], out[..., h:, h:]], dim=-3)   # (P, irreps, 2, h, h)
    else:
        out = out.unsqueeze(-3)
    return out.reshape(P * tab.irreps, tab.blocks, N // tab.blocks, N // tab.blocks)


def _torch_tables(n, device):
    key = ("spinor-index", n, str(device))
    if key not in _TABLE_CACHE:
        tab = matrix_rep.representation(n)
        N = tab.N
        back = torch.tensor(matrix_rep.placement(n))                                   # (r, j) -> q = i N + c
        store = torch.empty_like(back)
        store[back] = torch.arange(N * N)
        had = torch.tensor(matrix_rep.hadamard(N))
        _TABLE_CACHE[key] = tuple(t.to(device) for t in (torch.tensor(tab.slot), back, store, had))
    return _TABLE_CACHE[key]


def _phase(n, device, cdtype):
    key = ("spinor-phase", n, str(device), cdtype)
    if key not in _TABLE_CACHE:
        _TABLE_CACHE[key] = torch.tensor(matrix_rep.representation(n).phase).to(device=device, dtype=cdtype)
    return _TABLE_CACHE[key]


def _transforms(x, n, transform="auto"):
    """("numba" | "triton" | "torch", the Triton module or None): the transforms named by
    ``transform``, the plan's choice (:attr:`galinear.nn.functional.plan.Plan.options`); "auto", a
    call without a plan: :func:`galinear.nn.functional.plan.spinor_transform_for` of x."""
    if transform == "auto":
        transform = dispatch.spinor_transform_for(x.device, n, x.dtype)
    elif transform not in dispatch.SPINOR_TRANSFORMS:
        raise ValueError(f"transform must be 'auto' or one of {dispatch.SPINOR_TRANSFORMS}, got {transform!r}")
    if transform == "triton":
        from galinear.nn.functional import spinor_triton

        return transform, spinor_triton
    return transform, None


def _to_matrix(x: torch.Tensor, start: int, out: torch.Tensor, chosen=None) -> torch.Tensor:
    """out (P * irreps, N, nb, N) = matrices of tokens x[start:start + nb] (rows, token, columns);
    ``chosen``: :func:`_transforms` of x when known."""
    B, P, d = x.shape
    n = d.bit_length() - 1
    tab = matrix_rep.representation(n)
    N = tab.N
    nb = out.shape[2]
    choice, fused = _transforms(x, n) if chosen is None else chosen
    if choice == "numba":
        from galinear.rotor_kernels import spinor as kernels

        kernels.to_matrix(x.detach().numpy(), out.numpy(), start)
        return out
    if choice == "triton":
        return fused.to_matrix(x.detach(), start, out)
    slot, back, _, had = _torch_tables(n, x.device)
    cdtype = _COMPLEX[x.dtype]
    src = x[start:start + nb].unsqueeze(-2).to(cdtype) * _phase(n, x.device, cdtype)   # (nb, P, irreps, d)
    u = torch.zeros(nb, P, tab.irreps, N * N, dtype=cdtype, device=x.device).index_add_(-1, slot, src)
    hat = (had.to(cdtype) @ u.reshape(nb, P, tab.irreps, N, N)).reshape(nb, P * tab.irreps, N * N)
    hat = hat[..., back].reshape(nb, P * tab.irreps, N, N).permute(1, 2, 0, 3)
    out.copy_(hat if out.dtype.is_complex else hat.real)
    return out


def _from_matrix(Y: torch.Tensor, y: torch.Tensor, start: int, chosen=None) -> None:
    """y[start:start + nb] = multivectors of Y (H, P * irreps, N, nb, W), entry (r, j) of token t
    at Y[j // W, g, r, t, j % W]; ``chosen``: :func:`_transforms` of y when known."""
    B, P, d = y.shape
    n = d.bit_length() - 1
    tab = matrix_rep.representation(n)
    N = tab.N
    H, G, _, nb, Wd = Y.shape
    choice, fused = _transforms(y, n) if chosen is None else chosen
    if choice == "numba":
        from galinear.rotor_kernels import spinor as kernels

        kernels.from_matrix(Y.numpy(), y.numpy(), start)
        return
    if choice == "triton":
        fused.from_matrix(Y, y, start)
        return
    slot, _, store, had = _torch_tables(n, y.device)
    cdtype = _COMPLEX[y.dtype]
    flat = Y.permute(1, 3, 2, 0, 4).reshape(P, tab.irreps, nb, N * N).to(cdtype)   # [g, t, r * N + j]
    hat = flat[..., store].reshape(P, tab.irreps, nb, N, N)
    u = (had.to(cdtype) @ hat).reshape(P, tab.irreps, nb, N * N)[..., slot]        # (P, irreps, nb, d)
    value = (torch.conj(_phase(n, y.device, cdtype))[:, None, :] * u).real.sum(1) / tab.scale
    y[start:start + nb] = value.transpose(0, 1).to(y.dtype)


class _Transforms:
    """The transforms of one call between tokens ``x`` and results ``y`` (B, P, d; y None: to matrices
    only), those ``transform`` names (:func:`_transforms`); the numba kernels' tables and arrays are
    prepared once (:class:`galinear.rotor_kernels.spinor.BlockTransforms`), so a token block costs
    its kernels only."""

    def __init__(self, x, y=None, transform="auto"):
        self.x, self.y = x, y
        self.chosen = _transforms(x, x.shape[-1].bit_length() - 1, transform)
        self.kernels = None
        if self.chosen[0] == "numba":
            from galinear.rotor_kernels.spinor import BlockTransforms

            self.kernels = BlockTransforms(x.detach().numpy(), None if y is None else y.numpy())

    def to_matrix(self, start, out):
        """out (P * irreps, N, nb, N) = the matrices of x[start:start + nb]."""
        if self.kernels is not None:
            self.kernels.to_matrix(out.numpy(), start)
            return out
        return _to_matrix(self.x, start, out, self.chosen)

    def from_matrix(self, Y, start):
        """y[start:start + nb] = the multivectors of Y (H, P * irreps, N, nb, W)."""
        if self.kernels is not None:
            self.kernels.from_matrix(Y.numpy(), start)
        else:
            _from_matrix(Y, self.y, start, self.chosen)


class _Buffers:
    """Complex buffers of one token block, reused block after block: X and Z (G, N, nb, N), Y
    (H, G, N, nb, W)."""

    def __init__(self, G, H, Wd, nb, dtype, device):
        N = H * Wd
        self.X = torch.empty(G, N, nb, N, dtype=dtype, device=device)
        self.Z = torch.empty_like(self.X)
        self.Y = torch.empty(H, G, N, nb, Wd, dtype=dtype, device=device)

    def view(self, nb):
        """The buffers cut to the first ``nb`` tokens (the last, shorter block)."""
        if nb == self.X.shape[2]:
            return self.X, self.Z, self.Y
        G, N = self.X.shape[:2]
        H, Wd = self.Y.shape[0], self.Y.shape[-1]
        size = G * N * nb * N
        return (self.X.view(-1)[:size].view(G, N, nb, N), self.Z.view(-1)[:size].view(G, N, nb, N),
                self.Y.view(-1)[:size].view(H, G, N, nb, Wd))


def _products(A, X, B, Z, Y):
    """Z = A X on the rows, Y = Z B on the columns, block by block (A, B (G, H, W, W))."""
    G, H, Wd, _ = A.shape
    N = H * Wd
    nb = X.shape[2]
    torch.matmul(A, X.view(G, H, Wd, nb * N), out=Z.view(G, H, Wd, nb * N))
    columns = Z.view(G, N * nb, H, Wd)
    for b in range(H):
        torch.matmul(columns[:, :, b], B[:, b], out=Y[b].view(G, N * nb, Wd))
    return Y


def _block_size(G, N, element_size):
    """Tokens per block: a matrix buffer of about 1 MiB (it stays in the caches), within [8, TOKENS_PER_BLOCK]."""
    per_token = G * N * N * element_size
    return max(8, min(TOKENS_PER_BLOCK, (1 << 20) // per_token))


def _apply(x, A, B, out, transform="auto"):
    """out = phi^{-1}(A phi(x) B), token block by token block.

    On the CPU inside a single-threaded call (:class:`galinear.nn.functional.threads.intra_op_threads`
    with one thread, as the dispatcher runs this backend) the blocks are shared among as many
    threads as the caller had (:func:`~galinear.nn.functional.threads.caller_threads`), each
    with its own buffers; every block is computed the same way whichever thread takes it.
    """
    total = x.shape[0]
    G, H, Wd, _ = A.shape
    N = H * Wd
    block = min(total, _block_size(G, N, A.element_size()))
    blocks = -(-total // block) if total else 0
    workers = 1
    if x.device.type == "cpu" and blocks > 1 and torch.get_num_threads() == 1:
        workers = caller_threads()

    transforms = _Transforms(x, out, transform)

    def work(next_block):
        buffers = _Buffers(G, H, Wd, block, A.dtype, x.device)
        while (index := next_block()) is not None:
            start = index * block
            X, Z, Y = buffers.view(min(block, total - start))
            transforms.from_matrix(_products(A, transforms.to_matrix(start, X), B, Z, Y), start)

    if blocks:
        for_each_block(blocks, work, workers)
    return out


_MATRIX_CACHE: dict = {}
_MATRIX_CACHE_SIZE = 32


def _identity(t):
    """What a cache entry of :func:`_cached_matrices` compares for a factor tensor: its storage (a
    detached view shares it, and the same storage object), offset, shape, strides and dtype."""
    return (id(t.untyped_storage()), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


def _cached_matrices(VL, WL, VR, WR, dtype):
    """(A, B) of the factors (no autograd history), kept for factor tensors seen before.

    A cache entry holds weak references to the factors' storages and their version counters, so it
    is used only while those storages are alive and unchanged: a layer in eval mode reuses its factors,
    also through the detached views that the exact gradient's map passes here.
    """
    factors = (VL, WL) if VR is None else (VL, WL, VR, WR)
    key = (tuple(_identity(f) for f in factors), dtype)
    entry = _MATRIX_CACHE.get(key)
    if entry is not None:
        refs, versions, matrices = entry
        if (all(r() is f.untyped_storage() for r, f in zip(refs, factors))
                and versions == tuple(f._version for f in factors)):
            return matrices
    with torch.no_grad():
        A = rotor_matrices(VL.to(dtype), WL.to(dtype))
        S = A if VR is None else rotor_matrices(VR.to(dtype), WR.to(dtype))
        B = S.conj().transpose(-1, -2).contiguous()
    for stale in [k for k, (refs, _, _) in _MATRIX_CACHE.items() if any(r() is None for r in refs)]:
        del _MATRIX_CACHE[stale]  # factors gone (e.g. recomputed at every training step)
    if len(_MATRIX_CACHE) >= _MATRIX_CACHE_SIZE:
        _MATRIX_CACHE.pop(next(iter(_MATRIX_CACHE)))
    _MATRIX_CACHE[key] = (tuple(weakref.ref(f.untyped_storage()) for f in factors),
                          tuple(f._version for f in factors), (A, B))
    return A, B


def _bivector_readout(n, device, cdtype):
    """(irreps * N * N, C(n, 2)): column m is conj(phi_rho(e_i e_j)) / s flattened over (rho, row,
    column) in block order ((i, j) the m-th of :func:`galinear.blades.bivector_pairs`), so that the
    bivector coefficients of the multivector with matrices M (irreps, N, N) are Re(M.flatten() @ it)."""
    key = ("spinor-bivector-readout", n, str(device), cdtype)
    if key not in _TABLE_CACHE:
        from galinear.blades import bivector_pairs

        tab = matrix_rep.representation(n)
        pairs = torch.tensor(bivector_pairs(n), dtype=torch.long, device=device).reshape(-1, 2)
        gam = _gammas(n, device, cdtype)                                       # (irreps, n, N, N)
        blades = gam[:, pairs[:, 0]] @ gam[:, pairs[:, 1]]                     # (irreps, M, N, N)
        flat = blades.conj().permute(0, 2, 3, 1).reshape(tab.irreps * tab.N * tab.N, pairs.shape[0])
        _TABLE_CACHE[key] = (flat / tab.scale).contiguous()
    return _TABLE_CACHE[key]


def _correlations(Gm, Ym, out):
    """out (2, G, N, N) = (sum_t Gm_t Ym_t^H, sum_t Ym_t^H Gm_t) for matrices (G, N, nb, N) (rows,
    token, columns): two GEMMs over the block's tokens."""
    G, N, nb, _ = Gm.shape
    torch.matmul(Gm.view(G, N, nb * N), Ym.view(G, N, nb * N).mH, out=out[0])
    torch.matmul(Ym.view(G, N * nb, N).mH, Gm.view(G, N * nb, N), out=out[1])
    return out


def spinor_sandwich_backward(grad, y, VL, WL, VR=None, WR=None, input_grad=True, *, transform="auto"):
    r"""The backward pass of y = R x S~ (``y`` from :func:`spinor_sandwich` with these factors, ``grad``
    = dL/dy, both (..., P, 2**n)), in one pass over the token blocks:
    (dL/dx = R~ G S or None when not ``input_grad``, left, right) with left =
    :math:`\sum_t \langle G_t 	ilde y_t
angle_2` and right = :math:`\sum_t \langle 	ilde y_t G_t
angle_2`,
    each (P, C(n, 2)) in :func:`galinear.blades.bivector_pairs` order, as
    :func:`galinear.nn.dexp.bivector_parts` gives them.

    The representation turns the reverse into the conjugate transpose, so per block of tokens the
    parts are the bivector coefficients of :math:`\sum_t arphi(G_t)arphi(y_t)^H` and
    :math:`\sum_t arphi(y_t)^H arphi(G_t)`: two GEMMs on the matrices that the input gradient's
    products read anyway (:math:`A^H arphi(G) B^H`), plus the transform of y. Each block's parts are
    stored apart and summed in block order, so the result does not depend on which thread took which
    block. Values only. ``transform``: as for :func:`spinor_sandwich`.
    """
    P, d = y.shape[-2:]
    n = d.bit_length() - 1
    dtype = y.dtype
    A, B = _cached_matrices(VL, WL, VR, WR, dtype)
    g = grad.detach().to(dtype).reshape(-1, P, d).contiguous()
    yy = y.detach().reshape(-1, P, d).contiguous()
    total = g.shape[0]
    G, H, Wd, _ = A.shape
    N = H * Wd
    readout = _bivector_readout(n, y.device, A.dtype)
    M = readout.shape[1]
    block = max(1, min(total, _block_size(G, N, A.element_size())))
    blocks = -(-total // block) if total else 0
    parts = torch.zeros(max(blocks, 1), 2, P, M, dtype=dtype, device=y.device)
    out = torch.empty_like(g) if input_grad else None
    AT = A.mH.contiguous() if input_grad else None     # phi(R~)
    BT = B.mH.contiguous() if input_grad else None     # phi(S)
    workers = 1
    if y.device.type == "cpu" and blocks > 1 and torch.get_num_threads() == 1:
        workers = caller_threads()
    of_grad, of_y = _Transforms(g, out, transform), _Transforms(yy, None, transform)

    def work(next_block):
        buffers = _Buffers(G, H, Wd, block, A.dtype, y.device)
        ys = torch.empty_like(buffers.X)
        corr = torch.empty(2, G, N, N, dtype=A.dtype, device=y.device)
        while (index := next_block()) is not None:
            start = index * block
            nb = min(block, total - start)
            X, Z, Yb = buffers.view(nb)
            Gm = of_grad.to_matrix(start, X)
            Ym = of_y.to_matrix(start, ys.view(-1)[:X.numel()].view(X.shape))
            if M:
                parts[index] = torch.real(_correlations(Gm, Ym, corr).view(2, P, -1) @ readout)
            if input_grad:
                of_grad.from_matrix(_products(AT, Gm, BT, Z, Yb), start)

    if blocks:
        for_each_block(blocks, work, workers)
    left, right = parts.sum(0)
    grad_x = None if out is None else out.reshape(grad.shape)
    return grad_x, left, right


def spinor_sandwich(x, VL, WL, VR=None, WR=None, *, transform="auto"):
    """Backend function ``fn(x, VL, WL, VR, WR) -> y`` (x (..., P, 2**n), float32/float64, n >= 1).

    ``transform``: the transforms between multivectors and matrices, "numba", "triton" or "torch"
    (the plan's choice, which :attr:`galinear.nn.functional.plan.Plan.fn` binds), or "auto" (a call
    without a plan: :func:`galinear.nn.functional.plan.spinor_transform_for`). The result carries
    no autograd history (see the module docstring).
    """
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, VL, WL, VR, WR)):
        raise ValueError("the spinor backend computes values only, and these inputs require gradients: "
                         "call galinear.nn.functional.rotor_sandwich (it runs the differentiable "
                         "'factored' backend when autograd is needed), use backend='factored', or "
                         "run under torch.no_grad()")
    if x.dtype not in _COMPLEX:
        raise TypeError(f"the spinor backend supports float32 and float64, got {x.dtype}; use backend='factored' "
                        "or cast x")
    lead = x.shape[:-2]
    P, d = x.shape[-2:]
    if d < 2:
        raise ValueError("the spinor backend needs n >= 1 (2**n >= 2 coefficients)")
    dtype = x.dtype
    A, B = _cached_matrices(VL, WL, VR, WR, dtype)
    flat = x.detach().reshape(-1, P, d).contiguous()
    return _apply(flat, A, B, torch.empty_like(flat), transform).reshape(*lead, P, d)


#: the fused backward pass that :func:`galinear.nn.dexp.exact_rotor_sandwich` runs for this backend
spinor_sandwich.backward = spinor_sandwich_backward
#: the options of :attr:`galinear.nn.functional.plan.Plan.options` this backend takes
spinor_sandwich.plan_options = ("transform",)
