"""galinear.prove: proved, refuted with a counterexample that really is one, undecided without a hang."""
import sys
import time

import pytest
import sympy as sp

import galinear
from galinear import blades
from galinear.blades import metric_from_signature
from galinear.compiler.expression import parse_identity
from galinear.compiler.identities import ProofReport, all_signatures, prove
from galinear.symbolic import MultiVector as SymbolicMultiVector
from galinear.symbolic.functions import exp, inv


def lc_of_wedge(a, b, c):
    return a << (b ^ c), (a << b) * c - (a << c) * b


def test_a_true_identity_is_proved_in_several_signatures_including_a_degenerate_one():
    report = prove(lc_of_wedge, {"a": 1, "b": 1, "c": 1}, [(3, 0, 0), (3, 0, 1), (2, 2, 0), (0, 0, 2)], trials=4)
    assert [r.status for r in report.results] == ["proved"] * 4
    assert report.holds is True and all(r.holds is True and r.counterexample is None for r in report.results)
    assert [r.signature for r in report.results] == [(3, 0, 0), (3, 0, 1), (2, 2, 0), (0, 0, 2)]
    assert all(r.seconds > 0 for r in report.results)
    table = str(report)
    assert table == report.table() and "proved" in table and "3,0,1" in table and "4 proved" in table


def _exact_difference(text_or_func, names, counterexample, signature):
    """lhs - rhs recomputed independently: galinear.symbolic.MultiVector with exact Rationals."""
    metric = metric_from_signature(*signature)
    n = len(metric)
    all_names = blades.blade_names(n)
    args = []
    for name in names:
        coefficients = [sp.S.Zero] * (1 << n)
        for blade, value in counterexample[name].items():
            assert isinstance(value, sp.Rational)
            coefficients[all_names.index(blade)] = value
        args.append(SymbolicMultiVector(metric, coefficients))
    lhs, rhs = text_or_func(*args)
    difference = (lhs - rhs).expand()
    return {b: c for b, c in zip(all_names, difference.coefficients) if c != 0}


@pytest.mark.parametrize("signature", [(3, 0, 0), (3, 0, 1), (1, 3, 0)])
def test_a_false_identity_is_refuted_with_a_counterexample_that_really_is_one(signature):
    false = parse_identity("a << (b ^ c) == (a << b) * c + (a << c) * b", ["a", "b", "c"])
    report = prove(false, {"a": 1, "b": 1, "c": 1}, [signature], trials=4)
    (result,) = report.results
    assert result.status == "refuted" and result.holds is False and report.holds is False
    assert result.numeric.startswith("differs")
    assert set(result.counterexample) == {"a", "b", "c"}
    nonzero = _exact_difference(false, ["a", "b", "c"], result.counterexample, signature)
    assert nonzero and nonzero == result.nonzero
    assert all(isinstance(v, sp.Rational) for v in result.nonzero.values())
    assert "counterexample" in report.table()


def test_a_false_rational_identity_is_refuted_exactly():
    def false(a, b):
        return inv(a + b), inv(a) + inv(b)

    report = prove(false, {"a": 1, "b": 1}, [(2, 0, 0)], trials=4)
    (result,) = report.results
    assert result.status == "refuted"
    metric = metric_from_signature(2, 0, 0)
    names = blades.blade_names(2)

    def symbolic(name):
        coefficients = [sp.S.Zero] * 4
        for blade, value in result.counterexample[name].items():
            coefficients[names.index(blade)] = value
        return SymbolicMultiVector(metric, coefficients)

    a, b = symbolic("a"), symbolic("b")
    difference = ((a + b).inv() - a.inv() - b.inv()).expand()
    assert {k: v for k, v in zip(names, difference.coefficients) if v != 0} == result.nonzero


def test_non_polynomial_identities_are_proved_where_defined():
    report = prove(lambda a: (a * inv(a), 1), {"a": 1}, [(2, 1, 0)], trials=4)
    assert report.results[0].status == "proved"
    assert "denominator" in report.results[0].note
    report = prove(lambda B: (exp(B) * exp(-B), 1), {"B": 2}, [(2, 0, 1)], trials=4)
    assert report.results[0].status == "proved"


def test_exp_that_is_false_is_refuted_with_exact_values():
    report = prove(lambda B: (exp(B) * exp(B), 1), {"B": 2}, [(2, 0, 0)], trials=4)
    (result,) = report.results
    assert result.status == "refuted"
    assert all(abs(complex(sp.N(v, 30))) > 1e-20 for v in result.nonzero.values())
    assert any(v.has(sp.sin, sp.cos, sp.sinh, sp.cosh) for v in result.nonzero.values())


