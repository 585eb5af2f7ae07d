"""`galinear verify`: runs the proofs for small n and reports failures honestly."""
import pytest

from galinear.cli import main
from galinear.commands.verify import find_proofs

EXPECTED = {
    "algebra_axioms",
    "exp_simple_bivector",
    "invariant_decomposition",
    "rotor_normalisation",
    "single_rotor_sandwich",
    "double_rotor_sandwich",
    "rotor_spec",
    "generated_kernels",
    "dexp",
    "multivector_inverse",
    "signature_rotors",
}


def test_every_identity_has_a_proof_script():
    assert EXPECTED <= set(find_proofs())


def test_verify_runs_from_the_installed_package_outside_a_checkout(tmp_path):
    """The proofs ship inside the package: no proofs/ folder of a checkout is needed."""
    import subprocess
    import sys
    from pathlib import Path

    import galinear

    package = Path(galinear.__file__).resolve().parent
    assert all(path.parent == package / "proofs" for path, *_ in find_proofs().values())
    done = subprocess.run([sys.executable, "-m", "galinear", "verify", "--only", "rotor_spec", "--n", "2"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1/1 proofs passed" in done.stdout


# the proofs of every kind at n = 2; each proof runs in its own interpreter (about 2.5 s of imports)
QUICK = ("algebra_axioms", "generated_kernels", "signature_rotors")


def test_verify_small_n_proves_a_proof_of_each_kind(capsys):
    assert main(["verify", "--n", "2", *(a for name in QUICK for a in ("--only", name))]) == 0
    out = capsys.readouterr().out
    for name in QUICK:
        assert name in out
    assert f"{len(QUICK)}/{len(QUICK)} proofs passed" in out and "FAILED" not in out


@pytest.mark.slow  # every proof in its own interpreter: about 30 s
def test_verify_small_n_proves_everything(capsys):
    assert main(["verify", "--n", "2"]) == 0
    out = capsys.readouterr().out
    for name in EXPECTED:
        assert name in out
    total = len(find_proofs())
    assert f"{total}/{total} proofs passed" in out and "FAILED" not in out


@pytest.mark.slow
def test_verify_default_bounds(capsys):
    assert main(["verify"]) == 0


def test_verify_reports_a_failing_proof(tmp_path, capsys):
    (tmp_path / "wrong.py").write_text(
        "import sympy as sp\n"
        "from galinear.symbolic import vector\n"
        "from galinear.symbolic.proof_scripts import run_proof\n"
        "IDENTITY = 'a deliberately false identity: u v = v u'\n"
        "N_MIN = 2\n"
        "N_DEFAULT = 2\n"
        "def prove(n_max, log):\n"
        "    u, v = vector(n_max, 'u'), vector(n_max, 'v')\n"
        "    log.check('u v = v u', u * v - v * u, sp.expand)\n"
        "if __name__ == '__main__':\n"
        "    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))\n"
    )
    assert main(["verify", "--proofs-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL u v = v u" in out and "0/1 proofs passed" in out


def test_verify_bad_arguments(tmp_path, capsys):
    assert main(["verify", "--only", "no_such_proof"]) == 2
    assert "unknown proof" in capsys.readouterr().err
    assert main(["verify", "--proofs-dir", str(tmp_path / "missing")]) == 2
    assert main(["verify", "--n", "0"]) == 2


def test_verify_only_one(capsys):
    assert main(["verify", "--only", "rotor_spec", "--n", "2"]) == 0
    assert "1/1 proofs passed" in capsys.readouterr().out
