"""The MLP trainer on synthetic data: the loss falls, checkpoints resume exactly, the CLI parses."""
import json

import numpy as np
import pytest
import torch

from galinear.cli import build_parser
from galinear.testing.models import gaussian_blobs
from galinear.train.loop import TrainConfig, load_history, train_classifier
from galinear.train.models import MLPConfig, build_mlp, count_parameters
from galinear.train.report import collect_runs, markdown_table, summarise, write_report


def _tiny(kind="dense", **kw):
    return MLPConfig(kind=kind, in_features=16, num_classes=3, hidden=8, depth=2, **kw)


def test_training_reduces_loss(rng, tmp_path):
    data = gaussian_blobs(rng)
    history = train_classifier(_tiny(), TrainConfig(epochs=6, batch_size=32, lr=1e-2, warmup_steps=0),
                               data, tmp_path / "run", progress=False, log=lambda *_: None)
    losses = [e["train_loss"] for e in history["epochs"]]
    assert losses[-1] < 0.6 * losses[0]
    assert history["epochs"][-1]["test_accuracy"] > 0.6  # chance is 1/3
    saved = load_history(tmp_path / "run")
    assert [e["train_loss"] for e in saved["epochs"]] == losses
    assert saved["parameters"] == count_parameters(history["model"])


def test_resume_matches_uninterrupted_run(rng, tmp_path):
    data = gaussian_blobs(rng)
    train = TrainConfig(epochs=3, batch_size=32, lr=1e-2, warmup_steps=2, seed=5)
    full = train_classifier(_tiny(), train, data, tmp_path / "full", progress=False, log=lambda *_: None)
    # same run, killed right after epoch 2 was saved, then resumed in a fresh call
    class Killed(Exception):
        pass

    def kill_after_second(message):
        if "epoch 2/3" in message:
            raise Killed

    with pytest.raises(Killed):
        train_classifier(_tiny(), train, data, tmp_path / "cut", progress=False, log=kill_after_second)
    assert len(load_history(tmp_path / "cut")["epochs"]) == 2
    resumed = train_classifier(_tiny(), train, data, tmp_path / "cut", progress=False, log=lambda *_: None)
    assert len(resumed["epochs"]) == 3
    for a, b in zip(full["epochs"], resumed["epochs"]):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-6, abs=1e-7)
        assert a["test_accuracy"] == b["test_accuracy"]


def test_resume_refuses_other_configuration(rng, tmp_path):
    data = gaussian_blobs(rng)
    train_classifier(_tiny(), TrainConfig(epochs=1, batch_size=64), data, tmp_path / "run",
                     progress=False, log=lambda *_: None)
    with pytest.raises(ValueError, match="another configuration"):
        train_classifier(_tiny(activation="tanh"),
                         TrainConfig(epochs=1, batch_size=64), data, tmp_path / "run",
                         progress=False, log=lambda *_: None)


def test_resume_accepts_config_written_before_a_field_existed(rng, tmp_path):
    import json

    data = gaussian_blobs(rng)
    run = dict(data=data, run_dir=tmp_path / "run", progress=False, log=lambda *_: None)
    train_classifier(_tiny(), TrainConfig(epochs=1, batch_size=64), **run)
    path = tmp_path / "run" / "config.json"
    saved = json.loads(path.read_text())
    del saved["model"]["dropout"]  # as written before MLPConfig had the field
    path.write_text(json.dumps(saved))
    history = train_classifier(_tiny(), TrainConfig(epochs=1, batch_size=64), **run)
    assert len(history["epochs"]) == 1  # resumed: nothing left to train
    with pytest.raises(ValueError, match="another configuration"):
        train_classifier(_tiny(dropout=0.5), TrainConfig(epochs=1, batch_size=64), **run)


