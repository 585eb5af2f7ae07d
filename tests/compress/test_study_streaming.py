"""A study with its captures kept on disk in shards (``shard_windows``): the in-memory study's numbers
exactly, the training rows never read whole by a projection-wise fit, and resumable."""
import glob
import json
import os
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from galinear.compress import Study
from galinear.compress.fitting import activations
from galinear.lm import models  # noqa: E402
from galinear.compress.fitting.activations import CaptureShards  # noqa: E402
from galinear.compress.study.config import StudyConfig, check  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS, CharTokenizer, tiny_llama  # noqa: E402

# 12 training windows of 32 tokens per text: 768 training rows, three batches of 256 per pass
SIZE = dict(train_windows=12, hidden=16)
FIXED = dict(methods=("lr1", "rotor", "lr1-cf"), layer_sets=((0, 2),), refit_o_proj=True, o_epochs=1.0,
             epochs=2.0, **SIZE)
CONVERGED = dict(methods=("lr1",), layer_sets=((0, 2),), until_converged=True, max_steps=8, eval_every=2,
                 patience=2, **SIZE)
JOINT = dict(methods=("lr1",), layer_sets=((0, 2),), objective="attention", epochs=1.0, **SIZE)


def _numbers(results: dict) -> dict:
    """Every entry of results.json without its timings (the only fields that differ between two runs)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if "seconds" not in k}
        return value

    return strip(results["entries"])


def _loaded():
    from galinear.lm.models import LoadedModel

    return LoadedModel(tiny_llama(), CharTokenizer(), "tiny-llama")


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory):
    """The in-memory study of each setting, run once."""
    out = {}
    for name, settings in (("fixed", FIXED), ("converged", CONVERGED), ("joint", JOINT)):
        folder = tmp_path_factory.mktemp(name)
        out[name] = (_numbers(Study(tiny_config(folder, **settings), _loaded(), texts=TEXTS).run(report=False)),
                     folder)
    return out


def test_fixed_step_study_from_shards_is_exact_and_never_reads_the_training_split_whole(
        in_memory, tmp_path, monkeypatch):
    reference, memory_dir = in_memory["fixed"]
    study = Study(tiny_config(tmp_path, shard_windows=1, **FIXED), _loaded(), texts=TEXTS)
    n_train = study.captures.train_ids().size
    assert n_train == 2 * 12 * 32 and study.captures.test_ids().size < 256
    reads, real_read, real_to_tensor = [], CaptureShards._read, CaptureShards.to_tensor

    def counted_read(self, rows):
        reads.append(len(rows))
        return real_read(self, rows)

    def guarded_to_tensor(self):
        if len(self) >= n_train:
            raise AssertionError(f"{self!r} read whole")
        return real_to_tensor(self)  # the test rows (a tensor wherever they are used)

    monkeypatch.setattr(CaptureShards, "_read", counted_read)
    monkeypatch.setattr(CaptureShards, "to_tensor", guarded_to_tensor)
    assert _numbers(study.run(report=False)) == reference  # every ln PPL, MSE, curve and count, exactly
    monkeypatch.undo()
    # the training rows are a view of the shards on disk, read at most a batch (256 rows) at a time
    train, test = study.captures.original(0)
    assert isinstance(train, CaptureShards) and len(train) == n_train and isinstance(test, torch.Tensor)
    assert reads and max(reads) <= 256 < n_train
    prefixed = study.store.input_key(study.config.method_spec("lr1"), 0, (0,), 2)
    for key in ("original-attn_in-L0", "original-o_in-L2", prefixed):
        folder = study.store.capture_folder(key)
        assert folder.endswith(os.path.join("captures", f"{key}-shards"))
        index = json.load(open(os.path.join(folder, "capture.json")))
        assert index["rows"] == [32] * (len(index["rows"]))  # one window a shard
    captures = os.listdir(os.path.join(study.work, "captures"))
    assert not [c for c in captures if c.endswith(".safetensors") and "_in-L" in c]  # none in one file
    assert sorted(c.replace("-shards", ".safetensors") for c in captures if c.endswith("-shards")) == sorted(
        c for c in os.listdir(glob.glob(os.path.join(memory_dir, "cache", "*", "captures"))[0]) if "_in-L" in c)


@pytest.mark.parametrize("setting", ["converged", "joint"])
def test_converged_and_joint_studies_from_shards_are_exact(in_memory, tmp_path, setting):
    settings = {"converged": CONVERGED, "joint": JOINT}[setting]
    study = Study(tiny_config(tmp_path, shard_windows=2, **settings), _loaded(), texts=TEXTS)
    assert _numbers(study.run(report=False)) == in_memory[setting][0]
    assert isinstance(study.captures.original(0)[0], CaptureShards)  # the joint fit read it whole, held nothing
    whole = study.captures.original(0, whole=True)[0]
    assert isinstance(whole, torch.Tensor) and torch.equal(whole, study.captures.original(0)[0].to_tensor())


def test_a_damaged_or_unfinished_capture_is_redone(in_memory, tmp_path, monkeypatch):
    reference = in_memory["converged"][0]
    config = tiny_config(tmp_path, shard_windows=1, **CONVERGED)
    Study(config, _loaded(), texts=TEXTS).run(report=False)
    study = Study(config, _loaded(), texts=TEXTS)
    folder = study.store.capture_folder("original-attn_in-L0")
    good = CaptureShards(folder).to_tensor()
    # one shard deleted, the fits and the results gone: the rerun captures again and gives the same numbers
    os.remove(os.path.join(folder, "shard-00003.safetensors"))
    fits = glob.glob(os.path.join(study.work, "fits", "*", "s0", "Pnone", "L0_*.safetensors"))
    assert len(fits) == 3  # q, k, v of layer 0
    for path in fits:
        os.remove(path)
    os.remove(os.path.join(tmp_path, "results.json"))
    captures = []
    real = activations.capture_to_shards
    monkeypatch.setattr(activations, "capture_to_shards", lambda *a, **k: captures.append(a[3]) or real(*a, **k))
    assert _numbers(Study(config, _loaded(), texts=TEXTS).run(report=False)) == reference
    assert captures == [folder]  # only the damaged capture was redone
    assert torch.equal(CaptureShards(folder).to_tensor(), good)
    # a capture killed part way: no folder is left under the capture's name, and the rerun makes it whole
    study = Study(config, _loaded(), texts=TEXTS)
    target = study.store.capture_folder("original-attn_in-L2")
    shutil.rmtree(target)
    real_batches = activations._captured_batches

    def killed(*args, **kwargs):
        for n, rows in enumerate(real_batches(*args, **kwargs)):
            if n == 5:
                raise KeyboardInterrupt
            yield rows

    monkeypatch.setattr(activations, "_captured_batches", killed)
    with pytest.raises(KeyboardInterrupt):
        study.captures.original(2)
    monkeypatch.setattr(activations, "_captured_batches", real_batches)
    assert not os.path.exists(target)
    # what a killed process leaves: its temporary folder beside the capture, and (copied by hand) a folder
    # without its index; neither is taken for the capture, and the leftover is removed
    stale = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.99999-0abc1234.tmp")
    os.makedirs(stale)
    os.makedirs(target)
    open(os.path.join(target, "shard-00000.safetensors"), "wb").close()
    train, test = Study(config, _loaded(), texts=TEXTS).captures.original(2)
    assert not os.path.exists(stale)
    rows = activations.capture(study.model, 2, study.captures.train_ids())
    assert isinstance(train, CaptureShards) and torch.equal(train.to_tensor(), rows)
    assert torch.equal(test, activations.capture(study.model, 2, study.captures.test_ids()))


@pytest.mark.parametrize("bad", [0, -2, True, 1.5, "4"])
def test_shard_windows_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="shard_windows must be a positive integer.*or None"):
        check(StudyConfig(shard_windows=bad), loaded=True)


def test_command_line_option():
    import argparse

    from galinear.commands import compress

    parser = argparse.ArgumentParser()
    compress.add_arguments(parser)
    assert compress.config_from_args(parser.parse_args(["--shard-windows", "3"])).shard_windows == 3
    assert compress.config_from_args(parser.parse_args([])).shard_windows is None


# ---------------------------------------------------------------------- two torch.distributed ranks
def _worker(rank, size, rendezvous, out_dir):
    # the ranks meet in a file of the test's own folder, not on a TCP port: a port picked free
    # beforehand can be taken by another test's ranks before rank 0 listens on it
    dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=size)
    try:
        Study(tiny_config(out_dir, shard_windows=1, **FIXED), _loaded(), texts=TEXTS).run(report=False)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # about 40 s; two ranks against one process: test_distributed, shards in one process: above
@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_two_ranks_with_shards_give_the_in_memory_numbers(in_memory, tmp_path):
    """The ranks share the original captures through their shard folders (one rank writes each)."""
    out = tmp_path / "run"
    mp.start_processes(_worker, args=(2, "file://" + str(tmp_path / "rendezvous"), str(out)), nprocs=2,
                       start_method="spawn")
    entries = json.load(open(out / "results.json"))["entries"]
    assert _numbers({"entries": entries}) == in_memory["fixed"][0]
    assert len(glob.glob(os.path.join(out, "cache", "*", "captures", "*-shards"))) >= 3
