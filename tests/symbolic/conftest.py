"""The ``dtype`` fixture of the symbolic-layer tests: every test that takes it runs in float32 and
float64 (references and tolerances: galinear.testing)."""
import numpy as np
import pytest


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request):
    return request.param