def test_missing_rotor_init_std_means_the_older_layer_default(rng, tmp_path):
    # before MLPConfig had rotor_init_std, rotor layers kept RotorLinear's initialisation (None);
    # a saved configuration without the field is that run, not one of today's default 1.0
    data = gaussian_blobs(rng)
    run = dict(data=data, run_dir=tmp_path / "run", progress=False, log=lambda *_: None)
    train_classifier(_tiny(rotor_init_std=None), TrainConfig(epochs=1, batch_size=64), **run)
    path = tmp_path / "run" / "config.json"
    saved = json.loads(path.read_text())
    del saved["model"]["rotor_init_std"]
    path.write_text(json.dumps(saved))
    assert len(train_classifier(_tiny(rotor_init_std=None), TrainConfig(epochs=1, batch_size=64), **run)["epochs"]) == 1
    assert MLPConfig().rotor_init_std == 1.0
    with pytest.raises(ValueError, match="another configuration"):
        train_classifier(_tiny(), TrainConfig(epochs=1, batch_size=64), **run)


def test_dense_parameter_count_by_formula():
    model = build_mlp(kind="dense", in_features=784, hidden=1024, depth=2, num_classes=10)
    assert count_parameters(model) == (784 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 10 + 10)
    shared = build_mlp(kind="dense", in_features=784, hidden=64, depth=3, activation="prelu")
    assert count_parameters(shared) == 784 * 64 + 64 + 2 * (64 * 64 + 64) + 650 + 1  # one PReLU slope


def test_bad_configuration_and_input():
    with pytest.raises(ValueError, match="unknown model kind"):
        build_mlp(kind="conv")
    with pytest.raises(ValueError, match="hidden must be a positive integer"):
        build_mlp(hidden=0)
    with pytest.raises(ValueError, match="lr must be"):
        TrainConfig(lr=-1.0).validate()
    with pytest.raises(ValueError, match="expects 16"):
        build_mlp(_tiny())(torch.zeros(2, 15))


def test_report_table_and_plot(rng, tmp_path):
    data = gaussian_blobs(rng)
    for seed in (0, 1):
        train_classifier(_tiny(), TrainConfig(epochs=2, batch_size=64, seed=seed), data,
                         tmp_path / f"dense-seed{seed}", progress=False, log=lambda *_: None)
    rows = write_report(tmp_path, "synthetic")
    assert len(rows) == 1 and rows[0]["seeds"] == [0, 1]
    finals = [load_history(tmp_path / f"dense-seed{s}")["epochs"][-1]["test_accuracy"] for s in (0, 1)]
    assert rows[0]["final_accuracy_mean"] == pytest.approx(np.mean(finals))
    assert rows[0]["final_accuracy_std"] == pytest.approx(np.std(finals, ddof=1))
    assert "| dense | 8 x 2 |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "accuracy.png").stat().st_size > 1000
    assert markdown_table(summarise(collect_runs(tmp_path))) == (tmp_path / "results.md").read_text()


def test_cli_parses():
    args = build_parser().parse_args([
        "train-mlp", "--data", "fashion-mnist", "--model", "rotor", "dense", "lowrank",
        "--seeds", "0", "1", "2", "--hidden", "512", "--epochs", "3", "--no-layer-norm",
    ])
    assert args.model == ["rotor", "dense", "lowrank"] and args.seeds == [0, 1, 2]
    assert args.hidden == 512 and args.epochs == 3 and args.layer_norm is False
    assert callable(args._run)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train-mlp", "--model", "conv"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train-mlp", "--hidden", "0"])


def test_cli_runs_end_to_end_on_small_idx_files(rng, tmp_path, capsys):
    from galinear.cli import main
    from galinear.data.idx import write_idx

    for split, n in (("train", 120), ("t10k", 60)):
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        images = rng.integers(0, 60, size=(n, 28, 28)).astype(np.uint8)
        images[np.arange(n), labels, :] = 255  # class c lights row c: learnable
        write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", images)
        write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", labels)
    code = main(["train-mlp", "--data-dir", str(tmp_path), "--model", "dense", "--seeds", "0",
                 "--hidden", "16", "--epochs", "2", "--batch-size", "32", "--out", str(tmp_path / "out"),
                 "--no-progress", "--threads", "1"])
    assert code == 0
    history = load_history(tmp_path / "out" / "fashion-mnist" / "dense-seed0")
    assert len(history["epochs"]) == 2
    assert "final test acc." in capsys.readouterr().out


def test_report_only_without_runs_says_so(tmp_path, capsys):
    from galinear.cli import main

    assert main(["train-mlp", "--report-only", "--out", str(tmp_path)]) == 1
    assert "no finished runs" in capsys.readouterr().out