def test_undecided_within_the_timeout_is_a_clean_stop():
    # associativity of full multivectors in Cl(4,1): true, and the exact expansion takes over a minute
    start = time.perf_counter()
    report = prove(lambda a, b, c: ((a * b) * c, a * (b * c)), {"a": "full", "b": "full", "c": "full"}, [(4, 1, 0)],
                   timeout=0.5, trials=1)
    elapsed = time.perf_counter() - start
    (result,) = report.results
    assert result.status == "undecided" and result.holds is None and report.holds is None
    assert "did not finish within 0.5 s" in result.note
    assert elapsed < 20  # the numeric pass and the 0.5 s exact step, nothing more
    assert "undecided" in report.table()


def test_a_hanging_exact_step_is_stopped(monkeypatch):
    module = sys.modules["galinear.compiler.identities"]

    def hang(*args, **kwargs):
        time.sleep(600)

    monkeypatch.setattr(module, "_exact", hang)
    start = time.perf_counter()
    report = prove(lc_of_wedge, {"a": 1, "b": 1, "c": 1}, [(2, 0, 0), (1, 1, 0)], timeout=0.3, trials=1)
    assert time.perf_counter() - start < 10
    assert [r.status for r in report.results] == ["undecided", "undecided"]


def test_mixed_verdicts_make_the_report_false():
    def wedge_symmetric(a, b):
        return a ^ b, b ^ a

    report = prove(wedge_symmetric, {"a": 1, "b": 1}, [(1, 0, 0), (2, 0, 0)], trials=2)
    assert [r.status for r in report.results] == ["proved", "refuted"]
    assert report.holds is False and len(report) == 2


def test_all_signatures():
    assert all_signatures(2) == [(1, 0, 0), (0, 1, 0), (0, 0, 1), (2, 0, 0), (1, 1, 0), (1, 0, 1), (0, 2, 0),
                                 (0, 1, 1), (0, 0, 2)]
    assert len(all_signatures(4)) == 3 + 6 + 10 + 15
    report = prove(lambda a: (a * a, a | a), {"a": 1}, "all", max_n=2, trials=2)
    assert isinstance(report, ProofReport) and len(report) == 9 and report.holds is True


def test_an_algebra_is_a_signature():
    report = prove(lambda a: (~~a, a), {"a": "full"}, galinear.Algebra(2, 0, 1), trials=2)
    assert report.results[0].signature == (2, 0, 1) and report.holds is True


@pytest.mark.parametrize("options,message", [
    ({"timeout": float("nan")}, "timeout"), ({"timeout": float("inf")}, "timeout"), ({"timeout": -1}, "timeout"),
    ({"timeout": 0}, "timeout"), ({"trials": 0}, "trials"), ({"max_n": 9}, "max_n"),
    ({"signatures": [(9, 0, 0)]}, "1 <= n <= 8"), ({"signatures": [(0, 0, 0)]}, "1 <= n <= 8"),
    ({"signatures": [(1, -1, 0)]}, "non-negative"), ({"signatures": "some"}, "signatures"),
    ({"signatures": []}, "empty"), ({"inputs": {"a": 1}}, "each parameter"),
    ({"inputs": {"a": 1, "b": 9}}, "grades \\[9\\] are outside"),
])
def test_bad_arguments_are_refused_before_any_work(options, message):
    arguments = {"inputs": {"a": 1, "b": 1}, "signatures": [(2, 0, 0)], **options}
    with pytest.raises(ValueError, match=message):
        prove(lambda a, b: (a, b), arguments.pop("inputs"), arguments.pop("signatures"), **arguments)


def test_the_function_must_return_a_pair():
    with pytest.raises(ValueError, match="pair"):
        prove(lambda a: a, {"a": 1}, [(2, 0, 0)], trials=1)


def test_galinear_prove_stays_callable_after_the_module_is_imported():
    import galinear.compiler
    import galinear.compiler.prove  # noqa: F401  (sets galinear.compiler.prove to the module)

    for entry in (galinear.prove, galinear.compiler.prove):
        assert entry(lambda a: (a, a), {"a": 1}, [(1, 0, 0)], trials=1).holds is True


def test_the_old_module_path_is_the_identities_module():
    import galinear.compiler.identities
    import galinear.compiler.prove  # noqa: F401

    assert sys.modules["galinear.compiler.prove"] is galinear.compiler.identities
    assert galinear.compiler.prove is galinear.compiler.identities.prove  # the function, not a module


def test_without_fork_the_step_runs_in_a_thread_and_still_stops(monkeypatch):
    import multiprocessing

    module = sys.modules["galinear.compiler.identities"]
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    report = prove(lc_of_wedge, {"a": 1, "b": 1, "c": 1}, [(2, 0, 0)], trials=1)
    assert report.holds is True

    def fails(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(module, "_exact", fails)
    start = time.perf_counter()
    report = prove(lc_of_wedge, {"a": 1, "b": 1, "c": 1}, [(2, 0, 0)], trials=1, timeout=30)
    assert time.perf_counter() - start < 10
    assert report.results[0].status == "undecided" and "RuntimeError: boom" in report.results[0].note
