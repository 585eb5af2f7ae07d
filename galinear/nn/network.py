r"""The paper's q/k/v rotor network (RotorNetwork): RotorLinear gadgets, LayerNorm, one PReLU.

Pence, Yamada & Singh, "Composing Linear Layers from Irreducibles", NeurIPS 2025, Section 5
(restated in docs/nn.md).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from galinear._generated import rotor_spec
from galinear.nn import functional as F
from galinear.nn.functional import plan as dispatch
from galinear._limits import check_count, check_max_iter, check_tolerance, rotor_linear_size
from galinear._util import count_parameters
from galinear.nn import rotor as _rotor
from galinear.nn.checks import _check_allocation, _check_float_dtype, _check_input, _finite_or_raise
from galinear.nn.dexp import exact_parity_blocks, exact_rotor_sandwich
from galinear.nn.functional.branches import branch_sum
from galinear.nn.functional.decomposition import Spectrum
from galinear.nn.functional.matrices import parity_order
from galinear.nn.functional.recompute import recomputed
from galinear.nn.rotor import RotorLinear, fitting_chunk_size

__all__ = ["RotorNetwork", "check_permutations"]

_PERMUTATIONS = ("input_permutation", "hidden_permutations")


def check_permutations(name: str, value, shape: tuple, owner: str = "RotorNetwork") -> None:
    """Raise ValueError unless ``value`` is an integer tensor of ``shape`` whose every row (last
    axis) is a permutation of 0..shape[-1]-1: the fixed permutations of a :class:`RotorNetwork`.

    An index outside 0..hidden-1 would read outside the hidden activations, and a repeated one
    (all zeros, -1 wrapped around) would give wrong outputs without an error.
    """
    if not isinstance(value, torch.Tensor) or value.dtype.is_floating_point or value.dtype.is_complex \
            or value.dtype == torch.bool:
        raise ValueError(f"{owner}: {name} must be an integer tensor (torch.int64) of shape {tuple(shape)}, got "
                         f"{getattr(value, 'dtype', type(value).__name__)}; the state is damaged or from another "
                         "model: reload a good one")
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{owner}: {name} must have shape {tuple(shape)}, got {tuple(value.shape)}; the state is "
                         "from another RotorNetwork configuration")
    if value.numel() == 0:
        return
    rows = value.detach().reshape(-1, shape[-1]).to(torch.int64)
    expected = torch.arange(shape[-1], device=rows.device)
    bad = (rows.sort(dim=-1).values != expected).any(dim=-1)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        values = rows[row]
        low, high = int(values.min()), int(values.max())
        where = "" if rows.shape[0] == 1 else f" (row {row})"
        span = f"{low}" if low == high else f"values from {low} to {high}"
        what = (f"holds {span}, outside 0..{shape[-1] - 1}" if low < 0 or high >= shape[-1]
                else "repeats an index")
        raise ValueError(f"{owner}: {name}{where} is not a permutation of 0..{shape[-1] - 1}: it {what}; the state "
                         "is damaged: reload a good one (a RotorNetwork's permutations are fixed at construction "
                         "and saved with it)")


def _joined(tensors):
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


def _checked_gadget(gadget):
    """A gadget's NaN/inf check, as its own call runs it (again only after a parameter changed)."""
    if gadget.check_finite:
        checked = gadget._versions(gadget.left_bivectors, gadget.right_bivectors, gadget.alpha, gadget.bias)
        if checked != gadget._checked:
            gadget._check_parameters()
            gadget._checked = checked


