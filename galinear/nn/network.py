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
from galinear.nn.network_stages import StructuredStages
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


def _check_loaded_permutations(module, state_dict, prefix, *args):
    """load_state_dict hook: a RotorNetwork's permutations are checked before they are copied in."""
    for name, shape in module._permutation_shapes().items():
        if prefix + name in state_dict:
            check_permutations(prefix + name, state_dict[prefix + name], shape)


class RotorNetwork(StructuredStages, nn.Module):
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
    the CPU (a :class:`galinear.rotor_kernels.spinor.CheckedNetwork`: the kernel of
    :func:`~galinear.rotor_kernels.spinor.network_forward` with its tables checked once), else on the
    gadgets' assembled matrices with the permutations folded in and the branches of a layer
    stacked. Under autograd (training) every stage runs through its gadgets' structured map as
    its plan says, the branches of a hidden layer in one call (on the parity-block path one
    batched product of the chunk pairs' parity blocks, those of all stages of one n built in one
    call; on a sandwich path one call of its backend), and the stage's chunk sum, permutations, LayerNorm, PReLU
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
        self._structure = None  # (state, whether the decoding kernel applies) for the plan
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
        """The dtype and device of the parameters, and (id, version) of every tensor the inference
        paths read, from the modules' own parameter and buffer dicts (cheaper than attribute access
        or walking the modules); a converted (``.to``, ``.double()``: the same tensors with new
        data), replaced, added (a bias) or changed tensor rebuilds their state."""
        buffers = self._buffers
        weights = self._parameters["branch_weights"]
        tensors = [self.activation._parameters["weight"], weights,
                   buffers["input_permutation"], buffers["hidden_permutations"]]
        for g in self._gadgets():
            tensors += g._parameters.values()
        return (weights.dtype, weights.device, *(None if t is None else (id(t), t._version) for t in tensors))

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

    def _decode_state(self, state=None):
        """The network as a :class:`galinear.rotor_kernels.spinor.CheckedNetwork` (its tables checked once
        and copied), rebuilt when a parameter or a permutation changes; None where the kernel does
        not apply. The gadgets' chunk index tables are fixed at construction: an in-place edit of
        them reaches the decoder only through a new network (or ``_decoder = None``). ``state``:
        :meth:`_parameter_state`, when the caller has it."""
        from galinear.rotor_kernels import spinor as kernels

        if state is None:
            state = self._parameter_state()
        if self._decoder is not None and self._decoder[0] == state:
            return self._decoder[1]
        gadgets = self._gadgets()
        if any(g.bias is not None for g in gadgets):  # the kernel adds no biases: the matrices do
            self._decoder = (state, None)
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

    def _decode_forward(self, x, state=None):
        """Inference in one compiled call that applies every chunk pair's rotor matrices directly
        (``state``: :meth:`_parameter_state`, when the caller has it)."""
        args = self._decode_state(state)
        if (x.dim() == 2 and not x.requires_grad and x.dtype == self._parameters["branch_weights"].dtype
                and x.is_contiguous()):
            return torch.from_numpy(args(x.numpy()))  # a batch of tokens as it is: no copy, no reshape
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features).to(self._parameters["branch_weights"].dtype).contiguous().numpy()
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
        dtype, work = x.dtype, self._parameters["branch_weights"].dtype
        if _rotor._autocast_dtype(x, work) is not None:  # every gadget computes in the autocast dtype
            return self._forward(x, autocast=True)
        if dtype == work:
            return self._forward(x)
        return self._forward(x.to(work)).to(dtype)

    def _forward(self, x, autocast=False):
        grad = torch.is_grad_enabled()
        mode = "inference" if not self.training and not grad else "training"
        dtype = torch.get_autocast_dtype(x.device.type) if autocast else x.dtype
        autograd = grad and not autocast
        state, decodes, stages = self._structure_of_call(mode == "inference", autograd)
        plan = dispatch.plan(self._modules["input_gadget"].n, x.numel() // self.in_features, x.device, dtype, mode,
                             network=True, autograd=autograd, decodes=decodes, stages=stages)
        run = _RUNNERS.get(plan.path)
        if run is None:
            raise ValueError(f"a RotorNetwork call cannot run the path {plan.path} (plan: {plan.rule})")
        return run(self, x, plan, autocast, state)

    def _structure_of_call(self, inference: bool, autograd: bool):
        """(state, decodes, stages) for the plan of a call. In inference: :meth:`_parameter_state`,
        which the inference paths read too, and whether the decoding kernel can run the network
        (:meth:`_decoder_applies`), remembered with the state it was read from and read again only
        after that changes (a tensor converted, replaced, added or changed), so that a decoding
        call walks the gadgets once. Under autograd (where the parameters change at every step):
        the stage keys (:meth:`_stage_keys`)."""
        if not inference:
            return None, False, self._stage_keys() if autograd else ()
        state = self._parameter_state()
        known = self._structure
        if known is None or known[0] != state:
            known = self._structure = (state, self._decoder_applies())
        return state, known[1], ()

    def _decoder_applies(self) -> bool:
        """Whether the decoding kernel can run the network: it adds no biases."""
        return all(g.bias is None for g in self._gadgets())

    def _stage_keys(self) -> tuple:
        """Per stage (n, backend, structured) for the plan: ``structured`` whether its gadgets can
        run as one map (exact rotor gadgets, no bias, n > 0)."""
        keys = []
        for stage in self._stages():
            structured = all(isinstance(g, RotorLinear) and g.n > 0 and g.gradient == "exact" and g.bias is None
                             for g in stage)
            keys.append((stage[0].n, stage[0].backend, True) if structured else (0, "auto", False))
        return tuple(keys)

    def _run_decode(self, x, plan, autocast, state=None):
        """:attr:`~galinear.nn.functional.plan.Path.DECODE`: the whole network in one compiled call."""
        return self._decode_forward(x, state)

    def _run_stacked(self, x, plan, autocast, state=None):
        """:attr:`~galinear.nn.functional.plan.Path.STACKED_MATRICES`: the whole network in one call."""
        return self._fused_forward(x)

    def _checked_for_gadgets(self):
        """The permutations and the network's own parameters checked (again only after they change)."""
        self._check_permutations()
        _finite_or_raise(
            [("activation.weight", self.activation.weight), ("branch_weights", self.branch_weights)],
            "RotorNetwork",
        )

    def _run_stages(self, x, plan, autocast, state=None):
        """:attr:`~galinear.nn.functional.plan.Path.STAGES`: training, stage by stage (:meth:`_structured_forward`)."""
        self._checked_for_gadgets()
        return self._structured_forward(x, plan.stages)

    def _run_gadgets(self, x, plan, autocast, state=None):
        """:attr:`~galinear.nn.functional.plan.Path.GADGETS`: gadget by gadget, each planning its own call."""
        if not (autocast or F._capturing()):
            self._checked_for_gadgets()
        h = self._block(self.input_gadget, self.input_permutation, x)
        for layer, gadgets in enumerate(self.hidden_gadgets):
            h = sum(
                self.branch_weights[layer, b] * self._block(gadget, self.hidden_permutations[layer, b], h)
                for b, gadget in enumerate(gadgets)
            )
        return self.output_gadget(h)

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, hidden={self.hidden}, "
            f"hidden_layers={self.hidden_layers}, breadth={self.breadth}"
        )


#: What a RotorNetwork call runs for each path of its plan.
_RUNNERS = {
    dispatch.Path.DECODE: RotorNetwork._run_decode,
    dispatch.Path.STACKED_MATRICES: RotorNetwork._run_stacked,
    dispatch.Path.STAGES: RotorNetwork._run_stages,
    dispatch.Path.GADGETS: RotorNetwork._run_gadgets,
}
