"""The training path of :class:`~galinear.nn.RotorNetwork` (and its Givens control): every stage
through its gadgets' structured map, the branches of a hidden layer in one call, and the stage's
chunk sum, permutations, LayerNorm, PReLU and branch sum in one autograd Function
(:func:`galinear.nn.functional.branches.branch_sum`). ``StructuredStages`` holds it for the
network class, which defines the gadgets, the permutations and the inference paths.
"""
from __future__ import annotations

import torch

from galinear.nn import functional as F
from galinear.nn.dexp import exact_parity_blocks, exact_rotor_sandwich
from galinear.nn.functional import plan as dispatch
from galinear.nn.functional.branches import branch_sum
from galinear.nn.functional.decomposition import Spectrum
from galinear.nn.functional.matrices import parity_order
from galinear.nn.functional.plan import Path
from galinear.nn.functional.recompute import recomputed

__all__ = ["StructuredStages"]


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


class StructuredStages:
    """The structured training path of a rotor network (mixed into
    :class:`~galinear.nn.RotorNetwork`, which provides the gadgets ``input_gadget``,
    ``hidden_gadgets`` and ``output_gadget``, the permutations, ``branch_weights``,
    ``activation``, ``hidden`` and ``eps``)."""

    def _structured_forward(self, x, plans):
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
        Nothing of size hidden x hidden is built. ``plans``: one
        :class:`~galinear.nn.functional.plan.Plan` per stage, the :attr:`Plan.stages` of the
        network's plan.
        """
        lead = x.shape[:-1]
        x = x.reshape(-1, self.in_features)
        blocks = self._network_blocks(plans)
        # a later stage on parity blocks whose chunks cover h once reads h in the blocks' order:
        # the stage before writes it so (its permutations composed with that order), and the
        # product takes a view of h instead of a gathered copy
        reads = [None if index == 0 or blocks[index] is None or not stage[0]._plain_input else _block_inputs(stage[0])
                 for index, stage in enumerate(self._stages())]
        h, remake = self._stage([self.input_gadget], self.input_permutation.unsqueeze(0), None, x, plans[0],
                                blocks[0], order=reads[1])
        for layer, gadgets in enumerate(self.hidden_gadgets):
            h, remake = self._stage(list(gadgets), self.hidden_permutations[layer], self.branch_weights[layer], h,
                                    plans[1 + layer], blocks[1 + layer], order=reads[2 + layer],
                                    remake=None if reads[1 + layer] is None else remake)
        return self._output(h, plans[-1], blocks[-1],
                            None if reads[-1] is None else remake).reshape(*lead, self.out_features)

    def _stages(self):
        """The gadgets of every stage in order: input, each hidden layer's branches, output."""
        return [[self.input_gadget], *(list(layer) for layer in self.hidden_gadgets), [self.output_gadget]]

    def _network_blocks(self, plans):
        """Per stage the parity blocks (pairs, 2, c/2, c/2) of its gadgets' chunk pairs, None for a
        stage that builds its own: the stages whose plan (``plans``) is the parity-block path
        (:meth:`_stage_blocks`) with the exact decomposition build theirs
        together, one :func:`~galinear.nn.functional.exact_factors` and one
        :func:`~galinear.nn.dexp.exact_parity_blocks` call for all stages of one n and rotor kind
        (single or double)."""
        stages = self._stages()
        groups = {}
        for index, stage in enumerate(stages):
            first = stage[0]
            if plans[index].path is not Path.PARITY_BLOCKS or not all(
                    g.n == first.n and g.double_rotor == first.double_rotor and g.decomposition == "exact"
                    for g in stage):
                continue
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

    def _output(self, h, plan, blocks=None, remake=None):
        """The output gadget on h (T, hidden): as parity blocks (:meth:`_stage_blocks`; ``blocks``:
        its chunk pairs' blocks, when already built; ``remake``: h is in the blocks' order) where
        its stage's ``plan`` runs them, else its own call."""
        gadget = self.output_gadget
        if blocks is None:
            if plan.path is not Path.PARITY_BLOCKS:
                return gadget(h)
            _checked_gadget(gadget)
        y, scale, dest = self._stage_blocks([gadget], h, blocks, remake)
        S, T, _, Kp = y.shape
        flat = (y[:, :, 0] * scale.view(S, 1, Kp)).permute(1, 0, 2).reshape(T, S * Kp)
        return flat.new_zeros(T, self.out_features).index_add(1, dest, flat)

    def _stage(self, gadgets, permutations, weights, h, plan, blocks=None, order=None, remake=None):
        """(h, remake) of one stage on h (T, hidden): ``gadgets`` applied to h as the stage's ``plan``
        says, then ``branch_sum``; ``blocks``: the gadgets' parity blocks, when already built (then the stage runs
        :meth:`_stage_blocks`, with ``remake`` where h is in their order). ``order``: the
        coordinates the next stage reads, the order the result is written in (None: the
        hidden order). The returned remake recomputes the result (:meth:`_stage_blocks`)."""
        if blocks is None:
            y, scale, dest = self._stage_maps(gadgets, h, plan)
        else:
            y, scale, dest = self._stage_blocks(gadgets, h, blocks, remake)
        if order is not None:
            permutations = permutations[:, order]
        args = (y, scale, weights, self.activation.weight, dest, permutations, self.hidden, self.eps)
        guards = tuple(t for t in args[:4] if t is not None)
        return branch_sum(*args), (lambda: branch_sum(*args), guards)

    def _stage_maps(self, gadgets, h, plan):
        """(y, scale, dest) of :func:`~galinear.nn.functional.branches.branch_sum` for the
        stage's gadgets on h (T, in), as the stage's ``plan`` says: the parity blocks of every
        chunk pair (:meth:`_stage_blocks`), the plan's sandwich backend on every chunk pair of all
        gadgets in one call, or each gadget's own output, stacked (:attr:`Path.GADGETS`)."""
        return _STAGE_RUNNERS[plan.path](self, gadgets, h, plan)

    def _stage_own_calls(self, gadgets, h, plan):
        """Each gadget's own call, the outputs stacked."""
        return torch.stack([g(h) for g in gadgets], 1).unsqueeze(0), None, None

    def _stage_parity_blocks(self, gadgets, h, plan):
        for g in gadgets:
            _checked_gadget(g)
        return self._stage_blocks(gadgets, h)

    def _stage_sandwich(self, gadgets, h, plan):
        """The plan's sandwich backend on every chunk pair of all ``gadgets`` in one exact map."""
        for g in gadgets:
            _checked_gadget(g)
        first = gadgets[0]
        T = h.shape[0]
        c, I, J, P, B = first.chunk_size, first.input_chunks, first.output_chunks, first.pairs, len(gadgets)
        with dispatch.intra_op_threads(plan.threads):
            left, right, spectra = _stage_rotors(gadgets)
            chunks = h.view(T, I, c) if first._plain_input else h[:, first.input_index]
            pairs = chunks.unsqueeze(1).expand(T, B * J, I, c).reshape(T, B * P, c)
            mapped = exact_rotor_sandwich(
                pairs, _joined([g.left_bivectors for g in gadgets]),
                None if right is None else _joined([g.right_bivectors for g in gadgets]),
                left, right, backend=plan.fn, spectra=spectra, threads=plan.threads, parts=plan.parts,
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
        an nn.Linear's work, and no d x d matrix is built. y comes out as (2, T, B, J c/2),
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


#: What a stage of the structured path runs for each path of its plan.
_STAGE_RUNNERS = {
    Path.GADGETS: StructuredStages._stage_own_calls,
    Path.PARITY_BLOCKS: StructuredStages._stage_parity_blocks,
    Path.SPINOR: StructuredStages._stage_sandwich,
    Path.BACKEND: StructuredStages._stage_sandwich,
}