def test_rotor_and_lowrank_parameter_counts_by_formula():
    # 16 -> 8: chunk 8 (n = 3, C(3,2) = 3), 2 input chunks x 1 output chunk = 2 pairs, double rotors
    rotor = build_mlp(_tiny("rotor"))
    first = 2 * 3 * 2 + 2 + 8          # bivectors + alpha + bias
    second = 1 * 3 * 2 + 1 + 8         # 8 -> 8: one pair
    head = 8 * 3 + 3
    assert count_parameters(rotor) == first + second + head
    lowrank = build_mlp(_tiny("lowrank", rank=2))
    assert count_parameters(lowrank) == (2 * (16 + 8) + 8) + (2 * (8 + 8) + 8) + head


def test_default_rotor_mlp_parameter_count_and_chunk_cap():
    # the train-mlp default: 784 -> 1024 -> 1024, chunk 128 (n = 7, C(7,2) = 21)
    args = build_parser().parse_args(["train-mlp"])
    assert (args.hidden, args.depth, args.chunk_size) == (1024, 2, 128)
    model = build_mlp(kind="rotor", hidden=args.hidden, depth=args.depth, chunk_size=args.chunk_size)
    first = 7 * 8 * (2 * 21 + 1) + 1024    # ceil(784/128) x 1024/128 pairs, alpha, bias
    second = 8 * 8 * (2 * 21 + 1) + 1024
    assert count_parameters(model) == first + second + (1024 * 10 + 10)  # 17,458
    dense = build_mlp(kind="dense", hidden=args.hidden, depth=args.depth)
    assert count_parameters(dense) // count_parameters(model) >= 100
    # a chunk larger than a layer is capped per layer at the largest power of two <= both widths
    capped = build_mlp(_tiny("rotor", chunk_size=1024))
    assert [m.chunk_size for m in capped.body if hasattr(m, "chunk_size")] == [8, 8]
    with pytest.raises(ValueError, match="chunk_size must be a power of two"):
        build_mlp(_tiny("rotor", chunk_size=96))


def test_dropout_only_in_training_mode(rng):
    model = build_mlp(_tiny("dense", dropout=0.5))
    x = torch.from_numpy(rng.standard_normal((64, 16)).astype(np.float32))
    model.eval()
    assert torch.equal(model(x), model(x))
    model.train()
    assert not torch.equal(model(x), model(x))
    assert count_parameters(model) == count_parameters(build_mlp(_tiny("dense")))
    with pytest.raises(ValueError, match="dropout must be a probability"):
        build_mlp(_tiny("dense", dropout=1.0))


@pytest.mark.parametrize("kind", ["rotor", "lowrank"])
def test_structured_models_learn(rng, kind):
    data = gaussian_blobs(rng)
    config = _tiny(kind, rank=2, backend="dense", rotor_init_std=0.5 if kind == "rotor" else None)
    history = train_classifier(config, TrainConfig(epochs=6, batch_size=32, lr=1e-2, warmup_steps=0),
                               data, None, progress=False, log=lambda *_: None)
    losses = [e["train_loss"] for e in history["epochs"]]
    assert losses[-1] < 0.7 * losses[0]
    assert history["epochs"][-1]["test_accuracy"] > 0.6


def test_rotor_init_std_sets_bivector_spread():
    model = build_mlp(kind="rotor", in_features=784, hidden=256, depth=1, rotor_init_std=2.0)
    layer = model.body[0]
    values = torch.cat([layer.left_bivectors.flatten(), layer.right_bivectors.flatten()])
    assert 1.6 < values.std().item() < 2.4  # 3 x 2 x 28 = 168 draws of N(0, 4)


def test_timing_rows_side_by_side(benchmark_script):
    compare_backends = benchmark_script("bench_mlp_step").compare_backends

    rows = compare_backends(hidden=8, depth=1, batch_size=4, steps=1, backends=["dense", "factored"])
    assert [r["backend"] for r in rows] == ["-", "dense", "factored"]
    assert rows[0]["model"] == "dense" and all(r["model"].startswith("rotor") for r in rows[1:])
    assert rows[1]["parameters"] == rows[2]["parameters"]  # the backend changes speed, not the model
    assert rows[1]["parameters"] < rows[0]["parameters"]  # the rotor MLP is the smaller model
    for row in rows:
        assert row["cpu_seconds"] > 0  # a forward, backward and Adam step was timed
        assert row["ratio_to_dense"] == pytest.approx(row["cpu_seconds"] / rows[0]["cpu_seconds"])


