"""From ``galinear compress`` to the optimiser in at most six frames: an error raised inside the
optimiser's step shows, in its traceback, at most six galinear frames between the command's
``run`` and the optimiser loop (:func:`galinear.optim.loop.train`), for a fit until converged (the
default), a joint fit and a fit on second moments (a fit of fixed steps takes the converged fit's
path with one frame fewer: projection.fit_projection calls the loop itself)."""
import os
import traceback

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.cli import main  # noqa: E402
from galinear.testing.models import random_text  # noqa: E402

MOST_FRAMES = 6


class Stop(Exception):
    pass


def _galinear_frames_between(tb) -> list:
    """The galinear frames strictly between commands/compress.py's run and optim/loop.py's train."""
    frames = [(os.path.relpath(f.filename, os.path.dirname(os.path.dirname(os.path.dirname(__file__)))), f.name)
              for f in traceback.extract_tb(tb)]
    start = frames.index(("galinear/commands/compress.py", "run"))
    end = frames.index(("galinear/optim/loop.py", "train"))
    return [f for f in frames[start + 1:end] if f[0].startswith("galinear/")]


@pytest.mark.parametrize("options", [("--methods", "lr1"), ("--methods", "lr1", "--objective", "attention"),
                                     ("--methods", "rotorlin-m")], ids=["converged", "joint", "moments"])
def test_compress_reaches_the_optimiser_in_at_most_six_frames(tmp_path, monkeypatch, options):
    from galinear.testing.folders import tiny_model_folder

    def stop(self, *args, **kwargs):
        raise Stop("inside the optimiser")

    monkeypatch.setattr(torch.optim.Adam, "step", stop)
    text = tmp_path / "a.txt"
    text.write_text(random_text(2400, 1))
    with pytest.raises(Stop) as raised:
        main(["compress", "--no-progress", "--model", tiny_model_folder(tmp_path / "model"), "--text", str(text),
              "--texts", "", "--layers", "0", *options, "--window", "32", "--stride", "16", "--train-windows", "3",
              "--eval-windows", "2", "--mse-windows", "1", "--wikitext", "off", "--out", str(tmp_path / "out")])
    between = _galinear_frames_between(raised.tb)
    assert len(between) <= MOST_FRAMES, between
