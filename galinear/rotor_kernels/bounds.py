"""Bounds checks made once at the boundary of the compiled kernels, before any of them runs.

numba compiles its loops without bounds checks (and wraps a negative index around once), so an
index table or a permutation with a value outside its axis would read or write memory outside an
array: a wrong result at best, a segmentation fault at worst. The Python wrappers of
:mod:`galinear.rotor_kernels.spinor` therefore check every shape, every dtype and every index array
against the axis it indexes here, and raise ValueError naming the argument; the kernels then only
see arguments whose every access is in bounds.
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit

__all__ = ["check_index", "check_gadget", "check_network", "gadget_in_bounds", "network_in_bounds"]


# ------------------------------------------------------------------ compiled: every call, microseconds
@jit
def _in_range(a, high):
    for v in a.ravel():
        if v < 0 or v >= high:
            return False
    return True


@jit
def _gadget_width(g, width):
    """The output width of gadget tuple ``g`` reading tokens of ``width``, or -1 when an access
    of :func:`galinear.rotor_kernels.spinor._gadget_kernel` would leave an array."""
    in_index, out_index, out_scale, pair_scale, Ar, Ai, Br, Bi, src, sgn, shared, back, tgt, sgnc, scale, cplx = g
    I, c = in_index.shape
    P = pair_scale.shape[0]
    irreps = src.shape[0]
    H, W = Ar.shape[2], Ar.shape[3]
    N = H * W
    NN = N * N
    parts = 2 if cplx else 1
    if I < 1 or c < 1 or P < 1 or P % I != 0 or not _in_range(in_index, width):
        return -1
    J = P // I
    if out_index.shape[0] < J * c or not _in_range(out_index, out_scale.shape[0]):
        return -1
    for block in (Ar, Ai, Br, Bi):
        if (block.shape[0] != P or block.shape[1] != irreps or block.shape[2] != H or block.shape[3] != W
                or block.shape[4] != W):
            return -1
    if (src.shape[1] != 2 or src.shape[2] != parts * NN or sgn.shape[0] != irreps or sgn.shape[1] != 2
            or sgn.shape[2] != parts * NN or not _in_range(src, c)):
        return -1
    if back.shape[0] != NN or not _in_range(back, NN):
        return -1
    if (tgt.shape[0] != irreps or tgt.shape[1] != c or sgnc.shape[0] != irreps or sgnc.shape[1] != c
            or not _in_range(tgt, parts * NN)):
        return -1
    return out_scale.shape[0]


@jit
def _network_ok(x, gadgets, input_perm, hidden_perms, branch):
    L, breadth = branch.shape
    if len(gadgets) != 2 + L * breadth:
        return False
    width = _gadget_width(gadgets[0], x.shape[1])
    hidden = input_perm.shape[0]
    if width < 0 or not _in_range(input_perm, width):
        return False
    if hidden_perms.shape[0] != L or hidden_perms.shape[1] != breadth or (L > 0 and hidden_perms.shape[2] != hidden):
        return False
    for layer in range(L):
        for b in range(breadth):
            out = _gadget_width(gadgets[1 + layer * breadth + b], hidden)
            if out < 0 or not _in_range(hidden_perms[layer, b], out):
                return False
    return _gadget_width(gadgets[len(gadgets) - 1], hidden) >= 0


def check_tokens(x) -> None:
    """``x`` must be a (tokens, width) float32 or float64 numpy array (the kernels' dtypes)."""
    _array(x, "x", 2, "f")
    if x.dtype not in (np.float32, np.float64):
        raise ValueError(f"x must be float32 or float64, got {x.dtype}")


def gadget_in_bounds(x, gadget, out) -> None:
    """Raise ValueError (naming the argument) unless every access of the gadget kernel to ``x``,
    the tuple ``gadget`` (:func:`galinear.rotor_kernels.spinor.gadget_tuple`) and ``out`` is in bounds."""
    check_tokens(x)
    if not isinstance(out, np.ndarray) or out.ndim != 2 or out.shape[0] != x.shape[0] or out.dtype != x.dtype:
        raise ValueError(f"out must be a {x.dtype} array of shape ({x.shape[0]}, out_features), got "
                         f"{getattr(out, 'dtype', type(out).__name__)} {getattr(out, 'shape', '')}")
    if _gadget_width(gadget, x.shape[1]) != out.shape[1]:
        width = check_gadget(x.shape[1], x.dtype, *gadget[:8], tables=(gadget[8], gadget[9], gadget[11],
                                                                       gadget[12], gadget[13]))
        if width != out.shape[1]:
            raise ValueError(f"out has {out.shape[1]} columns, the gadget writes {width}")
        raise ValueError("the gadget's index tables do not fit its matrices; build it with "
                         "galinear.rotor_kernels.spinor.gadget_tuple")


def network_in_bounds(x, gadgets, input_perm, hidden_perms, branch) -> None:
    """Raise ValueError (naming the argument) unless every access of
    :func:`galinear.rotor_kernels.spinor.network_forward` is in bounds: one compiled pass over the index
    tables and permutations, and the detailed checks of :func:`check_network` for the message."""
    check_tokens(x)
    for value, name, ndim, kinds in ((branch, "branch weights", 2, "f"),
                                     (input_perm, "input permutation", 1, "iu"),
                                     (hidden_perms, "hidden permutations", 3, "iu")):
        _array(value, name, ndim, kinds)
    if not _network_ok(x, gadgets, input_perm, hidden_perms, branch):
        check_network(x, gadgets, input_perm, hidden_perms, branch)
        raise ValueError("the rotor network's index tables do not fit its matrices; build its gadgets with "
                         "galinear.rotor_kernels.spinor.gadget_tuple")


# ------------------------------------------------------------------ detailed: for the message


def _array(value, name: str, ndim: int, kinds: str):
    if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype.kind not in kinds:
        kind = "integer" if kinds == "iu" else "floating-point"
        raise ValueError(f"{name} must be a {ndim}-dimensional {kind} numpy array, got "
                         f"{getattr(value, 'dtype', type(value).__name__)} {getattr(value, 'shape', '')}")
    return value


def check_index(index, name: str, size: int, ndim: int = 1) -> None:
    """Every entry of the integer array ``index`` must lie in 0..size-1 (the axis it indexes)."""
    _array(index, name, ndim, "iu")
    if index.size and (int(index.min()) < 0 or int(index.max()) >= size):
        raise ValueError(f"{name} holds values from {int(index.min())} to {int(index.max())}, but the axis it "
                         f"indexes has {size} entries (valid 0..{size - 1}); the index table is damaged")


def check_gadget(x_width: int, dtype, in_index, out_index, out_scale, pair_scale, Ar, Ai, Br, Bi, tables=None,
                 name: str = "gadget") -> int:
    """Check the arguments of one chunked rotor layer read by a kernel; returns its output width.

    ``x_width``: the width of the tokens it reads; ``tables``: (src, sgn, back, tgt, sgnc) as
    passed to the kernel, which must be galinear's own tables of the chunk size.
    """
    from galinear.rotor_kernels.spinor_tables import kernel_tables
    from galinear.matrix_rep import representation

    _array(in_index, f"{name} input index", 2, "iu")
    inputs, c = in_index.shape
    n = c.bit_length() - 1
    if inputs < 1 or c < 2 or 1 << n != c:
        raise ValueError(f"{name} input index must have shape (chunks >= 1, 2**n >= 2), got {in_index.shape}")
    check_index(in_index, f"{name} input index", x_width, ndim=2)
    _array(pair_scale, f"{name} pair weights", 1, "f")
    pairs = pair_scale.shape[0]
    if pairs < 1 or pairs % inputs:
        raise ValueError(f"{name}: {pairs} pair weights is not a multiple of its {inputs} input chunks")
    outputs = pairs // inputs
    _array(out_scale, f"{name} output scale", 1, "f")
    _array(out_index, f"{name} output index", 1, "iu")
    if out_index.shape[0] < outputs * c:
        raise ValueError(f"{name} output index has {out_index.shape[0]} entries, {outputs} output chunks of {c} "
                         f"need {outputs * c}")
    check_index(out_index, f"{name} output index", out_scale.shape[0])
    tab = representation(n)
    shape = (pairs, tab.irreps, tab.blocks, tab.N // tab.blocks, tab.N // tab.blocks)
    for label, block in (("A", Ar), ("A imaginary part", Ai), ("B", Br), ("B imaginary part", Bi)):
        _array(block, f"{name} {label}", 5, "f")
        if block.shape != shape or block.dtype != np.dtype(dtype):
            raise ValueError(f"{name} {label} must be a {np.dtype(dtype)} array of shape {shape} (pairs, irreps, "
                             f"blocks, width, width) for chunks of {c}, got {block.dtype} {block.shape}")
    for label, value in (("pair weights", pair_scale), ("output scale", out_scale)):
        if value.dtype != np.dtype(dtype):
            raise ValueError(f"{name} {label} must be {np.dtype(dtype)} like the tokens, got {value.dtype}")
    if tables is not None:
        own = kernel_tables(n, dtype)
        if any(a is not b for a, b in zip(tables, own)):
            raise ValueError(f"{name}: the index tables are not galinear's tables of Cl({n}) in {np.dtype(dtype)}; "
                             "build the gadget with galinear.rotor_kernels.spinor.gadget_tuple")
    return out_scale.shape[0]


def check_network(x, gadgets, input_perm, hidden_perms, branch) -> None:
    """Check the arguments of :func:`galinear.rotor_kernels.spinor.network_forward` (every width and
    every permutation against the axis it indexes)."""
    _array(x, "x", 2, "f")
    _array(branch, "branch weights", 2, "f")
    layers, breadth = branch.shape
    if len(gadgets) != 2 + layers * breadth:
        raise ValueError(f"{len(gadgets)} gadgets given, a network of {layers} hidden layers of {breadth} branches "
                         f"has {2 + layers * breadth}")
    _array(input_perm, "input permutation", 1, "iu")
    _array(hidden_perms, "hidden permutations", 3, "iu")
    if hidden_perms.shape[:2] != (layers, breadth):
        raise ValueError(f"hidden permutations must have shape ({layers}, {breadth}, hidden), got "
                         f"{hidden_perms.shape}")

    def gadget(index, width, name):
        g = gadgets[index]
        if len(g) != 16:
            raise ValueError(f"{name} must be a tuple made by galinear.rotor_kernels.spinor.gadget_tuple")
        return check_gadget(width, x.dtype, *g[:8], tables=(g[8], g[9], g[11], g[12], g[13]), name=name)

    width = gadget(0, x.shape[1], "input gadget")
    check_index(input_perm, "input permutation", width)
    hidden = input_perm.shape[0]
    if layers and hidden_perms.shape[2] != hidden:
        raise ValueError(f"hidden permutations have length {hidden_perms.shape[2]}, the input permutation "
                         f"{hidden}; both permute the hidden width")
    for layer in range(layers):
        for b in range(breadth):
            out = gadget(1 + layer * breadth + b, hidden, f"hidden gadget ({layer}, {b})")
            check_index(hidden_perms[layer, b], f"hidden permutation ({layer}, {b})", out)
    gadget(len(gadgets) - 1, hidden, "output gadget")
