"""The inference path of :class:`~galinear.nn.rotor.RotorLinear` on a few tokens: one compiled call
(:class:`galinear.rotor_kernels.spinor.CheckedGadget`) applies every chunk pair's small matrices to the
tokens directly, without assembling an (out, in) weight. The layer's dispatcher
(:mod:`galinear.nn.functional.plan`) sends decoding-sized CPU batches here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from galinear.nn.checks import _check_input
from galinear.nn.functional.spinor import rotor_matrices

if TYPE_CHECKING:
    from galinear.rotor_kernels.spinor import CheckedGadget

__all__ = ["DecodeMethods"]


class DecodeMethods:
    """Mixin of :class:`~galinear.nn.rotor.RotorLinear`: ``decode`` and the state it caches (the
    layer's ``_decode_cache``, rebuilt when a parameter or an index table changes)."""

    def _decode_state(self):
        """Numpy arguments of :func:`galinear.rotor_kernels.spinor.gadget_forward`, cached like the
        assembled weight (rebuilt when a parameter changes)."""
        from galinear.rotor_kernels import spinor as kernels  # numba: compiled on first decode, not at import

        state = self._factor_state()[0] + self._versions(self.alpha, self.output_scale, self.input_index,
                                                         self.output_index)
        if self._decode_cache is not None and self._decode_cache[0] == state:
            return self._decode_cache[1]
        left, right = self.rotor_factors(False)
        dtype = self.left_bivectors.dtype
        P = self.pairs
        A = rotor_matrices(left[0].to(dtype), left[1].to(dtype))
        S = A if right is None else rotor_matrices(right[0].to(dtype), right[1].to(dtype))
        blocks = A.shape[1:]
        A = A.reshape(P, -1, *blocks).numpy()
        B = S.conj().transpose(-1, -2).resolve_conj().reshape(P, -1, *blocks).numpy()
        np_dtype = A.real.dtype
        alpha = np.ones(P, dtype=np_dtype) if self.alpha is None else self.alpha.detach().numpy().astype(np_dtype)
        args = (np.ascontiguousarray(self.input_index.numpy()), np.ascontiguousarray(self.output_index.numpy()),
                np.ascontiguousarray(self.output_scale.numpy().astype(np_dtype)), np.ascontiguousarray(alpha),
                kernels.prepare_gadget(A, B, np_dtype))
        self._decode_cache = (state, args, None)  # the third: the checked decoder, built by _decoder
        return args

    def _decoder(self) -> "CheckedGadget":
        """The layer's :class:`galinear.rotor_kernels.spinor.CheckedGadget` (its index tables checked
        once per state, not per call), cached with :meth:`_decode_state`."""
        from galinear.rotor_kernels import spinor as kernels

        args = self._decode_state()
        state, _, checked = self._decode_cache
        if checked is None:
            checked = kernels.CheckedGadget(*args, args[2].dtype, self.in_features)
            self._decode_cache = (state, args, checked)
        return checked

    def decode(self, x):
        """The layer on a few tokens (eval mode, no autograd, CPU) by one compiled call that
        applies every chunk pair's matrices directly (:class:`galinear.rotor_kernels.spinor.CheckedGadget`):
        it reads the chunk pairs' small matrices, not an (out, in) weight."""
        _check_input(self, x)
        if self.training or torch.is_grad_enabled() or x.device.type != "cpu":
            raise RuntimeError("decode() is for inference on the CPU: call model.eval() and run it under "
                               "torch.no_grad()")
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features).to(self.left_bivectors.dtype).contiguous().numpy()
        out = np.zeros((flat.shape[0], self.out_features), dtype=flat.dtype)
        self._decoder()(flat, out)
        y = torch.from_numpy(out)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*lead, self.out_features).to(x.dtype)
