"""The Triton transforms of the spinor backend (galinear.nn.functional.spinor_triton), run by Triton's
interpreter on the CPU (TRITON_INTERPRET=1, in a child process: the variable is read when the
kernels are defined) against the numba kernels, and a whole spinor sandwich and its transposed
map (the input gradient of the exact gradient) through them against the dense backend."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = r"""
import json
import torch
from galinear.nn.functional import spinor_triton as T
from galinear.matrix_rep import representation
from galinear.nn import functional as F
from galinear.nn.dexp import transposed_factors
from galinear.nn.functional import spinor as S

torch.manual_seed(0)
worst = {}
for n in (8, 9, 10, 11):
    tab = representation(n)
    N, H = tab.N, tab.blocks
    x = torch.randn(5, 2, 2**n)
    G = 2 * tab.irreps
    dtype = S._matrix_dtype(n, torch.float32)
    ref = S._to_matrix(x, 1, torch.empty(G, N, 3, N, dtype=dtype))          # numba
    got = T.to_matrix(x, 1, torch.empty(G, N, 3, N, dtype=dtype))
    Y = ref.reshape(G, N, 3, H, N // H).permute(3, 0, 1, 2, 4).contiguous()
    y_ref, y_got = torch.zeros(5, 2, 2**n), torch.zeros(5, 2, 2**n)
    S._from_matrix(Y, y_ref, 1)
    T.from_matrix(Y, y_got, 1)
    worst[str(n)] = max(float((ref - got).abs().max()), float((y_ref - y_got).abs().max()))
# a whole sandwich and its transposed map with the Triton transforms standing in for numba's
x = torch.randn(7, 1, 256, requires_grad=True)
factors = [torch.randn(1, 4, 8) * 0.5 for _ in range(4)]
with torch.no_grad():  # the spinor backend itself (with gradients rotor_sandwich runs "factored")
    y = S.spinor_sandwich(x, *factors, transform="triton")
    g = torch.randn_like(y)
    gx = S.spinor_sandwich(g, *transposed_factors(*factors[:2]), *transposed_factors(*factors[2:]), transform="triton")
ref = F.rotor_sandwich(x, tuple(factors[:2]), tuple(factors[2:]), backend="dense")
(gx_ref,) = torch.autograd.grad(ref, [x], g)
worst["sandwich"] = float((y - ref).abs().max())
worst["gradients"] = float((gx - gx_ref).abs().max())
print(json.dumps(worst))
"""


def test_triton_transforms_match_the_numba_kernels_in_the_interpreter():
    pytest.importorskip("triton", reason="triton is not installed (pip install 'galinear[triton]')")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    worst = json.loads(result.stdout.strip().splitlines()[-1])
    for n in ("8", "9", "10", "11"):
        assert worst[n] < 2e-5, (n, worst)          # float32: the transform's sums in another order
    assert worst["sandwich"] < 1e-5 and worst["gradients"] < 1e-4, worst
