r"""The generalised rotor gadget (RotorLinear); the q/k/v network built on it (RotorNetwork) is in
:mod:`galinear.nn.network`.

Pence, Yamada & Singh, "Composing Linear Layers from Irreducibles", NeurIPS 2025, Eq. 6 and
Section 5 (restated in docs/nn.md).
"""
from __future__ import annotations

import torch
from torch import nn

from galinear._generated import rotor_spec
from galinear.nn import functional as F
from galinear.nn._eager import eager_under_compile
from galinear.nn.functional._common import _capturing, _Untraced
from galinear._limits import check_count, check_max_iter, check_tolerance, rotor_linear_size
from galinear._util import count_parameters
from galinear.nn.checks import (  # noqa: F401  (check_finite: re-exported)
    _check_allocation, _check_float_dtype, _check_input, _finite_or_raise, _is_power_of_two, check_finite,
)
from galinear.nn.dexp import exact_parity_blocks, exact_rotor_sandwich
from galinear.nn.rotor_decode import DecodeMethods
from galinear.nn.functional import plan as dispatch
from galinear.nn.functional.matrices import (
    assemble_weight, chunk_coordinates, chunk_weight, parity_blocks,
)

__all__ = ["RotorLinear", "check_finite", "fitting_chunk_size"]


def fitting_chunk_size(in_features: int, out_features: int, chunk_size: int | None = None) -> int:
    """``chunk_size`` capped at the largest power of two <= both widths (the cap itself if None)."""
    cap = rotor_spec.chunk_layout(in_features, out_features)[0]
    return cap if chunk_size is None else min(chunk_size, cap)


def _autocast_dtype(x: torch.Tensor, work: torch.dtype):
    """The autocast dtype when torch.autocast is on for x's device and lowers ``work`` (float32
    or float64 parameters) to float16 or bfloat16, else None."""
    device_type = x.device.type
    if not torch.is_autocast_enabled(device_type) or work not in (torch.float32, torch.float64):
        return None
    low = torch.get_autocast_dtype(device_type)
    return low if low in (torch.float16, torch.bfloat16) else None


#: the power decomposition's warm-start buffers (held only by layers with decomposition="power")
WARM_START_BUFFERS = ("left_warm_start", "right_warm_start")


def _match_warm_starts(module, state_dict, prefix, *args):
    """load_state_dict hook: warm starts are the power method's start vectors, not weights (any
    unit vectors give the same converged factors). A layer without them (the exact decomposition)
    drops those of a state that has them (one saved by a power layer, say); a power layer given a
    state without them keeps its own."""
    for name in WARM_START_BUFFERS:
        key, own = prefix + name, module._buffers.get(name)
        if own is None:
            state_dict.pop(key, None)
        elif key not in state_dict:
            state_dict[key] = own


