"""The butterfly baseline of galinear compress (galinear.compress.methods.butterfly): its gadget
against butterflies applied chunk by chunk, its parameter count against its record's budget rule,
its gradient against central differences, the command-line rules its record sets, and a tiny study
that fits, keeps and reloads it.

Tolerances: float64 1e-12 relative for the gadget against the chunk-by-chunk reference; gradients
1e-7 (galinear.testing.assert_gradient_matches_fd).
"""
import argparse

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study, load_compressed  # noqa: E402
from galinear.compress.methods import budgets, records  # noqa: E402
from galinear.compress.methods import catalogue as methods  # noqa: E402
from galinear.compress.methods.butterfly import ButterflyLinear, ButterflyNetwork  # noqa: E402
from galinear.lm import models  # noqa: E402
from galinear.nn.butterfly import Butterfly  # noqa: E402
from galinear.testing import assert_close, assert_gradient_matches_fd  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS  # noqa: E402


def chunk_by_chunk(gadget: ButterflyLinear, x: torch.Tensor) -> torch.Tensor:
    """Every pair's Butterfly applied to its input chunk, scaled by alpha, summed into its output
    chunk and averaged over the input chunks and the output chunks covering each coordinate."""
    out = x.new_zeros(x.shape[0], gadget.out_features)
    cover = x.new_zeros(gadget.out_features)
    for p in range(gadget.pairs):
        j, i = divmod(p, gadget.input_chunks)
        butterfly = Butterfly(gadget.chunk_size, dtype=x.dtype)
        with torch.no_grad():
            butterfly.angles.copy_(gadget.angles[p])
        out[:, gadget.output_index[j]] += gadget.alpha[p] * butterfly(x[:, gadget.input_index[i]])
    for j in range(gadget.output_chunks):
        cover[gadget.output_index[j]] += 1
    return out / (gadget.input_chunks * cover)


@pytest.mark.parametrize("shape, chunk", [((12, 8), 4), ((8, 8), None), ((16, 40), 8), ((5, 3), None)])
def test_gadget_equals_butterflies_chunk_by_chunk(shape, chunk):
    torch.manual_seed(0)
    gadget = ButterflyLinear(*shape, chunk_size=chunk, bias=True).double()
    with torch.no_grad():
        gadget.alpha.uniform_(0.5, 1.5)
        gadget.bias.normal_()
    x = torch.randn(6, shape[0], dtype=torch.float64)
    with torch.no_grad():
        assert_close(gadget(x).numpy(), (chunk_by_chunk(gadget, x) + gadget.bias).numpy(), rtol=1e-12)


def test_gradient_of_the_gadget_against_central_differences():
    torch.manual_seed(1)
    gadget = ButterflyLinear(12, 8, chunk_size=4).double()
    x = torch.randn(3, 12, dtype=torch.float64)
    weight = torch.randn(3, 8, dtype=torch.float64)

    def loss(angles):
        return (torch.func.functional_call(gadget, {"angles": angles}, (x,)) * weight).sum()

    assert_gradient_matches_fd(loss, gadget.angles.detach().clone())


@pytest.mark.parametrize("shape", [(48, 24), (32, 96), (576, 192)])
@pytest.mark.parametrize("hidden, chunk", [(16, None), (16, 4), (8, None)])
def test_parameters_follow_the_budget_rule(shape, hidden, chunk):
    torch.manual_seed(0)
    module = methods.build_module(methods.MethodSpec("butterfly", hidden=hidden, chunk=chunk), *shape)
    assert isinstance(module, ButterflyNetwork) and module.hidden == hidden
    assert methods.count_parameters(module) == budgets.parameters("butterfly", chunk, *shape, hidden=hidden)
    assert module(torch.randn(2, shape[0])).shape == (2, shape[1])
    with_bias = methods.build_module(methods.MethodSpec("butterfly", hidden=hidden, chunk=chunk), *shape, bias=True)
    assert methods.count_parameters(with_bias) == budgets.parameters("butterfly", chunk, *shape, bias=True,
                                                                     hidden=hidden)


def test_budget_sets_the_chunk_and_the_tag():
    spec = methods.MethodSpec("butterfly", hidden=16, budget=0.5)
    assert spec.tag() == "butterfly-p0.5-h16-e1-lr0.05"
    assert methods.MethodSpec("butterfly").tag() == "butterfly-h512-e1-lr0.05"
    setting = budgets.closest_setting("butterfly", round(0.5 * 32 * 16), 32, 16, hidden=16)
    module = methods.build_module(spec, 32, 16)
    assert methods.count_parameters(module) == setting.parameters
    assert {g.chunk_size for g in module.modules() if isinstance(g, ButterflyLinear)} == {setting.value}


def test_the_record_sets_the_command_line_rules():
    from galinear.commands import compress

    def problem(*argv):
        parser = argparse.ArgumentParser()
        compress.add_arguments(parser)
        return compress.unused_option_problem(parser.parse_args(list(argv)))

    assert problem("--methods", "butterfly", "--hidden", "8", "--chunk", "4") is None
    assert "--rank has no effect" in problem("--methods", "butterfly", "--rank", "2")
    assert "butterfly" in records.methods_help() and "butterfly" in records.owners("--chunk")
    assert records.method("butterfly").adam_fitted and records.colour("butterfly") != records.colour("givens")


def test_a_tiny_study_fits_keeps_and_reloads_butterfly(tmp_path, tiny):
    config = tiny_config(tmp_path / "run", methods=("butterfly",), hidden=8, layer_sets=((1,),), epochs=1.0,
                         datasets=("a",))
    results = Study(config, tiny, texts=TEXTS).run(report=False)["entries"]
    rows = [r for r in results.values() if r["method"] == "butterfly"]
    assert rows and all(r["fit"].startswith("Adam") for r in rows)
    assert rows[0]["params_per_layer"] == sum(budgets.parameters("butterfly", None, d_in, d_out, hidden=8)
                                              for d_in, d_out in ((32, 32), (32, 16), (32, 16)))
    folder = next((tmp_path / "run" / "models").glob("butterfly-*"))
    from galinear.testing.models import tiny_llama

    fresh = tiny_llama()
    replaced = load_compressed(fresh, str(folder))
    assert all(isinstance(m, ButterflyNetwork) for m in replaced.values())
    assert isinstance(models.projection(fresh, 1, "q_proj"), ButterflyNetwork)