def _stage_rotors(gadgets):
    """(left, right, spectra) of the chunk pairs of all ``gadgets`` in order: one eigen-decomposition
    for all of them where they use the exact one, else each gadget's own rotors. The gadgets share
    n and double_rotor; their numbers of chunk pairs may differ."""
    first = gadgets[0]
    if all(g.decomposition == "exact" for g in gadgets):
        sides = [[g.left_bivectors for g in gadgets]]
        if first.double_rotor:
            sides.append([g.right_bivectors for g in gadgets])
        bivectors = torch.cat([b.detach() for side in sides for b in side])
        V, W, spec = F.exact_factors(bivectors, first.n)
        rows = sum(g.pairs for g in gadgets)
        parts = [slice(0, rows), slice(rows, 2 * rows)][:len(sides)]
        factors = [(V[s], W[s]) for s in parts]
        spectra = [None if spec is None else Spectrum(spec.mu[s], spec.U[s]) for s in parts]
        if len(sides) == 1:
            return factors[0], None, (spectra[0], None)
        return factors[0], factors[1], tuple(spectra)
    rotors = [g._rotors(g.training) for g in gadgets]
    left = tuple(_joined([r[0][i] for r in rotors]) for i in range(2))
    right = None if rotors[0][1] is None else tuple(_joined([r[1][i] for r in rotors]) for i in range(2))
    return left, right, (None, None)


def _gadget_blocks(gadgets):
    """(pairs, 2, c/2, c/2): the parity blocks of the chunk pairs of all ``gadgets`` in order (as
    :func:`_stage_rotors` takes them), in one call with the exact gradient
    (:func:`~galinear.nn.dexp.exact_parity_blocks`)."""
    left, right, spectra = _stage_rotors(gadgets)
    return exact_parity_blocks(
        _joined([g.left_bivectors for g in gadgets]),
        None if right is None else _joined([g.right_bivectors for g in gadgets]),
        left, right, spectra)


def _pair_scale(gadget):
    """(J, I, c): each chunk pair's output factor, alpha times the output averaging."""
    J, I, c = gadget.output_chunks, gadget.input_chunks, gadget.chunk_size
    scale = gadget.output_scale[gadget.output_index].view(J, 1, c)
    if gadget.alpha is not None:
        return gadget.alpha.view(J, I, 1) * scale
    return scale.expand(J, I, c)


def _block_inputs(gadget):
    """(I c,) the coordinates of its input that a gadget's parity blocks read: parity by parity
    (:func:`~galinear.nn.functional.matrices.parity_order`), then chunk by chunk."""
    order = parity_order(gadget.n, gadget.input_index.device)
    I, half = gadget.input_chunks, gadget.chunk_size // 2
    return gadget.input_index.view(I, gadget.chunk_size)[:, order].view(I, 2, half).transpose(0, 1).reshape(-1)


def _output_coordinates(gadget):
    """(J, c) output coordinate of every output chunk's coordinates."""
    return gadget.output_index.view(gadget.output_chunks, gadget.chunk_size)


def _check_loaded_permutations(module, state_dict, prefix, *args):
    """load_state_dict hook: a RotorNetwork's permutations are checked before they are copied in."""
    for name, shape in module._permutation_shapes().items():
        if prefix + name in state_dict:
            check_permutations(prefix + name, state_dict[prefix + name], shape)


