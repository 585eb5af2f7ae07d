"""The compression study spread over two torch.distributed ranks (gloo, CPU) on a tiny random Llama."""
import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.multiprocessing.spawn import ProcessException  # noqa: E402

from galinear.compress.study import distributed  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, tiny_llama  # noqa: E402

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")

# Adam (fixed steps), a rotor network, a closed-form fit; a single layer and a pair (two fit depths)
SETTINGS = dict(methods=("lr1", "lr1-cf", "rotor"), hidden=16, seeds=(0, 1), multi_seeds=(0,),
                layer_sets=((1,), (0, 2)), epochs=2.0)


def _worker(rank, size, rendezvous, out_dir, log_dir, die_after_fits):
    """One rank: run the study, logging every file it moves into place (os.replace)."""
    from galinear.compress import Study
    from galinear.compress.fitting import projection
    from galinear.lm.models import LoadedModel

    torch.set_num_threads(1)  # the same arithmetic in every process
    if size > 1:
        # the ranks meet in a file of this run's own folder, not on a TCP port: a port picked
        # free beforehand can be taken by another test's ranks before rank 0 listens on it
        dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=size)
    written = []
    real_replace, real_fit = os.replace, projection.fit_projection
    fits = {"n": 0}

    def replace(src, dst, *args, **kwargs):
        written.append(os.path.abspath(dst))
        with open(os.path.join(log_dir, f"writes-rank{rank}.json"), "w") as f:
            json.dump(written, f)
        return real_replace(src, dst, *args, **kwargs)

    def dying_fit(*args, **kwargs):
        fits["n"] += 1
        if rank == size - 1 and fits["n"] > die_after_fits:
            os._exit(3)  # killed in the middle of a unit (after q, before k and v)
        return real_fit(*args, **kwargs)

    os.replace = replace
    if die_after_fits is not None:
        projection.fit_projection = dying_fit
    try:
        loaded = LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama")
        Study(tiny_config(out_dir, **SETTINGS), loaded, texts=TEXTS).run()
    finally:
        os.replace = real_replace
        if size > 1:
            dist.destroy_process_group()


def _run(size, out_dir, log_dir, die_after_fits=None):
    os.makedirs(log_dir, exist_ok=True)
    rendezvous = "file://" + os.path.join(os.path.abspath(log_dir), "rendezvous")  # a new folder per run
    mp.start_processes(_worker, args=(size, rendezvous, str(out_dir), str(log_dir), die_after_fits),
                       nprocs=size, start_method="spawn")
    return {r: json.load(open(os.path.join(log_dir, f"writes-rank{r}.json"))) for r in range(size)
            if os.path.exists(os.path.join(log_dir, f"writes-rank{r}.json"))}


def _numbers(out_dir):
    entries = json.load(open(os.path.join(out_dir, "results.json")))["entries"]
    rows = json.load(open(os.path.join(out_dir, "summary.json")))["rows"]
    return ({k: (e["log_ppl"], e.get("test_mse"), e.get("params_per_layer")) for k, e in entries.items()},
            [(r["tag"], r["layers"], r["log_ppl"], r["test_mse"]) for r in rows])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("one")
    _run(1, out, out / "log")
    return out


@pytest.mark.slow  # about 55 s: a one-process study and two torchrun ranks; the process-group plumbing is in
# make test through tests/train/test_lm.py (two gloo ranks) and tests/nn/test_ddp.py; the sharing rules below
def test_two_ranks_give_the_single_process_numbers_and_never_share_a_file(reference, tmp_path):
    writes = _run(2, tmp_path / "run", tmp_path / "log")
    entries, rows = _numbers(tmp_path / "run")
    ref_entries, ref_rows = _numbers(reference)
    assert len(entries) == 2 * (1 + 8) and entries == ref_entries  # original + 8 runs per text; exactly equal
    assert rows == ref_rows
    assert (tmp_path / "run" / "results.md").read_text() == (reference / "results.md").read_text()
    # both ranks worked, and no file was written by both
    assert len(writes) == 2 and all(any("/fits/" in p for p in w) for w in writes.values())
    assert not set(writes[0]) & set(writes[1])
    # the report files are rank 0's alone; each rank kept its evaluations in its own file
    for name in ("results.json", "summary.json", "results.md"):
        assert str(tmp_path / "run" / name) in writes[0]
    own = [json.load(open(tmp_path / "run" / f"results-rank{r}.json"))["entries"] for r in (0, 1)]
    assert own[0] and own[1] and not set(own[0]) & set(own[1]) and {**own[0], **own[1]}.keys() == entries.keys()


@pytest.mark.slow  # about 55 s: two ranks, a kill, a rerun (one rank's resume: test_pipeline, test_security)
def test_a_killed_rank_is_redone_by_the_rerun(reference, tmp_path):
    with pytest.raises(ProcessException):
        _run(2, tmp_path / "run", tmp_path / "log1", die_after_fits=1)
    fits = os.path.join(tmp_path, "run", "cache")
    kept = {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
            for d, _, files in os.walk(fits) for f in files if "/fits/" in d + "/" and f.endswith(".safetensors")}
    assert kept  # some units finished before the kill
    writes = _run(2, tmp_path / "run", tmp_path / "log2")
    entries, rows = _numbers(tmp_path / "run")
    assert entries == _numbers(reference)[0] and rows == _numbers(reference)[1]
    rewritten = set(writes[0]) | set(writes[1])
    assert not rewritten & set(map(os.path.abspath, kept))  # finished units are not fitted again
    assert all(os.stat(p).st_mtime_ns == t for p, t in kept.items())


def test_deal_balances_longest_first():
    assert distributed.deal([1, 20, 1, 1, 20], 2) == [0, 0, 1, 0, 1]
    assert distributed.deal([5, 5, 5], 1) == [0, 0, 0]
    # any cost vector: each rank's load is within the largest cost of the best split
    costs = [20, 1, 1, 1, 20, 20, 1, 3]
    owner = distributed.deal(costs, 3)
    loads = [sum(c for c, r in zip(costs, owner) if r == k) for k in range(3)]
    assert max(loads) - min(loads) <= max(costs)


def test_without_torchrun_nothing_changes(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed.init_from_env() == distributed.Ranks(0, 1) and not dist.is_initialized()


def test_ranks_on_one_machine_share_its_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert distributed.default_threads(distributed.Ranks(0, 8)) == 4  # 8 ranks, 4 per machine
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert distributed.default_threads(distributed.Ranks(1, 2)) == 8
    assert distributed.default_threads(distributed.Ranks()) is None  # one process: the libraries' default
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert distributed.default_threads(distributed.Ranks(3, 4)) == 1


def test_each_rank_takes_its_share_of_a_stage_in_order():
    class Costed:  # anything with a cost
        def __init__(self, name, cost):
            self.name, self.cost = name, cost

    units = [Costed(f"s{i}", cost) for i, cost in enumerate([1, 20, 1, 1])]  # deal([1, 20, 1, 1], 2) == [1, 0, 1, 1]
    assert [u.name for u in distributed.share(distributed.Ranks(1, 2), units)] == ["s0", "s2", "s3"]
    assert [u.name for u in distributed.share(distributed.Ranks(0, 2), units)] == ["s1"]
    assert distributed.share(distributed.Ranks(), units) == units  # one process: every unit
    assert distributed.share(distributed.Ranks(0, 2), []) == []
