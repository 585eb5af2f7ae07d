"""Torch layer of galinear: differentiable rotor layers and the paper's baselines.

- :class:`RotorLinear`: the generalised rotor gadget (any d_in -> d_out);
- :class:`RotorNetwork`: the paper's q/k/v replacement network;
- :class:`LowRankLinear`, :class:`BlockHadamardLinear`: parameter-matched baselines;
- :class:`KroneckerSumLinear`, :class:`MonarchLinear`, :class:`MixedBlockHadamardLinear`: the field's
  structured matrices; :class:`GivensLinear`, :class:`GivensNetwork`: the orthogonal control;
- :mod:`galinear.nn.functional`: decomposition, simple rotors, sandwich maps and their backends;
- :mod:`galinear.nn.motors`: differentiable PGA motors (exp, log, sandwich in Cl(3,0,1));
- :func:`freeze`: every rotor layer of a model in its inference form (:class:`FrozenLinear`,
  :class:`FrozenNetwork`: maps read from buffers), for ONNX, ``torch.export`` and ``torch.jit.trace``.
"""
from galinear.nn import functional, motors
from galinear.nn.baselines import BlockHadamardLinear, LowRankLinear
from galinear.nn.network import RotorNetwork
from galinear.nn.checks import check_finite
from galinear.nn.rotor import RotorLinear
from galinear.nn.givens import GivensLinear, GivensNetwork
from galinear.nn.structured import KroneckerSumLinear, MixedBlockHadamardLinear, MonarchLinear
from galinear.nn.freeze import FrozenLinear, FrozenNetwork, freeze

__all__ = ["RotorLinear", "RotorNetwork", "LowRankLinear", "BlockHadamardLinear", "KroneckerSumLinear", "MonarchLinear",
           "MixedBlockHadamardLinear", "GivensLinear", "GivensNetwork", "check_finite", "functional", "motors",
           "freeze", "FrozenLinear", "FrozenNetwork"]
