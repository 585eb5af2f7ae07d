"""The planner of a compression study (galinear.compress.study.units): one graph of units with what
each reads, run in order by a single process and by stages under torchrun."""
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress.study import distributed, units  # noqa: E402
from galinear.compress.study.units import Capture, Evaluate, EvaluateOriginal, Fit  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS  # noqa: E402

# Adam (fixed steps), a closed-form fit; a single layer, a pair that reuses its fit, a pair that does not
SETTINGS = dict(methods=("lr1", "lr1-cf"), seeds=(0, 1), multi_seeds=(0,), layer_sets=((1,), (1, 2), (0, 2)),
                epochs=0.5)


@pytest.fixture
def study(tiny, tmp_path):
    from galinear.compress import Study

    return Study(tiny_config(tmp_path, **SETTINGS), tiny, texts=TEXTS)


def _fit(study, name, seed, layers):
    spec = study.config.method_spec(name)
    return Fit(spec.tag(), seed, tuple(layers))


def test_the_graph_holds_each_unit_once_with_what_it_reads(study):
    graph = study.graph()
    order = graph.order()
    assert len(order) == len(set(order)) == len(graph.needs)
    lr1, cf = (_fit(study, name, 0, (1,)) for name in ("lr1", "lr1-cf"))
    # a fit by Adam reads its layer's original capture; a closed-form one its second moments
    assert graph.needs[lr1] == (Capture("capture", 1),)
    assert graph.needs[cf] == (Capture("moments", 1),)
    # the pair {1, 2} reuses {1}'s fit of 1: one unit, read by the fit of 2 and by {1}'s evaluation
    # (and layer 1's capture, which reading that fit back from its checkpoints takes)
    pair = _fit(study, "lr1", 0, (1, 2))
    assert graph.needs[pair] == (lr1, Capture("capture", 1), Capture("capture", 2))
    readers = [unit for unit, deps in graph.needs.items() if lr1 in deps]
    assert readers == [Evaluate("lr1", 0, (1,)), pair]
    # an evaluation reads the last fit of its run and the residual stream entering its first layer
    residuals = (Capture("residual", 1, dataset="a"), Capture("residual", 1, dataset="b"))
    assert graph.needs[Evaluate("lr1", 0, (1, 2))] == (pair, Capture("capture", 1), Capture("capture", 2), *residuals)
    assert graph.needs[Evaluate("lr1-cf", 0, (1, 2))] == (_fit(study, "lr1-cf", 0, (1, 2)), *residuals)
    assert graph.needs[Evaluate("lr1", 0, (0, 2))] == (_fit(study, "lr1", 0, (0, 2)), Capture("capture", 0),
                                                        Capture("capture", 2))
    assert graph.needs[_fit(study, "lr1", 0, (0, 2))] == (_fit(study, "lr1", 0, (0,)), Capture("capture", 0),
                                                          Capture("capture", 2))
    assert graph.needs[_fit(study, "lr1-cf", 0, (0, 2))] == (_fit(study, "lr1-cf", 0, (0,)),)
    # the closed-form method runs once per set (its first seed), the seeded one with every seed of the first set
    assert {u for u in order if isinstance(u, Evaluate)} == {
        Evaluate(name, seed, s) for name, seed, s in study.plan()}
    assert len(study.plan()) == 2 + 1 + 2 + 2
    assert {u for u in order if isinstance(u, EvaluateOriginal)} == {EvaluateOriginal("a"), EvaluateOriginal("b")}


