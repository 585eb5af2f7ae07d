"""Torch layer of galinear: differentiable rotor layers and the paper's baselines.

- :class:`RotorLinear`: the generalised rotor gadget (any d_in -> d_out);
- :class:`RotorNetwork`: the paper's q/k/v replacement network;
- :class:`LowRankLinear`, :class:`BlockHadamardLinear`: parameter-matched baselines;
- :mod:`galinear.nn.functional`: decomposition, simple rotors, sandwich maps and their backends;
- :mod:`galinear.nn.motors`: differentiable PGA motors (exp, log, sandwich in Cl(3,0,1)).
"""
from galinear.nn import functional, motors
from galinear.nn.baselines import BlockHadamardLinear, LowRankLinear
from galinear.nn.rotor import RotorLinear, RotorNetwork, check_finite

__all__ = ["RotorLinear", "RotorNetwork", "LowRankLinear", "BlockHadamardLinear", "check_finite", "functional", "motors"]
