"""The kernel generator: deterministic output, shipped files up to date, importable output."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from galinear.cli import main
from galinear.symbolic.codegen import GENERATED_ROOT, generate, kernel_path, write_kernel
from galinear.symbolic.spec import KernelSpec, shipped_specs

from galinear.testing import reference_gp


def test_same_spec_gives_identical_bytes_across_processes():
    code = (
        "from galinear.symbolic.codegen import generate; from galinear.symbolic.spec import KernelSpec;"
        "import sys; sys.stdout.write(generate(KernelSpec('sandwich2', (1, 1, 1, 1)), 'numba')"
        " + generate(KernelSpec('gp', (0, 1, -1)), 'torch'))"
    )
    outputs = set()
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert outputs.pop() == generate(KernelSpec("sandwich2", (1, 1, 1, 1)), "numba") + generate(
        KernelSpec("gp", (0, 1, -1)), "torch"
    )


@pytest.mark.parametrize("spec", [s for s in shipped_specs() if s.n <= 5], ids=lambda s: f"{s.op}-{s.n}")
def test_shipped_files_are_regenerated_byte_for_byte(spec):
    for target in ("numba",):
        assert kernel_path(spec, target).read_bytes() == generate(spec, target).encode()


@pytest.mark.slow
@pytest.mark.parametrize("spec", [s for s in shipped_specs() if s.n == 6], ids=lambda s: f"{s.op}-{s.n}")
def test_shipped_files_n6_are_regenerated_byte_for_byte(spec):
    for target in ("numba",):
        assert kernel_path(spec, target).read_bytes() == generate(spec, target).encode()


def test_header_names_spec_and_command():
    text = kernel_path(KernelSpec.euclidean("gp", 3), "numba").read_text()
    assert "spec:       KernelSpec(op='gp', metric=(1, 1, 1))" in text
    assert "galinear codegen --op gp --n 3 --target numba" in text
    assert "import numba" not in text and "from galinear._numba import jit" in text


def test_written_kernel_for_other_signature_imports_and_computes(tmp_path, rng):
    spec = KernelSpec("gp", (0, 1, -1))  # Cl(1,1,1): a degenerate and a negative direction
    path = write_kernel(spec, "numba", tmp_path)
    assert path == tmp_path / "gp_zpm.py"
    assert write_kernel(spec, "numba", tmp_path) == path  # unchanged file is left alone
    module_spec = importlib.util.spec_from_file_location("gp_zpm_test", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    a, b = rng.standard_normal((2, 5, 8))
    out = np.empty_like(a)
    module.kernel(a, b, out)
    np.testing.assert_allclose(out, reference_gp(a, b, (0, 1, -1)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", ["op", "lc", "rc"])
def test_other_products_generate(op, rng):
    torch = pytest.importorskip("torch")
    from galinear.symbolic import MultiVector

    source = generate(KernelSpec.euclidean(op, 3), "torch")
    namespace = {}
    exec(compile(source, f"<{op}>", "exec"), namespace)  # torch target: no numba cache involved
    a, b = rng.integers(-3, 4, size=(2, 8))
    got = namespace["kernel"](torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64))
    want = getattr(MultiVector(3, list(a)), op)(MultiVector(3, list(b)))
    np.testing.assert_array_equal(got.numpy(), [float(c) for c in want.coefficients])


def test_bad_specs():
    with pytest.raises(ValueError, match="unknown op"):
        KernelSpec("sandwich3", (1, 1))
    with pytest.raises(ValueError, match="n >= 1"):
        KernelSpec("gp", ())
    with pytest.raises(ValueError, match="n <= 8"):
        KernelSpec.euclidean("gp", 9)
    with pytest.raises(ValueError, match="target"):
        generate(KernelSpec.euclidean("gp", 2), "cuda")
    with pytest.raises(TypeError, match="KernelSpec"):
        generate("gp", "numba")


def test_cli_codegen(tmp_path, capsys):
    assert main(["codegen", "--op", "sandwich", "--n", "2", "--target", "torch", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "sandwich_pp.py").read_text() == generate(KernelSpec.euclidean("sandwich", 2), "torch")
    assert main(["codegen", "--op", "gp", "--signature", "1,1,0", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "gp_pm.py").exists()
    assert main(["codegen", "--op", "gp", "--n", "2", "--print"]) == 0
    assert "def kernel(a, b, out):" in capsys.readouterr().out
    assert main(["codegen", "--op", "gp", "--n", "0", "--out", str(tmp_path)]) == 2
    assert main(["codegen", "--op", "gp", "--n", "2"]) == 2  # no --out
    assert main(["codegen", "--n", "2", "--out", str(tmp_path)]) == 2  # no --op
    assert main(["codegen", "--all", "--n", "2"]) == 2
    assert main(["codegen", "--op", "gp", "--signature", "x", "--out", str(tmp_path)]) == 2
    assert "--signature must be three integers" in capsys.readouterr().err


def test_generated_root_is_the_package():
    import galinear._generated as generated

    assert GENERATED_ROOT == Path(generated.__file__).resolve().parent


def test_generated_folder_holds_only_what_generate_all_writes():
    """No stale files: every module under galinear/_generated is written by `galinear codegen --all`."""
    expected = {"rotor_spec.py"} | {
        str(kernel_path(spec, "numba").relative_to(GENERATED_ROOT)) for spec in shipped_specs()
    }
    found = {
        str(path.relative_to(GENERATED_ROOT)) for path in GENERATED_ROOT.rglob("*.py") if path.name != "__init__.py"
    }
    assert found == expected
