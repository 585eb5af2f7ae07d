"""Hadamard matrices of the models' widths: H H^T = n I exactly, the fast transform against the dense product."""
import numpy as np
import pytest
import torch

from galinear.quantize.hadamard import (
    BASE_ORDERS, apply_hadamard, hadamard, hadamard_factors, is_hadamard, paley1, paley2, random_hadamard,
)


@pytest.mark.parametrize("order", [12, 20, 36, 40, 576, 640, 1536, 2048])
def test_hadamard_orders_of_the_models(order):
    h = hadamard(order)
    assert h.dtype == np.int64 and is_hadamard(h)
    f = h.astype(np.float64)  # exact: every entry of the product is a sum of +-1 terms
    assert np.array_equal(f @ f.T, order * np.eye(order))


def test_the_base_orders_and_their_constructions():
    assert is_hadamard(paley1(19)) and paley1(19).shape == (20, 20)
    assert is_hadamard(paley2(17)) and paley2(17).shape == (36, 36)
    assert {12, 20, 36, 40} <= set(BASE_ORDERS)
    assert hadamard_factors(576) == (36, 16) and hadamard_factors(1536) == (12, 128)
    assert not is_hadamard(np.ones((4, 4), dtype=np.int64))


@pytest.mark.parametrize("width", [64, 576, 640])
def test_fast_transform_equals_the_dense_product(width):
    x = torch.randn(3, 5, width, dtype=torch.float64)
    dense = torch.as_tensor(hadamard(width), dtype=torch.float64) / np.sqrt(width)
    assert torch.allclose(apply_hadamard(x), x @ dense.T, atol=1e-12)
    q = random_hadamard(width, seed=3)
    assert torch.allclose(q @ q.T, torch.eye(width, dtype=torch.float64), atol=1e-12)


def test_a_width_no_order_covers_names_the_fix():
    with pytest.raises(ValueError, match=r"no Hadamard matrix of order 584.*cayley.*576"):
        hadamard_factors(584)