def test_step_seconds_grows_with_the_work(benchmark_script):
    import torch

    step_seconds = benchmark_script("bench_mlp_step").step_seconds
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # process CPU time: idle pool threads spinning on a busy machine would count
    try:
        small = step_seconds(MLPConfig(hidden=8, depth=1), batch_size=4, steps=3)
        large = step_seconds(MLPConfig(hidden=1024, depth=2), batch_size=256, steps=3)
    finally:
        torch.set_num_threads(threads)
    assert large > 2 * small  # ~3,000x the arithmetic: a timer that misses the step fails here


# ------------------------------------------------------------- every check before the work (one line each)
def _idx_folder(rng, folder, n_train=120, n_test=60, bright=255):
    from galinear.data.idx import write_idx

    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        images = rng.integers(0, 60, size=(n, 28, 28)).astype(np.uint8)
        images[np.arange(n), labels, :] = bright
        write_idx(folder / f"{split}-images-idx3-ubyte.gz", images)
        write_idx(folder / f"{split}-labels-idx1-ubyte.gz", labels)
    return folder


def _mlp_cli(capsys, *argv):
    from galinear.cli import main

    code = main(["train-mlp", "--no-progress", *argv])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    return code, lines, captured


def _assert_one_line(code, lines, *fragments):
    assert code == 2 and len(lines) == 1 and lines[0].startswith("galinear train-mlp: error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_a_missing_data_folder_and_a_truncated_idx_file_are_one_line(rng, tmp_path, capsys):
    missing = tmp_path / "nowhere"
    code, lines, _ = _mlp_cli(capsys, "--data-dir", str(missing), "--model", "dense", "--seeds", "0",
                              "--hidden", "16", "--out", str(tmp_path / "out"))
    _assert_one_line(code, lines, "pip install")
    data = _idx_folder(rng, tmp_path / "data")
    import gzip

    raw = gzip.decompress((data / "train-images-idx3-ubyte.gz").read_bytes())
    (data / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(raw[: len(raw) // 2]))
    code, lines, captured = _mlp_cli(capsys, "--data-dir", str(data), "--model", "dense", "--seeds", "0",
                                     "--hidden", "16", "--out", str(tmp_path / "out"))
    _assert_one_line(code, lines, "train-images-idx3-ubyte")
    assert "Traceback" not in captured.err


def test_a_run_never_resumes_on_other_data(rng, tmp_path, capsys):
    data = _idx_folder(rng, tmp_path / "data")
    common = ["--data-dir", str(data), "--model", "dense", "--seeds", "0", "--hidden", "16", "--batch-size", "32",
              "--out", str(tmp_path / "out"), "--threads", "1"]
    assert _mlp_cli(capsys, *common, "--epochs", "1")[0] == 0  # the same command resumes (after its last epoch)
    run = tmp_path / "out" / "fashion-mnist" / "dense-seed0"
    assert len(json.loads((run / "config.json").read_text())["data"]["data_sha256"]) == 64
    _idx_folder(np.random.default_rng(99), data, bright=200)  # other images in the same files
    before = (run / "checkpoint.pt").read_bytes()
    code, lines, _ = _mlp_cli(capsys, *common, "--epochs", "1")
    _assert_one_line(code, lines, "was trained on another data", "SHA-256")
    assert (run / "checkpoint.pt").read_bytes() == before


@pytest.mark.parametrize("argv, fragments", [
    (["--model", "dense", "rotor", "--rank", "8"], ["--rank has no effect", "--model dense rotor has none"]),
    (["--model", "dense", "--chunk-size", "16"], ["--chunk-size has no effect", "--head dense"]),
    (["--model", "lowrank", "--backend", "factored"], ["--backend has no effect"]),
    (["--model", "dense", "--rotor-gradient", "power-step"], ["--rotor-gradient has no effect"]),
    (["--model", "dense", "--head", "rotor", "--rotor-init-std", "0.5"], ["--rotor-init-std has no effect"]),
    (["--report-only", "--data-dir", "x", "--limit-train", "5"], ["--data-dir, --limit-train have no effect with "
                                                                   "--report-only"]),
    (["--model", "dense", "dense"], ["--model lists dense twice"]),
    (["--model", "rotor", "--chunk-size", "2"], ["rotor chunk of 2 coordinates", "--chunk-size 4 or more"]),
    (["--model", "lowrank", "--rank", "64", "--hidden", "64"], ["--rank 64 at hidden width 64"]),
    (["--model", "dense", "--threads", "100000"], ["--threads 100,000 is more than the"]),
    (["--model", "rotor", "--hidden", "64", "--chunk-size", "1024"], ["--chunk-size has no effect",
                                                                       "64 at most here", "give at most 64"]),
    (["--model", "dense", "--weight-decay", "1e9", "--lr", "1e-3"], ["--weight-decay 1e+09 with --lr 0.001",
                                                                     "below 1 / lr = 1000"]),
])
def test_options_without_effect_and_meaningless_sizes_are_refused(tmp_path, capsys, no_loading, argv, fragments):
    code, lines, _ = _mlp_cli(capsys, *argv, "--out", str(tmp_path / "out"))
    _assert_one_line(code, lines, *fragments)


def test_a_damaged_optimiser_state_is_named_before_an_epoch_trains(rng, tmp_path):
    from galinear import _io

    data = gaussian_blobs(rng)
    train_classifier(_tiny(), TrainConfig(epochs=1, batch_size=64, seed=0), data, tmp_path, progress=False, log=print)
    state = _io.load_state(tmp_path / "checkpoint.pt")
    next(iter(state["optimizer"]["state"].values()))["exp_avg"] = torch.zeros(2, 2)
    _io.save_state(tmp_path / "checkpoint.pt", state)
    with pytest.raises(_io.CorruptFileError, match=r"optimiser exp_avg of shape \(2, 2\)"):
        train_classifier(_tiny(), TrainConfig(epochs=1, batch_size=64, seed=0), data, tmp_path, progress=False)


def test_the_history_records_the_chunk_sizes_that_ran(rng):
    history = train_classifier(_tiny("rotor", chunk_size=1024), TrainConfig(epochs=1, batch_size=64), gaussian_blobs(rng),
                               None, progress=False, log=lambda *_: None)
    assert history["config"]["model"]["chunk_size"] == 1024 and history["rotor_chunk_sizes"] == [8, 8]


def test_seeds_beyond_what_torch_takes_are_refused_by_the_parser(tmp_path, capsys, no_loading):
    from galinear.cli import main

    with pytest.raises(SystemExit):
        main(["train-mlp", "--seeds", str(2**70), "--out", str(tmp_path)])
    assert f"expected a seed, an integer in 0..2**64 - 1, got {2**70}" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"seed must be an integer in 0..2\*\*64 - 1"):
        TrainConfig(seed=2**64).validate()


def test_a_diverging_loss_stops_the_run_before_it_overflows(rng):
    data = gaussian_blobs(rng)
    with pytest.raises(FloatingPointError, match=r"the run diverged; lower --lr \(now 1e\+09\) or give --warmup-steps"):
        train_classifier(_tiny(), TrainConfig(epochs=2, batch_size=32, lr=1e9, warmup_steps=0), data, None,
                         progress=False, log=lambda *_: None)


def test_training_and_test_images_of_other_sizes_name_the_folders(rng, tmp_path):
    from galinear.data.idx import IdxFormatError, write_idx
    from galinear.train.data import image_tensors

    for split, shape, folder in (("train", (6, 5, 7), "a"), ("t10k", (4, 28, 28), "a")):
        (tmp_path / folder).mkdir(exist_ok=True)
        write_idx(tmp_path / folder / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 255, shape).astype(np.uint8))
        write_idx(tmp_path / folder / f"{split}-labels-idx1-ubyte.gz", rng.integers(0, 10, shape[0]).astype(np.uint8))
    with pytest.raises(IdxFormatError, match=r"training images of .*a are 5 x 7 pixels but the test images of .*a are "
                                             r"28 x 28: the train-images and t10k-images files do not belong together"):
        image_tensors("fashion-mnist", tmp_path / "a")
