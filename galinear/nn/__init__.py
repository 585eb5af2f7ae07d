"""Torch layer of galinear: differentiable rotor layers and the paper's baselines.

- :class:`RotorLinear`: the generalised rotor gadget (any d_in -> d_out);
- :class:`RotorNetwork`: the paper's q/k/v replacement network;
- :class:`LowRankLinear`, :class:`BlockHadamardLinear`: parameter-matched baselines;
- :class:`KroneckerSumLinear`, :class:`MonarchLinear`, :class:`MixedBlockHadamardLinear`: the field's
  structured matrices; :class:`GivensLinear`, :class:`GivensNetwork`: the orthogonal control;
- :mod:`galinear.nn.functional`: decomposition, simple rotors, sandwich maps and their backends;
- :mod:`galinear.nn.motors`: differentiable PGA motors (exp, log, sandwich in Cl(3,0,1));
- :func:`freeze`: every rotor layer of a model in its inference form (:class:`FrozenLinear`,
  :class:`FrozenNetwork`: maps read from buffers), for ONNX, ``torch.export`` and ``torch.jit.trace``;
- :mod:`galinear.nn.introspect`: the planes and angles a rotor layer learned (also importable as
  ``galinear.nn.inspect``, its former name, without a file of the standard library's name).
"""
import sys as _sys

from galinear._extras import require as _require

_require("torch", "galinear.nn")  # without torch: "galinear.nn needs torch: pip install 'galinear[torch]'"

from galinear.nn import functional, motors  # noqa: E402
from galinear.nn.baselines import BlockHadamardLinear, LowRankLinear  # noqa: E402
from galinear.nn.network import RotorNetwork  # noqa: E402
from galinear.nn.checks import check_finite  # noqa: E402
from galinear.nn.rotor import RotorLinear  # noqa: E402
from galinear.nn.givens import GivensLinear, GivensNetwork  # noqa: E402
from galinear.nn.structured import KroneckerSumLinear, MixedBlockHadamardLinear, MonarchLinear  # noqa: E402
from galinear.nn.freeze import FrozenLinear, FrozenNetwork, freeze  # noqa: E402
from galinear.nn import introspect  # noqa: E402

_sys.modules[__name__ + ".inspect"] = introspect  # the former name (docs and callers still use it)
inspect = introspect

__all__ = ["RotorLinear", "RotorNetwork", "LowRankLinear", "BlockHadamardLinear", "KroneckerSumLinear", "MonarchLinear",
           "MixedBlockHadamardLinear", "GivensLinear", "GivensNetwork", "check_finite", "functional", "motors",
           "freeze", "FrozenLinear", "FrozenNetwork"]
