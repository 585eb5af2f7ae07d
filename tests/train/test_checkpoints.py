"""Training checkpoints are data: a pickle in one runs no code, a damaged one is named with its fix,
and a run resumed from one ends bit for bit where an uninterrupted run does."""
import numpy as np
import pytest
import torch

from galinear import _io
from galinear.testing.models import gaussian_blobs
from galinear.testing.payloads import truncate_file, write_payload
from galinear.train.loop import TrainConfig, train_classifier
from galinear.train.models import MLPConfig


def _mlp():
    return MLPConfig(kind="dense", in_features=8, num_classes=3, hidden=8, depth=2)


def _train(run_dir, epochs=2, log=lambda *_: None):
    config = TrainConfig(epochs=epochs, batch_size=32, lr=1e-2, warmup_steps=2, seed=3)
    data = gaussian_blobs(np.random.default_rng(0), n_train=96, n_test=48, features=8)
    return train_classifier(_mlp(), config, data, run_dir, progress=False, log=log)


@pytest.mark.parametrize("kind", ["torch", "pickle"])
def test_train_checkpoint_payload_does_not_run(tmp_path, kind):
    _train(tmp_path / "run", epochs=1)
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    write_payload(checkpoint, tmp_path / "marker", kind)
    with pytest.raises(ValueError, match=r"checkpoint\.pt.*could run code.*delete .*checkpoint\.pt"):
        _train(tmp_path / "run", epochs=1)
    assert not (tmp_path / "marker").exists()


def test_train_mlp_command_refuses_payload_checkpoint(tmp_path, capsys):
    from galinear.cli import main
    from galinear.data.idx import write_idx

    rng = np.random.default_rng(0)
    for split, n in (("train", 40), ("t10k", 20)):
        write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 255, (n, 28, 28)).astype(np.uint8))
        write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", rng.integers(0, 10, n).astype(np.uint8))
    argv = ["train-mlp", "--data-dir", str(tmp_path), "--model", "dense", "--seeds", "0", "--hidden", "8",
            "--epochs", "1", "--batch-size", "20", "--out", str(tmp_path / "out"), "--no-progress", "--threads", "1"]
    assert main(argv) == 0
    checkpoint = tmp_path / "out" / "fashion-mnist" / "dense-seed0" / "checkpoint.pt"
    write_payload(checkpoint, tmp_path / "marker")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "galinear train-mlp: error:" in err and str(checkpoint) in err and "delete" in err
    assert not (tmp_path / "marker").exists()


def test_truncated_train_checkpoint_names_file_and_fix(tmp_path):
    _train(tmp_path / "run", epochs=1)
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    truncate_file(checkpoint)
    with pytest.raises(ValueError) as info:
        _train(tmp_path / "run", epochs=1)
    message = str(info.value)
    assert str(checkpoint) in message and "truncated" in message and f"delete {checkpoint}" in message


class _Stop(Exception):
    pass


def _train_first_epoch(run_dir, epochs):
    """Train ``epochs`` epochs but stop right after the first one is saved (as a kill would)."""
    def stop_after_first(message):
        if f"epoch 1/{epochs}" in message:
            raise _Stop

    with pytest.raises(_Stop):
        _train(run_dir, epochs=epochs, log=stop_after_first)


def test_train_resume_is_bit_for_bit(tmp_path):
    full = _train(tmp_path / "full", epochs=3)
    _train_first_epoch(tmp_path / "cut", epochs=3)
    resumed = _train(tmp_path / "cut", epochs=3)
    for a, b in zip(full["epochs"], resumed["epochs"]):
        assert (a["train_loss"], a["test_loss"], a["test_accuracy"]) == (b["train_loss"], b["test_loss"], b["test_accuracy"])
    for (name, p), q in zip(full["model"].named_parameters(), resumed["model"].parameters()):
        assert torch.equal(p, q), name


def test_train_resumes_from_plain_tensor_checkpoint_of_older_galinear(tmp_path):
    """A torch.save checkpoint holding only tensors and plain containers is read (restricted loader)."""
    full = _train(tmp_path / "full", epochs=2)
    _train_first_epoch(tmp_path / "old", epochs=2)
    checkpoint = tmp_path / "old" / "checkpoint.pt"
    torch.save(_io.load_state(checkpoint), checkpoint)  # the format galinear wrote before
    resumed = _train(tmp_path / "old", epochs=2)
    for p, q in zip(full["model"].parameters(), resumed["model"].parameters()):
        assert torch.equal(p, q)


def test_a_checkpoint_with_nan_weights_is_named_before_training(tmp_path):
    _train(tmp_path / "run", epochs=1)
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    state = _io.load_state(checkpoint)
    name = next(iter(state["model"]))
    state["model"][name][0] = float("nan")
    _io.save_state(checkpoint, state)
    with pytest.raises(_io.CorruptFileError, match=rf"checkpoint\.pt: holds non-finite values \(NaN or infinity\) in "
                                                   rf"model/{name}; delete .*checkpoint\.pt"):
        _train(tmp_path / "run", epochs=1)
