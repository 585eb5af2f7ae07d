r"""The exact derivative of the rotor exponential, and rotor maps whose gradient uses it.

A rotor layer computes :math:`y = R\,x\,\tilde S` with :math:`R = \exp(B)`, :math:`S = \exp(C)`
for bivectors B, C of Euclidean Cl(n). The exponential is smooth everywhere (at B = 0 and at
equal angles too), so its gradient is well defined even where the planes of the invariant
decomposition are not. This module computes it exactly, without differentiating the
decomposition (derivation in docs/nn.md, section "The exact gradient"; proof in
``proofs/dexp.py``):

.. math::

    \frac{\partial L}{\partial B} = \varphi(\mathrm{ad}_B)\Big(\sum_t \langle G_t \tilde y_t\rangle_2\Big),
    \qquad
    \frac{\partial L}{\partial C} = -\varphi(\mathrm{ad}_C)\Big(\sum_t \langle \tilde y_t G_t\rangle_2\Big),
    \qquad \varphi(z) = \frac{1 - e^{-z}}{z},

with :math:`G_t = \partial L / \partial y_t`, :math:`\mathrm{ad}_B H = BH - HB` on bivectors, and
:math:`\langle\cdot\rangle_2` the bivector part. :math:`\mathrm{ad}_B` acts on the skew matrix
of H as :math:`X \mapsto 2(AX - XA)` (A the skew matrix of B), so in the eigenbasis of the
Hermitian matrix :math:`iA = U \mathrm{diag}(\mu) U^H` it scales entry (a, b) by
:math:`\varphi(2i(\mu_b - \mu_a))`. :math:`\varphi(iy) = \mathrm{sinc}(y) - i(1 - \cos y)/y` is
entire, so the formula is finite and smooth at equal angles and at zero: no divided difference
has to be guarded.

Every exact rotor map of galinear goes through one autograd Function per op: :class:`SandwichMap`
(the sandwich x -> R x S~ applied by any forward-only backend), :class:`ParityBlocksMap` (the
parity blocks of its matrix: the layers' matrix paths) and :class:`RotorExp` (the rotor exp(B)
itself). They differ only in how the bivector parts are read from the output gradient;
:math:`\varphi(\mathrm{ad}_B)` is applied in one place (:func:`_parameter_grads`), from the
eigen-decomposition that also gave the planes (:func:`galinear.nn.functional.exact_factors`), so
one eigh per rotor serves a whole training step.

The backward pass needs only the output y (the map is orthogonal, so the input gradient is the
transposed map of G, applied by the same backend with the reversed factors) and the bivector
parts above: :math:`O(n^2 2^n)` per token and chunk pair, plus :math:`O(n^3)` per rotor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from galinear.nn.functional._common import _wrapped
from galinear.nn.functional.backends import _check_factors
from galinear.nn.functional.decomposition import Spectrum, bivector_to_skew, skew_to_bivector, spectrum
from galinear.nn.functional.matrices import (
    blocks_bivector_parts,
    correlation_bivector_parts,
    from_parity_order,
    full_from_blocks,
    parity_blocks,
    part_tables,
)
from galinear.nn.functional.plan import bivector_parts_method
from galinear.nn.functional.threads import caller_threads, intra_op_threads
from galinear.nn.functional.rotors import compose_rotors

__all__ = [
    "ParityBlocksMap",
    "RotorExp",
    "SandwichCall",
    "SandwichMap",
    "phi_ad",
    "bivector_parts",
    "rotor_exp",
    "exact_rotor_sandwich",
    "exact_parity_blocks",
    "exact_sandwich_matrices",
    "transposed_factors",
]


# ---------------------------------------------------------------------------------------------
# Functions of ad_B through the eigen-decomposition of the skew matrix.

def phi_ad(bivector: torch.Tensor, value: torch.Tensor, spec: Spectrum | None = None) -> torch.Tensor:
    r""":math:`\varphi(\mathrm{ad}_B)(H)`, :math:`\varphi(z) = (1 - e^{-z})/z`, batched over leading axes.

    Maps the right-trivialised gradient :math:`\langle G \tilde R\rangle_2` of a loss in
    :math:`R = \exp(B)` to its gradient in B. Not differentiable (it is a backward-pass formula).
    Computed in float64 (complex128) whatever the input dtype, then cast back; :math:`\psi(z) =
    (e^z - 1)/z = \varphi(-z)` is ``phi_ad(-B, H)``. ``spec``: B's
    :class:`~galinear.nn.functional.Spectrum`, if already computed (then no eigen-decomposition
    runs here).
    """
    m = bivector.shape[-1]
    if value.shape[-1] != m:
        raise ValueError(f"bivector and value must both hold C(n, 2) = {m} coefficients, got {value.shape[-1]}")
    if m == 0:
        return value.clone()
    dtype = value.dtype
    if spec is None:
        spec = spectrum(bivector)
    mu, U = spec
    X = bivector_to_skew(value.detach().to(torch.float64)).to(torch.complex128)
    y = 2.0 * (mu.unsqueeze(-2) - mu.unsqueeze(-1))           # z_ab = 2 (lambda_a - lambda_b) = i y_ab
    sinc = torch.sinc(y / torch.pi)                           # sin(y) / y, 1 at y = 0
    half = y / 2
    one_minus_cos_over_y = torch.sin(half) * torch.sinc(half / torch.pi)  # (1 - cos y) / y
    factor = torch.complex(sinc, -one_minus_cos_over_y)       # phi(iy)
    Uh = U.mH
    result = (U @ (factor * (Uh @ X @ U)) @ Uh).real
    return skew_to_bivector(result).to(dtype)


# ---------------------------------------------------------------------------------------------
# Bivector parts of products of two multivectors.

def _plain(*tensors) -> bool:
    """Whether every tensor is an ordinary one (not wrapped by a torch.func transform such as
    vmap or grad): only those may leave torch for a compiled kernel."""
    return not any(_wrapped(t) for t in tensors)


def _numba_parts_usable(a: torch.Tensor) -> bool:
    """Whether the numba kernel can take these tensors (plain float32/float64); whether it runs is
    :func:`~galinear.nn.functional.plan.bivector_parts_method`'s choice (it also asks whether numba compiles)."""
    return a.dtype in (torch.float32, torch.float64) and _plain(a)


