"""The claim table: best baseline per text, difference of means and its two-standard-error verdict."""
import math

import pytest

from galinear.compress.report.verdict import claim_markdown, claim_rows


def _row(layers, method, values, params=100):
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"layers": layers, "method": method, "params_per_layer": params,
            "log_ppl": {"a": {"mean": mean, "std": std, "n": n}}}


def test_claim_rows_pick_the_best_fit_and_judge_with_the_spread():
    rows = [
        {"layers": [], "method": "original", "log_ppl": {"a": {"mean": 1.0, "std": 0.0, "n": 1}}},
        _row([3], "rotor", [2.00, 2.02, 2.04]),
        _row([3], "lr4", [2.10, 2.11, 2.12]),
        _row([3], "lr4-cf", [2.05]),     # the best claim baseline: closed form
        _row([3], "bh1", [2.30, 2.31, 2.29]),
        _row([3], "lr1", [2.03, 2.01, 2.02]),
        _row([5], "rotor", [2.0]),
        _row([5], "bh1-cf", [2.1]),
        _row([7], "lr4", [2.0]),         # no rotor row: no comparison
    ]
    out = claim_rows(rows, ["a"])
    assert [e["layers"] for e in out] == [[3], [5]]
    first = out[0]
    assert first["claim"]["method"] == "lr4-cf" and first["claim"]["name"] == "LR4*"
    assert first["claim"]["difference"] == pytest.approx(2.02 - 2.05)
    assert first["claim"]["se"] == pytest.approx(0.02 / math.sqrt(3))
    assert first["claim"]["verdict"] == "better"  # -0.03 + 2 * 0.0115 < 0
    assert first["same_size"]["name"] == "LR1 Adam" and first["same_size"]["verdict"] == "level"
    assert out[1]["claim"]["verdict"] == "better (one seed: sign only)"
    assert "same_size" not in out[1]
    worse = claim_rows([_row([1], "rotor", [2.5, 2.6]), _row([1], "bh1", [2.0, 2.01])], ["a"])
    assert worse[0]["claim"]["verdict"] == "worse"
    table = claim_markdown(rows, ["a"], {"a": "Text A"})
    assert "| 3 | Text A | 2.0200 ± 0.0200 | 2.0500 (LR4*) | -0.0300 ± 0.0231 | better |" in table
    assert claim_markdown([_row([1], "lr1", [2.0])], ["a"]) == ""