class RotorNetwork(nn.Module):
    r"""The paper's rotor replacement for one q, k or v projection (Section 5).

    .. math::

        h_0 &= \mathrm{PReLU}(\mathrm{LN}(\Pi_0 G_{in}(x))) \\
        h_l &= \textstyle\sum_{b=1}^{breadth} a_{lb}\,
               \mathrm{PReLU}(\mathrm{LN}(\Pi_{lb} G_{lb}(h_{l-1}))), \quad l = 1..hidden\_layers \\
        y   &= G_{out}(h_L)

    G are :class:`RotorLinear` gadgets, LN a LayerNorm without affine parameters, one PReLU
    (one parameter) shared by the whole network, a learnable (init 1), Pi fixed random
    permutations stored as buffers. In eval mode without autograd, small batches (decoding; the
    limit and the choice are :func:`galinear.nn.functional.plan.plan`'s) run in one compiled call on
    the CPU (:func:`galinear.kernels.spinor.network_forward`), else on the gadgets' assembled
    matrices with the permutations folded in and the branches of a layer stacked. Under autograd
    (training) every stage runs through its gadgets' structured map, the branches of a hidden
    layer in one call of the backend the dispatcher picks (for "dense" one batched product of
    the chunk pairs' parity blocks, those of all stages of one n built in one call), and the stage's chunk sum, permutations, LayerNorm, PReLU
    and branch sum in one autograd Function that keeps only the rotor maps' outputs
    (:meth:`_structured_forward`); larger batches without autograd run gadget by gadget. Defaults are the paper's: hidden = in_features, 2 hidden
    layers, breadth 3, double rotors, alpha on, no bias. Parameter counts: 895 (2048 -> 2048),
    1,076 (2048 -> 512); with hidden=2048: 1,401 (1536 -> 1536), 1,493 (1536 -> 256).
    """

    def __init__(
        self,
        in_features,
        out_features,
        hidden=None,
        hidden_layers=2,
        breadth=3,
        double_rotor=True,
        alpha=True,
        bias=False,
        chunk_size=None,
        backend="auto",
        device=None,
        dtype=None,
        *,
        eps=1e-5,
        tol=None,
        max_iter=rotor_spec.POWER_MAX_ITER,
        decomposition="exact",
        gradient="exact",
    ):
        super().__init__()
        in_features, out_features = check_count(in_features, "in_features"), check_count(out_features, "out_features")
        hidden = in_features if hidden is None else check_count(hidden, "hidden")
        breadth = check_count(breadth, "breadth")
        hidden_layers = check_count(hidden_layers, "hidden_layers", minimum=0)
        if chunk_size is not None and not isinstance(chunk_size, bool):
            try:
                chunk_size = check_count(chunk_size, "chunk_size")
            except ValueError:
                pass  # reported by the gadgets as not a power of two
        owner = f"RotorNetwork({in_features}, {out_features}, hidden={hidden})"
        _check_float_dtype(owner, dtype)
        check_tolerance(tol, owner=owner)
        check_max_iter(max_iter, owner=owner)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < math.inf:
            raise ValueError(f"{owner}: eps (the LayerNorm epsilon) must be a finite number > 0, got {eps!r}")
        gadgets = hidden_layers * breadth
        values, index_bytes = 0, 8 * hidden * (1 + gadgets)  # the permutations
        for a, b, count in ((in_features, hidden, 1), (hidden, hidden, gadgets), (hidden, out_features, 1)):
            more, index = rotor_linear_size(a, b, fitting_chunk_size(a, b, chunk_size), double_rotor, alpha, bias)
            values, index_bytes = values + count * more, index_bytes + count * index
        _check_allocation(owner, values, dtype, device, index_bytes,
                          fix="use a larger chunk_size, a smaller hidden width or fewer hidden layers/branches")
        self.in_features, self.out_features, self.hidden = in_features, out_features, hidden
        self.hidden_layers, self.breadth, self.eps = hidden_layers, breadth, eps
        gadget = dict(
            double_rotor=double_rotor, alpha=alpha, bias=bias, backend=backend, device=device, dtype=dtype,
            tol=tol, max_iter=max_iter, decomposition=decomposition, gradient=gradient,
        )

        def chunk(a, b):
            return None if chunk_size is None else fitting_chunk_size(a, b, chunk_size)

        self.input_gadget = RotorLinear(in_features, hidden, chunk_size=chunk(in_features, hidden), **gadget)
        self.hidden_gadgets = nn.ModuleList(
            nn.ModuleList(RotorLinear(hidden, hidden, chunk_size=chunk(hidden, hidden), **gadget) for _ in range(breadth))
            for _ in range(hidden_layers)
        )
        self.output_gadget = RotorLinear(hidden, out_features, chunk_size=chunk(hidden, out_features), **gadget)
        self.activation = nn.PReLU(1, device=device, dtype=dtype)
        self.branch_weights = nn.Parameter(torch.ones(hidden_layers, breadth, device=device, dtype=dtype))
        self.register_buffer("input_permutation", torch.randperm(hidden, device=device))
        self.register_buffer(
            "hidden_permutations",
            torch.stack([torch.randperm(hidden, device=device) for _ in range(hidden_layers * breadth)]).reshape(
                hidden_layers, breadth, hidden
            )
            if hidden_layers
            else torch.zeros(0, breadth, hidden, dtype=torch.long, device=device),
        )
        for name, module in self.named_modules():
            if isinstance(module, RotorLinear):
                module._qualified_name = f"RotorNetwork.{name}"
        self._fused = None    # (state, stages) of the inference path for small batches (torch)
        self._decoder = None  # (state, arguments) of the same path in one compiled call (CPU)
        self._permutations_checked = None  # (id, version) of the permutations last checked
        self._register_load_state_dict_pre_hook(_check_loaded_permutations, with_module=True)

    def _permutation_shapes(self):
        return {"input_permutation": (self.hidden,),
                "hidden_permutations": (self.hidden_layers, self.breadth, self.hidden)}

    def _check_permutations(self):
        """The permutation buffers are permutations (checked again only after they change)."""
        buffers = self._buffers
        state = tuple((id(buffers[n]), buffers[n]._version) for n in _PERMUTATIONS)
        if state != self._permutations_checked:
            for name, shape in self._permutation_shapes().items():
                check_permutations(name, buffers[name], shape)
            self._permutations_checked = state

    @property
    def backend(self) -> str:
        return self.input_gadget.backend

    @backend.setter
    def backend(self, name: str):
        for module in self.modules():
            if isinstance(module, RotorLinear):
                module.backend = name

    def reset_parameters(self):
        """Reset every gadget, the PReLU (0.25) and the branch weights (1); permutations are kept."""
        for module in self.modules():
            if isinstance(module, RotorLinear):
                module.reset_parameters()
        self.activation.reset_parameters()
        with torch.no_grad():
            self.branch_weights.fill_(1.0)

    def _block(self, gadget, permutation, h):
        z = gadget(h)[..., permutation]
        return self.activation(nn.functional.layer_norm(z, (self.hidden,), eps=self.eps))

    def _gadgets(self):
        modules = self._modules
        return [modules["input_gadget"], *(g for layer in modules["hidden_gadgets"] for g in layer),
                modules["output_gadget"]]

    def _parameter_state(self):
        """(id, version) of every tensor the inference paths read, from the modules' own parameter
        and buffer dicts (cheaper than attribute access or walking the modules); a replaced or
        changed tensor rebuilds their state."""
        buffers = self._buffers
        tensors = [self.activation._parameters["weight"], self._parameters["branch_weights"],
                   buffers["input_permutation"], buffers["hidden_permutations"]]
        for g in self._gadgets():
            tensors += g._parameters.values()
        return tuple(None if t is None else (id(t), t._version) for t in tensors)

    def _check_for_inference(self):
        """NaN/inf in any parameter, or a permutation that is not one, raise before an inference
        state is built from them."""
        self._check_permutations()
        _finite_or_raise([("activation.weight", self.activation.weight), ("branch_weights", self.branch_weights)],
                         "RotorNetwork")
        for gadget in self._gadgets():
            if gadget.check_finite:
                gadget._check_parameters()

    def _fused_weights(self):
        """Per stage (weight, bias) with the permutations folded into the rows and the branches
        of a hidden layer stacked into one matrix; rebuilt when a parameter or a permutation
        changes (the gadgets' other buffers are fixed index tables, or the power method's warm starts,
        which it refreshes only in training)."""
        state = self._parameter_state()
        if self._fused is not None and self._fused[0] == state:
            return self._fused[1]
        self._check_for_inference()

        def rows(gadget, permutation):
            weight = gadget.assembled_weight()
            bias = None if gadget.bias is None else gadget.bias
            if permutation is None:
                return weight, bias
            return weight[permutation], None if bias is None else bias[permutation]

        stages = [rows(self.input_gadget, self.input_permutation)]
        for layer, gadgets in enumerate(self.hidden_gadgets):
            parts = [rows(g, self.hidden_permutations[layer, b]) for b, g in enumerate(gadgets)]
            bias = None if parts[0][1] is None else torch.cat([p[1] for p in parts])
            stages.append((torch.cat([p[0] for p in parts]), bias))
        stages.append(rows(self.output_gadget, None))
        self._fused = (state, stages)
        return stages

    def _decode_state(self):
        """The network as a :class:`galinear.kernels.spinor.CheckedNetwork` (its tables checked once
        and copied), rebuilt when a parameter or a permutation changes; None where the kernel does
        not apply. The gadgets' chunk index tables are fixed at construction: an in-place edit of
        them reaches the decoder only through a new network (or ``_decoder = None``)."""
        from galinear.kernels import spinor as kernels

        state = self._parameter_state()
        if self._decoder is not None and self._decoder[0] == state:
            return self._decoder[1]
        gadgets = self._gadgets()
        if any(g.bias is not None for g in gadgets):  # the kernel adds no biases: the matrices do
            return None
        self._check_for_inference()
        dtype = self.branch_weights.dtype
        np_dtype = np.float64 if dtype == torch.float64 else np.float32
        tuples = [kernels.gadget_tuple(*gadget._decode_state(), np_dtype) for gadget in gadgets]
        args = kernels.CheckedNetwork(tuples, self.input_permutation.numpy(), self.hidden_permutations.numpy(),
                                      self.branch_weights.detach().numpy().astype(np_dtype),
                                      float(self.activation.weight), self.eps, self.in_features, np_dtype)
        self._decoder = (state, args)
        return args

    def _decode_forward(self, x):
        """Inference in one compiled call that applies every chunk pair's rotor matrices directly."""
        args = self._decode_state()
        if args is None:
            return None
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features).to(self.branch_weights.dtype).contiguous().numpy()
        return torch.from_numpy(args(flat)).reshape(*lead, self.out_features)

    def _fused_forward(self, x):
        """Inference with the gadgets' assembled matrices: one matrix product per stage (under
        torch.jit.trace the matrices enter the traced graph as constants)."""
        with F._Untraced():
            stages = self._fused_weights()
        lead = x.shape[:-1]
        h = x.reshape(-1, self.in_features)
        weight, bias = stages[0]
        h = self.activation(nn.functional.layer_norm(nn.functional.linear(h, weight, bias), (self.hidden,),
                                                     eps=self.eps))
        for layer in range(self.hidden_layers):
            weight, bias = stages[1 + layer]
            z = nn.functional.linear(h, weight, bias).view(h.shape[0], self.breadth, self.hidden)
            z = self.activation(nn.functional.layer_norm(z, (self.hidden,), eps=self.eps))
            h = torch.matmul(self.branch_weights[layer], z)                 # sum_b a_lb z_b
        weight, bias = stages[-1]
        return nn.functional.linear(h, weight, bias).reshape(*lead, self.out_features)

    def forward(self, x):
        """y = network(x) for x (..., in_features). The output has x's dtype: an input of another
        floating-point dtype than the parameters' (bfloat16 or float16 activations of a model, say)
        is computed in the parameters' dtype and the result cast back, on every path."""
        _check_input(self, x)
        dtype, work = x.dtype, self.branch_weights.dtype
        if _rotor._autocast_dtype(x, work) is not None:  # every gadget computes in the autocast dtype
            return self._forward(x, autocast=True)
        return self._forward(x if dtype == work else x.to(work)).to(dtype)

    def _forward(self, x, autocast=False):
        if torch.jit.is_tracing():
            return self._fused_forward(x)
        capturing = autocast or F._capturing()
        mode = "inference" if not self.training and not torch.is_grad_enabled() else "training"
        dtype = torch.get_autocast_dtype(x.device.type) if autocast else x.dtype
        plan = dispatch.plan(self.input_gadget.n, x.numel() // self.in_features, x.device, dtype, mode,
                             network=True)
        if plan.backend == "dense":  # the whole network in one call
            if plan.decode:
                y = self._decode_forward(x)
                if y is not None:
                    return y
            return self._fused_forward(x)
        if not capturing:
            self._check_permutations()
            _finite_or_raise(
                [("activation.weight", self.activation.weight), ("branch_weights", self.branch_weights)],
                "RotorNetwork",
            )
        if torch.is_grad_enabled() and not capturing:
            return self._structured_forward(x)
        h = self._block(self.input_gadget, self.input_permutation, x)
        for layer, gadgets in enumerate(self.hidden_gadgets):
            h = sum(
                self.branch_weights[layer, b] * self._block(gadget, self.hidden_permutations[layer, b], h)
                for b, gadget in enumerate(gadgets)
            )
        return self.output_gadget(h)

    def _structured_forward(self, x):
        """Training (and any call under autograd): every stage through its gadgets' structured map,
        the branches of a hidden layer in one call, and the stage's chunk sum, permutations,
        LayerNorm, PReLU and branch sum in one autograd Function
        (:func:`galinear.nn.functional.branches.branch_sum`). The stages that run parity
        blocks with the exact decomposition build them together, one eigen-decomposition and one
        block call per n (:meth:`_network_blocks`).

        Kept for the backward pass, per stage: the rotor maps' outputs, which the exact gradient
        needs anyway (on the parity-block path of the backend "dense" tokens x branches x output
        coordinates, the input chunks summed in the product; on a rotor backend tokens x
        branches x pairs x chunk), and the network's input x. Recomputed in the backward pass:
        on the parity-block path each stage's input (the previous stage's ``branch_sum`` over
        what it keeps, or a gather of x; :meth:`_stage_blocks`), and in every stage the chunk
        sum, the permuted and normalised values, LayerNorm's statistics and the PReLU output.
        Nothing of size hidden x hidden is built.
        """
        lead = x.shape[:-1]
        x = x.reshape(-1, self.in_features)
        blocks = self._network_blocks(x)
        # a later stage on parity blocks whose chunks cover h once reads h in the blocks' order:
        # the stage before writes it so (its permutations composed with that order), and the
        # product takes a view of h instead of a gathered copy
        reads = [None if index == 0 or blocks[index] is None or not stage[0]._plain_input else _block_inputs(stage[0])
                 for index, stage in enumerate(self._stages())]
        h, remake = self._stage([self.input_gadget], self.input_permutation.unsqueeze(0), None, x, blocks[0],
                                order=reads[1])
        for layer, gadgets in enumerate(self.hidden_gadgets):
            h, remake = self._stage(list(gadgets), self.hidden_permutations[layer], self.branch_weights[layer], h,
                                    blocks[1 + layer], order=reads[2 + layer],
                                    remake=None if reads[1 + layer] is None else remake)
        return self._output(h, blocks[-1], None if reads[-1] is None else remake).reshape(*lead, self.out_features)

    def _stages(self):
        """The gadgets of every stage in order: input, each hidden layer's branches, output."""
        return [[self.input_gadget], *(list(layer) for layer in self.hidden_gadgets), [self.output_gadget]]

    def _network_blocks(self, x):
        """Per stage the parity blocks (pairs, 2, c/2, c/2) of its gadgets' chunk pairs for x
        (T, in_features), None for a stage that builds its own: the stages that take the
        parity-block path (:meth:`_stage_blocks`) with the exact decomposition build theirs
        together, one :func:`~galinear.nn.functional.exact_factors` and one
        :func:`~galinear.nn.dexp.exact_parity_blocks` call for all stages of one n and rotor kind
        (single or double)."""
        stages = self._stages()
        groups = {}
        for index, stage in enumerate(stages):
            first = stage[0]
            if not all(isinstance(g, RotorLinear) and g.n == first.n > 0 and g.double_rotor == first.double_rotor
                       and g.gradient == "exact" and g.decomposition == "exact" and g.bias is None
                       for g in stage):
                continue
            plan = first._plan(x.shape[0], x, first.training, network_stage=True)
            if not plan.decode and plan.backend == "dense":
                groups.setdefault((first.n, first.double_rotor), []).append(index)
        blocks = [None] * len(stages)
        for indices in groups.values():
            gadgets = [g for index in indices for g in stages[index]]
            for g in gadgets:
                _checked_gadget(g)
            parts = _gadget_blocks(gadgets).split([sum(g.pairs for g in stages[index]) for index in indices])
            for index, part in zip(indices, parts):
                blocks[index] = part
        return blocks

    def _output(self, h, blocks=None, remake=None):
        """The output gadget on h (T, hidden): as parity blocks (:meth:`_stage_blocks`; ``blocks``:
        its chunk pairs' blocks, when already built; ``remake``: h is in the blocks' order) where
        its stage would run them, else its own call."""
        gadget = self.output_gadget
        if blocks is None:
            if not (gadget.n > 0 and gadget.gradient == "exact" and gadget.bias is None):
                return gadget(h)
            plan = gadget._plan(h.shape[0], h, gadget.training, network_stage=True)
            if plan.decode or plan.backend != "dense":
                return gadget(h)
            _checked_gadget(gadget)
        y, scale, dest = self._stage_blocks([gadget], h, blocks, remake)
        S, T, _, Kp = y.shape
        flat = (y[:, :, 0] * scale.view(S, 1, Kp)).permute(1, 0, 2).reshape(T, S * Kp)
        return flat.new_zeros(T, self.out_features).index_add(1, dest, flat)

    def _stage(self, gadgets, permutations, weights, h, blocks=None, order=None, remake=None):
        """(h, remake) of one stage on h (T, hidden): ``gadgets`` applied to h, then ``branch_sum``;
        ``blocks``: the gadgets' parity blocks, when already built (then the stage runs
        :meth:`_stage_blocks`, with ``remake`` where h is in their order). ``order``: the
        coordinates the next stage reads, the order the result is written in (None: the
        hidden order). The returned remake recomputes the result (:meth:`_stage_blocks`)."""
        if blocks is None:
            y, scale, dest = self._stage_maps(gadgets, h)
        else:
            y, scale, dest = self._stage_blocks(gadgets, h, blocks, remake)
        if order is not None:
            permutations = permutations[:, order]
        args = (y, scale, weights, self.activation.weight, dest, permutations, self.hidden, self.eps)
        guards = tuple(t for t in args[:4] if t is not None)
        return branch_sum(*args), (lambda: branch_sum(*args), guards)

    def _stage_maps(self, gadgets, h):
        """(y, scale, dest) of :func:`~galinear.nn.functional.branches.branch_sum` for the
        stage's gadgets on h (T, in). When the gadgets are exact rotor gadgets without bias, all
        of them in one call: for the backend "dense" the parity blocks of every chunk pair
        (:meth:`_stage_blocks`), for a rotor backend its sandwich of every chunk pair; otherwise
        each gadget's own output, stacked."""
        first = gadgets[0]
        T = h.shape[0]
        plan = None
        if isinstance(first, RotorLinear) and first.n > 0 and all(
                g.gradient == "exact" and g.bias is None for g in gadgets):
            plan = first._plan(T, h, first.training, network_stage=True)
        if plan is None or plan.decode:
            return torch.stack([g(h) for g in gadgets], 1).unsqueeze(0), None, None
        for g in gadgets:
            _checked_gadget(g)
        if plan.backend == "dense":
            return self._stage_blocks(gadgets, h)
        c, I, J, P, B = first.chunk_size, first.input_chunks, first.output_chunks, first.pairs, len(gadgets)
        with dispatch.intra_op_threads(plan.threads):
            left, right, spectra = _stage_rotors(gadgets)
            chunks = h.view(T, I, c) if first._plain_input else h[:, first.input_index]
            pairs = chunks.unsqueeze(1).expand(T, B * J, I, c).reshape(T, B * P, c)
            mapped = exact_rotor_sandwich(
                pairs, _joined([g.left_bivectors for g in gadgets]),
                None if right is None else _joined([g.right_bivectors for g in gadgets]),
                left, right, backend=plan.backend, spectra=spectra, threads=plan.threads,
            )
        scale = torch.stack([_pair_scale(g) for g in gadgets])                     # (B, J, I, c)
        out = _output_coordinates(first)                                          # (J, c)
        dest = out.view(J, 1, c).expand(J, I, c).reshape(-1)
        return mapped.view(1, T, B, J * I * c), scale.reshape(B, -1), dest

    def _stage_blocks(self, gadgets, h, blocks=None, remake=None):
        """The stage's chunk pairs as parity blocks: every chunk-pair map keeps the parity of a
        blade, so in the basis of :func:`~galinear.nn.functional.matrices.parity_order` it is
        two c/2 x c/2 blocks (half the work of a c x c matrix). The blocks of all gadgets and
        pairs, built in one call with the exact gradient
        (:func:`~galinear.nn.dexp.exact_parity_blocks`) and weighted by their alphas, form per
        parity one (I c/2, B J c/2) matrix, and the stage is one batched product over the two
        parities that also sums the input chunks: forward and backward are large GEMMs of half
        the dense layer's work, and no d x d matrix is built. y comes out as (2, T, B, J c/2),
        the layout ``branch_sum`` reads directly, with each coordinate's output factor (the
        averaging over covering chunks) and destination. ``blocks``: the gadgets' parity blocks
        when already built (:meth:`_network_blocks`), else built here.

        The product's input is not kept for the backward pass but recomputed there
        (:func:`~galinear.nn.functional.recompute.recomputed`): with ``remake`` = (recompute,
        guards) from :meth:`_stage`, h is already in the blocks' order and is recomputed from the
        stage before (one ``branch_sum`` pass over what that stage keeps anyway); otherwise the
        input is gathered from h, and gathered again from it (h is then kept: for the input
        stage, the network's own input, which q, k and v networks share)."""
        first = gadgets[0]
        T = h.shape[0]
        c, I, J, B = first.chunk_size, first.input_chunks, first.output_chunks, len(gadgets)
        half = c // 2
        if blocks is None:
            blocks = _gadget_blocks(gadgets)                                       # (B J I, 2, c/2, c/2)
        blocks = blocks.view(B, J, I, 2, half, half)
        if any(g.alpha is not None for g in gadgets):
            alpha = torch.stack([blocks.new_ones(J, I) if g.alpha is None else g.alpha.view(J, I) for g in gadgets])
            blocks = blocks * alpha.view(B, J, I, 1, 1, 1)
        # weight[parity, (i, column), (b, j, row)] = alpha[b, j, i] blocks[b, j, i, parity, row, column]:
        # the input chunks are summed inside the product
        weight = blocks.permute(3, 2, 5, 0, 1, 4).reshape(2, I * half, B * J * half)
        if remake is None:
            inputs = _block_inputs(first)
            source = h.index_select(1, inputs)
            remake = (lambda: h.index_select(1, inputs), (h,))
        else:
            source = h
        parts = source.view(T, 2, I * half).transpose(0, 1)                      # (2, T, I c/2)
        with recomputed(source, *remake):
            y = torch.bmm(parts, weight).view(2, T, B, J * half)
        # each coordinate's output factor and destination in the same (parity, j, row) order
        order = parity_order(first.n, h.device)
        scale = torch.stack([g.output_scale[_output_coordinates(g)[:, order]] for g in gadgets])   # (B, J, c)
        scale = scale.view(B, J, 2, half).transpose(1, 2).reshape(B, -1)
        dest = _output_coordinates(first)[:, order].view(J, 2, half).transpose(0, 1).reshape(-1)
        return y, scale, dest

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, hidden={self.hidden}, "
            f"hidden_layers={self.hidden_layers}, breadth={self.breadth}"
        )