class RotorLinear(DecodeMethods, nn.Module):
    r"""Generalised rotor gadget: a linear map d_in -> d_out made of rotor sandwiches.

    With chunk c = 2**n (default min(2**floor(log2 d_in), 2**floor(log2 d_out))),
    I = ceil(d_in/c) input chunks and J = ceil(d_out/c) output chunks, input chunk i reads
    coordinates (s_i + t) mod d_in, s_i = floor(i d_in / I), t < c (output chunks likewise:
    chunks overlap and wrap around). Each of the P = I J chunk pairs (i, j) (index
    p = j I + i) owns a bivector pair (B_p, C_p) (or one bivector if not ``double_rotor``) and a
    weight alpha_p:

    .. math::

        y_{out_j} \mathrel{+}= \sum_i \alpha_{ij}\, R_{ij}\, x_{in_i}\, \tilde S_{ij},
        \qquad R = \prod \exp(\text{simple parts of } B),

    then every output coordinate is divided by I times the number of output chunks covering
    it, and the bias is added. Parameters: P C(n,2) (2 or 1) + P (alpha) + d_out (bias).

    The simple parts come from :func:`galinear.nn.functional.invariant_decomposition`. With
    ``decomposition="power"`` its warm-start vectors are buffers (``left_warm_start``/
    ``right_warm_start``, saved in the state_dict) refreshed at every training-mode forward; the
    exact decomposition reads none, and its layer holds none (those attributes are None; a state
    that has them, such as one saved by a power layer, loads with them dropped). The
    backend ("auto", "dense", "factored" or any registered one) is not part of the state.

    Parameters
    ----------
    in_features, out_features : sizes.
    bias, double_rotor, alpha : as above (defaults: no bias, two rotors, learnable alpha).
    chunk_size : power of two <= min(in_features, out_features), or None for the default.
    backend : sandwich backend name.
    tol, max_iter, decomposition, refresh : passed to
        :func:`~galinear.nn.functional.invariant_decomposition` (``decomposition`` is its
        ``method``: "exact" (default; eigen-decompositions, exp(B) to working precision) or
        "power" (the paper's warm-started power iteration; rows that do not converge within
        ``max_iter`` fall back to "exact")).
    gradient : "exact" (default): the gradient of exp(B) itself (:mod:`galinear.nn.dexp`),
        whatever the decomposition; the decomposition runs without autograd. "power-step": the
        paper's gradient through one power step of the decomposition (an approximation, kept for
        comparisons; ``refresh=False`` then gives the exact gradient of a finite iteration).
    """

    #: Standard deviation of the normal initialisation of the bivector coefficients.
    bivector_init_std = 0.1

    def __init__(
        self,
        in_features,
        out_features,
        bias=False,
        double_rotor=True,
        chunk_size=None,
        alpha=True,
        backend="auto",
        device=None,
        dtype=None,
        *,
        tol=None,
        max_iter=rotor_spec.POWER_MAX_ITER,
        decomposition="exact",
        refresh=True,
        gradient="exact",
    ):
        super().__init__()
        in_features, out_features = check_count(in_features, "in_features"), check_count(out_features, "out_features")
        if chunk_size is not None and not isinstance(chunk_size, bool):
            try:
                chunk_size = check_count(chunk_size, "chunk_size")
            except ValueError:
                pass  # reported below as not a power of two
        smallest = min(in_features, out_features)
        if chunk_size is None:
            chunk_size = fitting_chunk_size(in_features, out_features)
        elif not _is_power_of_two(chunk_size):
            raise ValueError(f"chunk_size must be a power of two (1, 2, 4, ...), got {chunk_size!r}")
        elif chunk_size > smallest:
            raise ValueError(
                f"chunk_size={chunk_size} is larger than a dimension (in_features={in_features}, "
                f"out_features={out_features}); use a power of two <= {smallest}"
            )
        if decomposition not in ("power", "exact"):
            raise ValueError(f"decomposition must be 'power' or 'exact', got {decomposition!r}")
        if gradient not in ("exact", "power-step"):
            raise ValueError(f"gradient must be 'exact' or 'power-step', got {gradient!r}")
        if not isinstance(backend, str):
            raise TypeError(f"backend must be a string (a registered name or 'auto'), got {backend!r}")
        owner = f"RotorLinear({in_features}, {out_features}, chunk_size={chunk_size})"
        _check_float_dtype(owner, dtype)
        check_tolerance(tol, owner=owner)
        check_max_iter(max_iter, owner=owner)
        values, index_bytes = rotor_linear_size(in_features, out_features, chunk_size, double_rotor, alpha, bias)
        _check_allocation(owner, values, dtype, device, index_bytes,
                          fix="use a larger chunk_size (fewer chunk pairs) or smaller widths")
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.out_features = in_features, out_features
        self.chunk_size = chunk_size
        self.n = chunk_size.bit_length() - 1
        self.planes = self.n // 2
        self.bivector_size = self.n * (self.n - 1) // 2
        _, self.input_chunks, self.output_chunks = rotor_spec.chunk_layout(in_features, out_features, chunk_size)
        self.pairs = self.input_chunks * self.output_chunks
        self.double_rotor = bool(double_rotor)
        self.backend = backend
        self.tol, self.max_iter, self.decomposition, self.refresh = tol, max_iter, decomposition, refresh
        self.gradient = gradient
        self.check_finite = True
        # Memo of the last rotor factors computed without autograd and without a warm-start
        # update (inference): a pure function of the state below, never part of the state_dict.
        self._factor_cache = None
        # Likewise the assembled (out, in) matrix of the cached-matrix path, and the parameter versions
        # last checked for NaN/inf (an unchanged parameter is not checked again).
        self._weight_cache = None
        self._decode_cache = None
        self._checked = None

        P, m, k, n = self.pairs, self.bivector_size, self.planes, self.n
        self.left_bivectors = nn.Parameter(torch.empty(P, m, **factory))
        if self.double_rotor:
            self.right_bivectors = nn.Parameter(torch.empty(P, m, **factory))
        else:
            self.register_parameter("right_bivectors", None)
        self.alpha = nn.Parameter(torch.empty(P, **factory)) if alpha else None
        self.bias = nn.Parameter(torch.empty(out_features, **factory)) if bias else None
        # the power method's start vectors; the exact decomposition reads none, so it keeps none
        # (a plain None attribute then: torch.export miscounts buffers registered as None)
        power = decomposition == "power"
        for name, kept in (("left_warm_start", power), ("right_warm_start", power and self.double_rotor)):
            if kept:
                self.register_buffer(name, torch.empty(P, k, n, **factory))
            else:
                setattr(self, name, None)
        self._register_load_state_dict_pre_hook(_match_warm_starts, with_module=True)

        index_device = device
        input_index = self._chunk_index(in_features, self.input_chunks, chunk_size, index_device)
        output_index = self._chunk_index(out_features, self.output_chunks, chunk_size, index_device)
        cover = torch.zeros(out_features, dtype=torch.float64, device=index_device)
        cover.index_add_(0, output_index.reshape(-1), torch.ones(output_index.numel(), dtype=torch.float64, device=index_device))
        self.register_buffer("input_index", input_index, persistent=False)
        self.register_buffer("output_index", output_index.reshape(-1), persistent=False)
        self.register_buffer(
            "output_scale", (1.0 / (self.input_chunks * cover)).to(dtype or torch.get_default_dtype()), persistent=False
        )
        self._plain_input = self.input_chunks * chunk_size == in_features
        self._plain_output = self.output_chunks * chunk_size == out_features
        self.reset_parameters()
        self._warm_tables()

    @staticmethod
    def _chunk_index(size, chunks, width, device):
        """(chunks, width) coordinates: chunk i reads (start_i + t) mod size (the specification's layout)."""
        start = torch.tensor(rotor_spec.chunk_starts(size, chunks), dtype=torch.long, device=device)
        return (start[:, None] + torch.arange(width, device=device)) % size

    def _warm_tables(self):
        """Builds the constant tables that the forward and backward passes read for this layer's
        n, device and dtype, so that a compiled graph finds them (a table built inside one would
        split the graph)."""
        if self.n < 1:
            return
        from galinear.nn.functional import decomposition, matrices, rotors

        device, dtype = self.left_bivectors.device, self.left_bivectors.dtype
        if dtype not in (torch.float32, torch.float64):
            return
        matrices._parity_tables(self.n, device, dtype)
        matrices.parity_order(self.n, device)
        matrices.part_tables(self.n, device, dtype)
        rotors._vector_tables(self.n, device, dtype)
        decomposition._pair_index(self.n, device)

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        self._warm_tables()
        return out

    def reset_parameters(self):
        """Bivectors ~ N(0, bivector_init_std**2), alpha = 1, bias = 0, random unit warm starts (power
        decomposition)."""
        with torch.no_grad():
            nn.init.normal_(self.left_bivectors, 0.0, self.bivector_init_std)
            if self.right_bivectors is not None:
                nn.init.normal_(self.right_bivectors, 0.0, self.bivector_init_std)
            if self.alpha is not None:
                nn.init.ones_(self.alpha)
            if self.bias is not None:
                nn.init.zeros_(self.bias)
            for side, warm in ((self.left_bivectors, self.left_warm_start),
                               (self.right_bivectors, self.right_warm_start)):
                if warm is not None:
                    warm.normal_()
                    warm.div_(torch.linalg.vector_norm(warm, dim=-1, keepdim=True).clamp_min(1e-12))
                elif side is not None:
                    # the same draws as a power layer's warm starts, discarded: a seeded model
                    # (bivectors, permutations, the layers built after it) is the same whichever
                    # decomposition it uses, and the same as before exact layers kept no warm starts
                    side.new_empty(self.pairs, self.planes, self.n).normal_()

    def _decompose(self, bivectors, warm, update):
        """(V, W, spectrum or None)."""
        if self.gradient == "exact" and self.decomposition == "exact":
            # one eigen-decomposition gives the planes and, kept, the gradient's phi(ad_B)
            V, W, spec = F.exact_factors(bivectors, self.n)
            return V, W, spec
        return self._iterate(bivectors, warm, update)

    @eager_under_compile
    def _iterate(self, bivectors, warm, update):
        """The power method (or the paper's gradient), eagerly under torch.compile: its per-row
        stop test is a data-dependent loop that would otherwise be unrolled max_iter times."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.gradient == "power-step"):
            result = F.invariant_decomposition(
                bivectors, warm, tol=self.tol, max_iter=self.max_iter, method=self.decomposition,
                refresh=self.refresh,
            )
        if update and warm is not None:  # the exact decomposition with the paper's gradient keeps none
            with torch.no_grad():
                warm.copy_(result.warm_start.to(warm.dtype))
        return result.V, result.W, None

    def _factor_state(self):
        # The cache keeps these tensors alive, so id() and data_ptr() cannot be taken over by
        # another tensor (e.g. a new bivector passed through torch.func.functional_call) while
        # the cache entry exists; _version catches in-place updates.
        tensors = (self.left_bivectors, self.right_bivectors, self.left_warm_start, self.right_warm_start)
        versions = tuple(
            None if t is None else (id(t), t.data_ptr(), t._version, t.dtype, t.device) for t in tensors
        )
        return versions + (self.tol, self.max_iter, self.decomposition, self.refresh, self.gradient), tensors

    def rotor_factors(self, update_warm_start: bool = False):
        """Factor pairs (left, right) of the P rotors (right is None for single rotors).

        Without a warm-start update (eval mode) the factors are computed once and reused until a
        bivector, a warm start or a decomposition setting changes (with ``gradient="power-step"``
        only at inference, since the factors then carry the gradient).
        """
        left, right, _ = self._rotors(update_warm_start)
        return left, right

    def _rotors(self, update_warm_start: bool):
        """(left, right, spectra): the factor pairs and the bivectors' spectra (None where the
        decomposition computed none), cached as :meth:`rotor_factors` says."""
        constant = self.gradient == "exact" or not torch.is_grad_enabled()
        reuse = not update_warm_start and constant and not _capturing()
        if reuse:
            state, alive = self._factor_state()
            if self._factor_cache is not None and self._factor_cache[0] == state:
                return self._factor_cache[1]
        VL, WL, specL = self._decompose(self.left_bivectors, self.left_warm_start, update_warm_start)
        right, specR = None, None
        if self.double_rotor:
            VR, WR, specR = self._decompose(self.right_bivectors, self.right_warm_start, update_warm_start)
            right = (VR, WR)
        result = ((VL, WL), right, (specL, specR))
        self._factor_cache = (state, result, alive) if reuse else None
        return result

    def _check_parameters(self):
        named = [("left_bivectors", self.left_bivectors), ("right_bivectors", self.right_bivectors),
                 ("alpha", self.alpha), ("bias", self.bias)]
        owner = getattr(self, "_qualified_name", None) or (
            f"RotorLinear(in_features={self.in_features}, out_features={self.out_features})"
        )
        _finite_or_raise(named, owner)

    def _plan(self, batch: int, x: torch.Tensor, update_warm_start: bool,
              network_stage: bool = False, autocast: bool = False) -> dispatch.Plan:
        """What this call runs: :func:`galinear.nn.functional.plan.plan` decides (mode "inference":
        no autograd and no warm-start update); ``network_stage``: for a RotorNetwork stage of
        gadgets like this one; ``autocast``: under a torch.autocast that lowers the parameters'
        dtype."""
        mode = "training" if update_warm_start or torch.is_grad_enabled() else "inference"
        stage = {"network_stage": True} if network_stage else {}
        if autocast:
            stage["autocast"] = True
        if self.gradient != "exact" and torch.is_grad_enabled():
            stage["exact"] = False  # autograd differentiates the backend itself
        return dispatch.plan(self.n, batch, x.device, x.dtype, mode, backend=self.backend,
                             entries=self.in_features * self.out_features, **stage)

    def _versions(self, *tensors):
        return tuple(None if t is None else (id(t), t.data_ptr(), t._version) for t in tensors)

    def _chunk_weight(self, update_warm_start):
        """(J c, I c) matrix of all chunk pairs (parity basis) and its (input, output) coordinates."""
        output_index = self.output_index.view(self.output_chunks, self.chunk_size)
        if self.n == 0:  # Cl(0): every chunk map is the 1 x 1 identity, the weight is alpha
            one = self.left_bivectors.new_ones(self.pairs)
            weight = (one if self.alpha is None else one * self.alpha).view(self.output_chunks, self.input_chunks)
            return weight, self.input_index.reshape(-1), output_index.reshape(-1)
        left, right, spectra = self._rotors(update_warm_start)
        if self.gradient == "exact":
            blocks = exact_parity_blocks(self.left_bivectors, self.right_bivectors, left, right, spectra)
        else:
            blocks = parity_blocks(left, right)
        return (chunk_weight(blocks, self.alpha, self.output_chunks), chunk_coordinates(self.input_index),
                chunk_coordinates(output_index))

    def assembled_weight(self, update_warm_start: bool = False) -> torch.Tensor:
        """The (out_features, in_features) matrix, built from all chunk-pair matrices in one batched
        call (differentiable; cached like the factors when nothing needs a gradient)."""
        cacheable = (not update_warm_start and not torch.is_grad_enabled()
                     and not _capturing())
        if cacheable:
            state = self._factor_state()[0] + self._versions(self.alpha, self.output_scale)
            if self._weight_cache is not None and self._weight_cache[0] == state:
                return self._weight_cache[1]
        weight = assemble_weight(*self._chunk_weight(update_warm_start), self.output_scale, self.in_features)
        self._weight_cache = (state, weight, (self.alpha,)) if cacheable else None
        return weight

    def _run_cached_matrix(self, flat, update_warm_start, plan):
        """:attr:`~galinear.nn.functional.plan.Path.CACHED_MATRIX`: one product with the assembled matrix."""
        return nn.functional.linear(flat, self.assembled_weight(update_warm_start), self.bias)

    def _run_traced_matrix(self, flat, update_warm_start, plan):
        """:attr:`~galinear.nn.functional.plan.Path.TRACED_MATRIX`: the traced graph is one linear
        map whose matrix is a constant."""
        with _Untraced():
            weight = self.assembled_weight(False).detach()
        return nn.functional.linear(flat, weight, self.bias)

    def _run_chunk_matrices(self, flat, update_warm_start, plan):
        """:attr:`~galinear.nn.functional.plan.Path.CHUNK_MATRICES`: every chunk-pair matrix in one
        batched call, the activations permuted into the chunks' parity basis (cheaper than the
        weight), then one product."""
        weight, inputs, outputs = self._chunk_weight(update_warm_start)
        mapped = flat.index_select(1, inputs) @ weight.t()
        out = mapped.new_zeros(flat.shape[0], self.out_features).index_add(1, outputs, mapped) * self.output_scale
        return out if self.bias is None else out + self.bias

    def _run_decode(self, flat, update_warm_start, plan):
        """:attr:`~galinear.nn.functional.plan.Path.DECODE`: the compiled decoding kernel."""
        return self.decode(flat)

    def _forward(self, x, update_warm_start, autocast=False):
        _check_input(self, x)
        if self.check_finite and not autocast and not _capturing():
            checked = self._versions(self.left_bivectors, self.right_bivectors, self.alpha, self.bias)
            if checked != self._checked:
                self._check_parameters()
                self._checked = checked
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        plan = self._plan(flat.shape[0], flat, update_warm_start, autocast=autocast)
        run = _RUNNERS.get(plan.path)
        if run is None:
            raise ValueError(f"a RotorLinear call cannot run the path {plan.path} (plan: {plan.rule})")
        if plan.threads is None:
            out = run(self, flat, update_warm_start, plan)
        else:
            with dispatch.intra_op_threads(plan.threads):
                out = run(self, flat, update_warm_start, plan)
        return out.reshape(*lead, self.out_features)

    def _run_sandwich(self, flat, update_warm_start, plan):
        """:attr:`~galinear.nn.functional.plan.Path.SPINOR` or
        :attr:`~galinear.nn.functional.plan.Path.BACKEND`: the plan's sandwich backend on every
        chunk pair, with the exact gradient where the plan says so (its thread count, which the
        exact gradient's backward pass runs with too), then alpha, the averaging and the sums."""
        batch = flat.shape[0]
        c, I, J = self.chunk_size, self.input_chunks, self.output_chunks
        if self._plain_input:
            chunks = flat.view(batch, I, c)
        else:
            chunks = flat[:, self.input_index]
        pairs = chunks.unsqueeze(1).expand(batch, J, I, c).reshape(batch, self.pairs, c)
        left, right, spectra = self._rotors(update_warm_start)
        if plan.exact:
            mapped = exact_rotor_sandwich(
                pairs, self.left_bivectors, self.right_bivectors, left, right, backend=plan.fn, spectra=spectra,
                threads=plan.threads, parts=plan.parts,
            )
        else:  # autograd through the backend (a differentiable one: the plan's rule)
            VR, WR = (None, None) if right is None else right
            mapped = plan.fn(pairs, *left, VR, WR)
        # alpha and the count averaging in one pass over the activations (and none for the sum
        # when every output chunk has one input chunk)
        scale = self.output_scale[self.output_index].view(J, 1, c)   # each output's scale, per chunk
        if self.alpha is not None:
            scale = self.alpha.view(J, I, 1) * scale
        mapped = mapped.view(batch, J, I, c)
        if mapped.requires_grad or mapped.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr():
            mapped = mapped * scale
        else:  # a new tensor outside autograd: scaled where it is (no second activation-sized buffer)
            mapped = mapped.mul_(scale)
        summed = mapped.view(batch, J * c) if I == 1 else mapped.sum(2).reshape(batch, J * c)
        if self._plain_output:
            out = summed
        else:
            out = summed.new_zeros(batch, self.out_features).index_add(1, self.output_index, summed)
        if self.bias is not None:
            out = out + self.bias
        return out

    def forward(self, x):
        """y = gadget(x) for x (..., in_features); refreshes the warm starts in training mode.

        The output has x's dtype at every batch size and on every backend: an input of another
        floating-point dtype than the parameters' (bfloat16 or float16 activations, say) is
        computed in the parameters' dtype (float32 or float64) and the result cast back.
        """
        _check_input(self, x)
        dtype, work = x.dtype, self.left_bivectors.dtype
        if _autocast_dtype(x, work) is not None:  # the output has the autocast dtype, as nn.Linear's has
            return self._forward(x, update_warm_start=self.training, autocast=True)
        if dtype == work:
            return self._forward(x, update_warm_start=self.training)
        return self._forward(x.to(work), update_warm_start=self.training).to(dtype)

    def _run_autocast(self, flat, update_warm_start, plan):
        """:attr:`~galinear.nn.functional.plan.Path.AUTOCAST`, under torch.autocast: the rotors and
        their chunk matrices in the parameters' dtype (the decomposition and phi(ad_B) need it),
        the product over the tokens, which is the cost, in the autocast dtype; the output has that
        dtype, as nn.Linear's has."""
        low = _autocast_dtype(flat, self.left_bivectors.dtype)
        flat = flat.to(low)
        with torch.autocast(flat.device.type, enabled=False):
            if not self.training and not torch.is_grad_enabled():
                weight = self.assembled_weight()
                return nn.functional.linear(flat, weight.to(low), None if self.bias is None else self.bias.to(low))
            weight, inputs, outputs = self._chunk_weight(self.training)
            mapped = flat.index_select(1, inputs) @ weight.t().to(low)
            out = mapped.new_zeros(flat.shape[0], self.out_features).index_add(1, outputs, mapped)
            out = out * self.output_scale.to(low)
            if self.bias is not None:
                out = out + self.bias.to(low)
        return out

    def dense_weight(self) -> torch.Tensor:
        """The equivalent (out_features, in_features) matrix (bias excluded); no state change."""
        eye = torch.eye(self.in_features, dtype=self.left_bivectors.dtype, device=self.left_bivectors.device)
        y = self._forward(eye, update_warm_start=False)
        if self.bias is not None:
            y = y - self.bias
        return y.t()

    def pair_matrices(self) -> torch.Tensor:
        """(P, c, c) orthogonal matrices of the chunk maps x -> R x S~ (before alpha)."""
        left, right = self.rotor_factors(False)
        if self.gradient != "exact":
            return F.sandwich_matrix(left, right)
        c = self.chunk_size
        eye = torch.eye(c, dtype=self.left_bivectors.dtype, device=self.left_bivectors.device)
        plan = self._plan(c, eye, False)
        # the plan's backend; a matrix path or the decoding kernel gives no chunk maps: the chunk matrices
        fn = plan.fn if plan.path in (dispatch.Path.SPINOR, dispatch.Path.BACKEND) else dispatch.MATRICES
        with dispatch.intra_op_threads(plan.threads):
            columns = exact_rotor_sandwich(
                eye.unsqueeze(1).expand(c, self.pairs, c), self.left_bivectors, self.right_bivectors,
                left, right, backend=fn, threads=plan.threads, parts=plan.parts,
            )  # columns[t, p] = M_p e_t
        return columns.permute(1, 2, 0)

    def num_rotor_parameters(self) -> int:
        """P * C(n, 2) * (2 if double_rotor else 1)."""
        return self.pairs * self.bivector_size * (2 if self.double_rotor else 1)

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, chunk_size={self.chunk_size}, "
            f"pairs={self.pairs}, double_rotor={self.double_rotor}, alpha={self.alpha is not None}, "
            f"bias={self.bias is not None}, backend={self.backend!r}"
        )


#: What a RotorLinear call runs for each path of its plan.
_RUNNERS = {
    dispatch.Path.AUTOCAST: RotorLinear._run_autocast,
    dispatch.Path.CHUNK_MATRICES: RotorLinear._run_chunk_matrices,
    dispatch.Path.CACHED_MATRIX: RotorLinear._run_cached_matrix,
    dispatch.Path.TRACED_MATRIX: RotorLinear._run_traced_matrix,
    dispatch.Path.DECODE: RotorLinear._run_decode,
    dispatch.Path.SPINOR: RotorLinear._run_sandwich,
    dispatch.Path.BACKEND: RotorLinear._run_sandwich,
}
