"""The converged-study preset: what the issue asks of it, and accepted by the checks a run makes first."""
import argparse

import pytest

pytest.importorskip("torch")

from galinear.commands import compress  # noqa: E402
from galinear.compress.study import config as study_config  # noqa: E402
from galinear.lm import models  # noqa: E402

SMOLLM2_LAYERS = 30


def _config(*argv):
    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    return compress.config_from_args(parser.parse_args(["--preset", "converged", *argv]))


def test_converged_preset_covers_the_study():
    c = _config()
    singles = sorted(s[0] for s in c.layer_sets if len(s) == 1)
    assert len(singles) >= 6 and singles[0] <= 3 and singles[-1] >= SMOLLM2_LAYERS - 3  # over the whole depth
    assert {8, 16, 24} <= set(singles)  # the small-budget study's layers, for comparison
    assert max(b - a for a, b in zip(singles, singles[1:])) <= 6
    assert {len(s) for s in c.layer_sets} == {1, 2, 3}  # pairs and triples
    assert all(len(c.seeds_for(s)) >= 3 for s in c.layer_sets if len(s) == 1)
    assert all(c.seeds_for(s) for s in c.layer_sets)
    assert c.datasets == ("wikipedia", "shakespeare", "kjv")
    assert c.until_converged and c.max_steps >= 600 and c.eval_every >= 1 and c.patience >= 1
    assert set(c.methods) == {"rotor", "lr1", "lr4", "bh1", "lr1-cf", "lr4-cf", "bh1-cf"}
    for name in c.methods:  # Adam methods stop on the validation plateau, closed forms are exact
        spec = c.method_spec(name)
        assert (spec.max_steps == c.max_steps) != spec.closed_form
    assert not c.refit_o_proj and _config("--refit-o-proj").refit_o_proj
    assert c.out_dir.endswith("compress-converged")


@pytest.mark.parametrize("argv", [(), ("--refit-o-proj",)])
def test_converged_preset_passes_the_checks(argv):
    """The checks Study runs before loading anything (texts given, so no corpus package is needed)."""
    c = _config(*argv)
    study_config.check(c, loaded=object(), texts={name: "" for name in c.datasets})
    models.check_layer_range(c.layer_sets, SMOLLM2_LAYERS)
    with pytest.raises(ValueError):  # the same checks refuse a layer SmolLM2 does not have
        models.check_layer_range(_config("--layers", "30").layer_sets, SMOLLM2_LAYERS)