def test_the_single_process_order_is_depth_first_and_topological(study):
    graph = study.graph()
    seen = set()
    for unit in graph.order():
        assert all(dep in seen for dep in graph.needs[unit]), unit  # what it reads is done before it
        seen.add(unit)
    (none, original), *runs = graph.runs
    assert none is None and all(isinstance(u, EvaluateOriginal) for u in original)
    assert [run for run, _ in runs] == study.plan()
    for (name, seed, layer_set), group in runs:  # each run ends with its evaluation: the report follows it
        assert group[-1] == Evaluate(name, seed, layer_set)
        assert all(isinstance(u, (Capture, Fit)) for u in group[:-1])
    # a shared capture is made just before the first unit that reads it
    order = graph.order()
    for unit in order:
        if isinstance(unit, Capture):
            first = next(u for u in order if unit in graph.needs[u])
            between = order[order.index(unit) + 1:order.index(first)]
            assert all(isinstance(u, Capture) for u in between), (unit, first)


def test_the_torchrun_stages_are_the_same_units_each_after_what_it_reads(study):
    graph = study.graph()
    stages = graph.stages()
    flat = [unit for _, stage in stages for unit in stage]
    assert sorted(map(repr, flat)) == sorted(map(repr, graph.order())) and len(flat) == len(set(flat))
    level = {unit: k for k, (_, stage) in enumerate(stages) for unit in stage}
    assert all(level[dep] < level[unit] for unit, deps in graph.needs.items() for dep in deps)
    assert stages[0][0] == "shared" and all(isinstance(u, (Capture, EvaluateOriginal)) for u in stages[0][1])
    assert stages[1][0] == "fits at depth 0"
    assert "fits at depth 1" in stages[2][0] and "evaluations" in stages[2][0]  # the single layer's evaluations
    assert stages[-1][0] == "evaluations"
    # two ranks take every unit of a stage between them, none twice
    for _, stage in stages:
        shares = [distributed.share(distributed.Ranks(r, 2), stage) for r in (0, 1)]
        assert sorted(map(repr, shares[0] + shares[1])) == sorted(map(repr, stage))
        assert not set(shares[0]) & set(shares[1])


def test_done_units_are_left_out_on_resume(study):
    spec = study.config.method_spec("lr1")
    study.fit_layer_set(spec, 0, (1,))  # on disk: {1}'s fit of 1, which {1, 2} reuses
    graph = study.graph()
    assert _fit(study, "lr1", 0, (1,)) not in graph.needs
    # read back from its checkpoints
    assert graph.needs[_fit(study, "lr1", 0, (1, 2))] == (Capture("capture", 1), Capture("capture", 2))
    assert graph.needs[Evaluate("lr1", 0, (1,))] == (Capture("capture", 1), Capture("residual", 1, dataset="a"),
                                                     Capture("residual", 1, dataset="b"))
    assert Capture("capture", 1) in graph.needs  # seed 1 still fits layer 1
    study.run(report=False)
    done = study.graph()
    assert done.needs == {} and all(group == () for _, group in done.runs)
    assert len(done.runs) == 1 + len(study.plan())


def test_the_graph_fits_a_set_as_one_call_of_fit_layer_set_does(tiny, tmp_path):
    """A single process's fits, one unit a layer through the graph, are bit for bit the fits of
    fit_layer_set, which carries each layer's results to the next in one call."""
    import torch

    from galinear.compress import Study
    from galinear.compress.storage import checkpoints

    settings = dict(SETTINGS, methods=("lr1",), seeds=(0,), layer_sets=((0, 2),))
    graph_run = Study(tiny_config(tmp_path / "graph", **settings), tiny, texts=TEXTS)
    graph_run.run(report=False)
    one_call = Study(tiny_config(tmp_path / "call", **settings), tiny, texts=TEXTS)
    spec = one_call.config.method_spec("lr1")
    fitted = one_call.fit_layer_set(spec, 0, (0, 2))
    for (layer, proj), result in fitted.results.items():
        prefix = () if layer == 0 else (0,)
        saved = checkpoints.load(graph_run.store.unit_path(spec, 0, prefix, layer, proj))
        for name, value in result.module.state_dict().items():
            assert torch.equal(value, saved["state"][name]), (layer, proj, name)
    assert units.EVALUATION_COST == 1.0