#: The ways :func:`bivector_parts` sums the parts (:func:`galinear.nn.functional.plan.bivector_parts_method`).
PARTS_METHODS = ("correlation", "numba", "gather")


def bivector_parts(a: torch.Tensor, b: torch.Tensor, kernel: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    r"""Summed bivector parts :math:`\sum_t \langle a_t \tilde b_t\rangle_2` and
    :math:`\sum_t \langle \tilde b_t a_t\rangle_2` for a, b of shape (T, P, 2**n): each (P, C(n, 2)).

    ``kernel``: a method of :data:`PARTS_METHODS`, as a plan names it (:attr:`Plan.parts
    <galinear.nn.functional.plan.Plan>`): "correlation" (one batched matrix product per chunk
    pair), "gather" (one gather pass per blade) or "numba"
    (:mod:`galinear.rotor_kernels.bivector_parts`: every blade from one resident pass, CPU only);
    or "torch" (correlation for small chunks, gather above; the limit is
    :func:`galinear.nn.functional.plan.bivector_parts_method`'s) or "auto" (that function's
    choice: numba above the limit on the CPU when it compiles and the tensors are plain, torch
    otherwise).
    """
    if kernel not in ("auto", "torch") + PARTS_METHODS:
        raise ValueError(f"kernel must be 'auto', 'torch' or one of {PARTS_METHODS}, got {kernel!r}")
    if a.shape != b.shape or a.dim() != 3:
        raise ValueError(f"a and b must both be (T, P, 2**n), got {tuple(a.shape)} and {tuple(b.shape)}")
    d = a.shape[-1]
    n = d.bit_length() - 1
    gather, signs = part_tables(n, a.device, a.dtype)
    M = gather.shape[0]
    P = a.shape[1]
    if M == 0:
        empty = a.new_zeros(P, 0)
        return empty, empty
    if kernel in PARTS_METHODS:
        method = kernel
    else:
        method = bivector_parts_method(d, a.device, kernel == "auto" and a.device.type == "cpu"
                                       and _numba_parts_usable(a) and _plain(b))
    if method == "numba":
        if a.device.type != "cpu":
            raise ValueError(f"kernel='numba' runs on the CPU only, got tensors on {a.device}; use kernel='torch'")
        from galinear.rotor_kernels.bivector_parts import bivector_parts as numba_parts

        left, right = numba_parts(a.detach().contiguous().numpy(), b.detach().to(a.dtype).contiguous().numpy())
        return torch.from_numpy(left), torch.from_numpy(right)
    if method == "correlation":
        # corr[p, i, c] = sum_t a[t, p, i] b[t, p, c]
        return correlation_bivector_parts(torch.bmm(a.permute(1, 2, 0), b.permute(1, 0, 2)))
    at = a.permute(2, 1, 0)  # (d, P, T): rows gathered whole
    bt = b.permute(2, 1, 0)
    sums = torch.stack([(at.index_select(0, gather[m]) * bt).sum(-1) for m in range(M)])  # (M, d, P)
    parts = torch.einsum("mdp,mds->spm", sums, signs)  # (2, P, M)
    return parts[0], parts[1]


# ---------------------------------------------------------------------------------------------
# The one gradient boundary of exact rotor maps.

def transposed_factors(V: torch.Tensor, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Factors of the reverse R~ = R_{k-1}~ ... R_0~ of R = R_0 ... R_{k-1}: order flipped,
    v and w swapped (w ^ v = -(v ^ w))."""
    return W.flip(-2), V.flip(-2)


@dataclass(frozen=True)
class SandwichCall:
    """How :class:`SandwichMap` applies the map: ``apply(x, VL, WL, VR, WR)``, the forward-only
    function of a sandwich backend (the plan's), applied to x (..., P, 2**n) (S = R when the right
    factors are None). ``threads``: the intra-op thread count the backward pass runs with (the one
    the forward call ran with, :func:`galinear.nn.functional.plan.plan`'s; None: as the caller set
    them) and ``workers`` the caller's count at the forward call, which a single-threaded backend
    shares its token blocks among (:func:`galinear.nn.functional.threads.caller_threads`).
    Autograd runs the backward pass after the forward call has returned, outside its thread
    setting. ``backward``: the backend's own backward pass, ``apply.backward`` where the backend
    function has one (:func:`galinear.nn.functional.spinor.spinor_sandwich_backward`):
    ``backward(grad, y, VL, WL, VR, WR, input_grad) -> (grad_x or None, left, right)``, the
    transposed map and the summed bivector parts of :func:`bivector_parts` in one pass; it runs
    where the parameter gradient is needed, without a graph of the backward pass, on plain tensors.
    ``parts``: how the backward pass sums the bivector parts otherwise (the plan's
    :attr:`~galinear.nn.functional.plan.Plan.parts`, a method of :data:`PARTS_METHODS`; None:
    :func:`bivector_parts`'s "auto").
    """

    apply: Callable
    threads: int | None = None
    workers: int | None = None
    backward: Callable | None = None
    parts: str | None = None


def _flat(x, P, d):
    return x.reshape(-1, P, d)


def _save(ctx, output, BL, BR, VL, WL, VR, WR, muL, UL, muR, UR):
    """Keeps what a backward pass reads: the output, the bivectors, their factors and spectra."""
    ctx.single = BR is None
    ctx.spectra = (muL is not None, muR is not None)
    tensors = [output, BL, VL, WL]
    if not ctx.single:
        tensors += [BR, VR, WR]
    tensors += [t for t in (muL, UL, muR, UR) if t is not None]
    ctx.save_for_backward(*tensors)


def _saved(ctx):
    """(y, BL, BR, VL, WL, VR, WR, left spectrum, right spectrum) as :func:`_save` kept them."""
    saved = list(ctx.saved_tensors)
    y, BL, VL, WL = saved[:4]
    rest = saved[4:]
    BR = VR = WR = None
    if not ctx.single:
        BR, VR, WR = rest[:3]
        rest = rest[3:]
    specL = specR = None
    if ctx.spectra[0]:
        specL, rest = Spectrum(rest[0], rest[1]), rest[2:]
    if ctx.spectra[1]:
        specR = Spectrum(rest[0], rest[1])
    return y, BL, BR, VL, WL, VR, WR, specL, specR


def _parameter_grads(single, left, right, BL, BR, specL, specR):
    """(grad of B, grad of C) from the bivector parts <G y~>_2 (left) and <y~ G>_2 (right)."""
    if single:
        return phi_ad(BL, (left - right).to(BL.dtype), specL), None
    return phi_ad(BL, left.to(BL.dtype), specL), -phi_ad(BR, right.to(BR.dtype), specR)


def _one_by_one(function, info, in_dims, args):
    """A vmap rule: the batch run one entry at a time, the results stacked."""
    def select(i):
        return [a if dim is None or a is None else a.select(dim, i) for a, dim in zip(args, in_dims)]

    return torch.stack([function.apply(*select(i)) for i in range(info.batch_size)]), 0


class SandwichMap(torch.autograd.Function):
    r"""y = R x S~ applied by a forward-only backend, with the exact gradient: x-gradient by the
    transposed map, bivector gradients through :math:`\varphi(\mathrm{ad}_B)` of the summed
    bivector parts of the output gradient with y.

    Inputs: x (..., P, 2**n), the left and right bivectors (right None for S = R), their factors
    (VL, WL, VR, WR; constants), the left and right spectra (mu, U; None to compute them in the
    backward pass) and a :class:`SandwichCall`. Works with torch.func (vmap, grad, jacrev): the
    vmap rule folds a batch of inputs into the token axis, and a batch of rotors runs one by one.
    """

    @staticmethod
    def forward(x, BL, BR, VL, WL, VR, WR, muL, UL, muR, UR, call):
        P, d = x.shape[-2:]
        return call.apply(_flat(x, P, d), VL, WL, VR, WR).reshape(x.shape)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, BL, BR, VL, WL, VR, WR, muL, UL, muR, UR, call = inputs
        ctx.call = call
        _save(ctx, output, BL, BR, VL, WL, VR, WR, muL, UL, muR, UR)

    @staticmethod
    def backward(ctx, grad):
        with intra_op_threads(ctx.call.threads, ctx.call.workers):
            grad_x, grad_l, grad_r = SandwichMap._backward(ctx, grad)
        return grad_x, grad_l, grad_r, None, None, None, None, None, None, None, None, None

    @staticmethod
    def _backward(ctx, grad):
        y, BL, BR, VL, WL, VR, WR, specL, specR = _saved(ctx)
        call = ctx.call
        parts = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
        if call.backward is not None and parts and not torch.is_grad_enabled() and _plain(grad, y):
            grad_x, left, right = call.backward(grad, y, VL, WL, VR, WR, ctx.needs_input_grad[0])
            return (grad_x, *_parameter_grads(ctx.single, left, right, BL, BR, specL, specR))
        grad_x = None
        if ctx.needs_input_grad[0]:
            # the transposed map y -> R~ y S: left rotor R~, right rotor S~ (whose reverse is S)
            TL = transposed_factors(VL, WL)
            TR = TL if ctx.single else transposed_factors(VR, WR)
            grad_x = SandwichMap.apply(grad.contiguous(), None, None, TL[0], TL[1], TR[0], TR[1],
                                       None, None, None, None, call)
        if not parts:
            return grad_x, None, None
        P, d = y.shape[-2:]
        # one batched product or one parallel loop: no barrier storm, so the caller's threads
        with intra_op_threads(call.workers if call.threads is not None else None):
            # the plan's method; "auto" without a plan, or for tensors a torch.func transform wraps
            method = call.parts if call.parts is not None and _plain(grad, y) else "auto"
            left, right = bivector_parts(_flat(grad, P, d).to(y.dtype), _flat(y, P, d), method)  # <G y~>_2, <y~ G>_2
        return (grad_x, *_parameter_grads(ctx.single, left, right, BL, BR, specL, specR))

    @staticmethod
    def vmap(info, in_dims, x, BL, BR, VL, WL, VR, WR, muL, UL, muR, UR, call):
        args = (x, BL, BR, VL, WL, VR, WR, muL, UL, muR, UR, call)
        if all(dim is None for dim in in_dims[1:11]):
            # a batch of inputs is more tokens for the same rotors
            return SandwichMap.apply(x.movedim(in_dims[0], 0), *args[1:]), 0
        return _one_by_one(SandwichMap, info, in_dims, args)


class ParityBlocksMap(torch.autograd.Function):
    r"""The parity blocks (P, 2, h, h) of the matrices of x -> R x S~ (the layers' matrix paths),
    with the exact gradient in the bivectors: the bivector parts are read from the blocks'
    gradient (:func:`~galinear.nn.functional.matrices.blocks_bivector_parts`), then
    :math:`\varphi(\mathrm{ad}_B)`. Inputs as :class:`SandwichMap`'s without x and the call."""

    @staticmethod
    def forward(BL, BR, VL, WL, VR, WR, muL, UL, muR, UR):
        return parity_blocks((VL, WL), None if VR is None else (VR, WR))

    @staticmethod
    def setup_context(ctx, inputs, output):
        _save(ctx, output, *inputs)

    @staticmethod
    def backward(ctx, grad):
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            return (None,) * 10
        y, BL, BR, VL, WL, VR, WR, specL, specR = _saved(ctx)
        left, right = blocks_bivector_parts(grad, y)
        return (*_parameter_grads(ctx.single, left, right, BL, BR, specL, specR),) + (None,) * 8

    @staticmethod
    def vmap(info, in_dims, *args):
        return _one_by_one(ParityBlocksMap, info, in_dims, args)


class RotorExp(torch.autograd.Function):
    r"""R = exp(B) as a multivector (..., 2**n) from an exact decomposition (V, W) of B (constants),
    with the exact gradient :math:`\varphi(\mathrm{ad}_B)(\langle G \tilde R\rangle_2)`.
    Inputs: B, V, W and B's spectrum (mu, U; None to compute it in the backward pass)."""

    @staticmethod
    def forward(B, V, W, mu, U):
        return compose_rotors(V, W)

    @staticmethod
    def setup_context(ctx, inputs, output):
        B, V, W, mu, U = inputs
        _save(ctx, output, B, None, V, W, None, None, mu, U, None, None)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        y, B, _, _, _, _, _, spec, _ = _saved(ctx)
        d = y.shape[-1]
        left, _ = bivector_parts(grad.reshape(1, -1, d).to(y.dtype), y.reshape(1, -1, d), "torch")  # <G R~>_2
        return phi_ad(B, left.reshape(B.shape).to(B.dtype), spec), None, None, None, None

    @staticmethod
    def vmap(info, in_dims, *args):
        return _one_by_one(RotorExp, info, in_dims, args)


def _spectra(spectra):
    if spectra is None:
        return None, None
    return spectra.mu, spectra.U


def rotor_exp(bivector: torch.Tensor, factors=None, spec: Spectrum | None = None) -> torch.Tensor:
    r"""exp(B) as a multivector (..., 2**n), differentiable with the exact gradient.

    ``factors``: an exact decomposition (V, W) of ``bivector`` (default: computed with
    :func:`galinear.nn.functional.exact_factors`, whose spectrum the gradient then reuses).
    """
    from galinear.nn.functional.decomposition import exact_factors

    if factors is None:
        V, W, spec = exact_factors(bivector)
    else:
        V, W = (t.detach() for t in factors)
    return RotorExp.apply(bivector, V, W, *_spectra(spec))


def _check_pair(right_bivectors, right):
    if (right_bivectors is None) != (right is None):
        raise ValueError("give right_bivectors and right factors together (both None for S = R)")


def exact_parity_blocks(left_bivectors, right_bivectors, left, right=None, spectra=(None, None)) -> torch.Tensor:
    """:func:`galinear.nn.functional.parity_blocks` of exact factor pairs, differentiable in the
    bivectors (the factors are constants: the gradient is that of exp, through :class:`ParityBlocksMap`).
    ``spectra``: the bivectors' spectra (left, right) when known."""
    _check_pair(right_bivectors, right)
    VL, WL = (t.detach() for t in left)
    VR, WR = (None, None) if right is None else (t.detach() for t in right)
    return ParityBlocksMap.apply(left_bivectors, right_bivectors, VL, WL, VR, WR,
                                 *_spectra(spectra[0]), *_spectra(spectra[1]))


def exact_sandwich_matrices(left_bivectors, right_bivectors, left, right=None) -> torch.Tensor:
    """(P, 2**n, 2**n) matrices M_p of x -> R_p x S_p~ (S = R when ``right_bivectors`` is None),
    shortlex basis, exact gradient in the bivectors; see :func:`exact_parity_blocks`."""
    n = left[0].shape[-1]
    if n == 0:  # Cl(0): the 1 x 1 identity
        return left[0].new_ones(left[0].shape[0], 1, 1)
    return from_parity_order(full_from_blocks(exact_parity_blocks(left_bivectors, right_bivectors, left, right)), n)


def exact_rotor_sandwich(x, left_bivectors, right_bivectors, left, right=None, backend: str | Callable = "auto",
                         spectra=(None, None), threads: int | None = None, parts: str | None = None):
    r"""y[b, p] = R_p x[b, p] S_p~ with R = exp(B), S = exp(C), and the exact gradient in B, C.

    Parameters
    ----------
    x : (..., P, 2**n).
    left_bivectors, right_bivectors : (P, C(n, 2)); ``right_bivectors=None`` for S = R.
    left, right : exact factor pairs (V, W) of the bivectors (``right`` None for S = R), e.g.
        from :func:`galinear.nn.functional.exact_factors`; treated as constants.
    backend : the sandwich backend that applies the factors (forward and transposed map): a
        registered name or "auto" (resolved here), or the backend's function itself (the rotor
        layers pass their plan's, :attr:`galinear.nn.functional.plan.Plan.fn`).
    spectra : (left, right) :class:`~galinear.nn.functional.Spectrum` of the bivectors, when the
        decomposition computed them (then the backward pass runs no eigen-decomposition).
    threads : intra-op threads for the backward pass (the plan's count that the caller runs the
        forward call with, :class:`galinear.nn.functional.plan.intra_op_threads`); None: the
        caller's count at the time autograd runs it.
    parts : how the backward pass sums the bivector parts (the plan's
        :attr:`~galinear.nn.functional.plan.Plan.parts`); None: :func:`bivector_parts`'s "auto".
    """
    from galinear.nn import functional as F

    _check_pair(right_bivectors, right)
    if not isinstance(x, torch.Tensor) or x.dim() < 2:
        raise ValueError("x must be a tensor of shape (..., P, 2**n)")
    d = x.shape[-1]
    n = d.bit_length() - 1
    if 2**n != d:
        raise ValueError(f"the last axis of x must hold 2**n coefficients, got {d}")
    P = x.shape[-2]
    _check_factors("left", left, P, n)
    if right is not None:
        _check_factors("right", right, P, n)
    fn = backend if callable(backend) else F.resolve_sandwich_backend(backend, x.device, x.dtype)[1]
    call = SandwichCall(fn, intra_op_threads(threads).count,  # a bad count raises here, not in backward
                        caller_threads(), getattr(fn, "backward", None), parts)
    VL, WL = (t.detach() for t in left)
    VR, WR = (None, None) if right is None else (t.detach() for t in right)
    return SandwichMap.apply(x, left_bivectors, right_bivectors, VL, WL, VR, WR,
                             *_spectra(spectra[0]), *_spectra(spectra[1]), call)
