import numpy as np
import pytest

from galinear import blades


def test_shortlex_order_n3():
    assert blades.blade_names(3) == ("1", "e1", "e2", "e3", "e12", "e13", "e23", "e123")
    masks = blades.shortlex_bitmasks(3)
    assert np.array_equal(blades.bitmask_to_shortlex(3)[masks], np.arange(8))


@pytest.mark.parametrize("n", range(0, 7))
def test_orders_are_inverse_permutations(n):
    masks = blades.shortlex_bitmasks(n)
    assert sorted(masks.tolist()) == list(range(2**n))
    assert np.array_equal(blades.bitmask_to_shortlex(n)[masks], np.arange(2**n))
    assert np.all(np.diff(blades.blade_grades(n)) >= 0)


def test_bivector_pairs_match_grade2_blades():
    n = 5
    pairs = blades.bivector_pairs(n)
    grade2 = blades.shortlex_bitmasks(n)[blades.blade_grades(n) == 2]
    assert [(1 << int(i)) | (1 << int(j)) for i, j in pairs] == grade2.tolist()


@pytest.mark.parametrize("signature", [(3, 0, 0), (2, 1, 1), (1, 3, 0), (0, 2, 2)])
def test_cayley_tables_match_clifford(signature):
    clifford = pytest.importorskip("clifford")
    layout, _ = clifford.Cl(*signature)
    metric = blades.metric_from_signature(*signature)
    assert tuple(layout.sig) == metric
    index, sign = blades.cayley_tables(metric)
    size = 2 ** len(metric)
    eye = np.eye(size)
    for i in range(size):
        for j in range(size):
            product = (layout.MultiVector(eye[i]) * layout.MultiVector(eye[j])).value
            assert np.array_equal(product, sign[i, j] * eye[index[i, j]])


def test_bad_dimension_messages():
    with pytest.raises(ValueError, match="out of range"):
        blades.shortlex_bitmasks(40)
    with pytest.raises(ValueError, match="no blade named"):
        blades.blade_index(3, "e14")
    with pytest.raises(ValueError, match="n <= 10"):
        blades.cayley_tables(11)
