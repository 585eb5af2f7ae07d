"""A compression study sets the process's thread counts for its work and gives the process its own
back: on close(), at the end of a ``with`` block, and at once when the study cannot be made."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from galinear.compress import Study  # noqa: E402
from galinear.optim import threads  # noqa: E402
from galinear.testing.compression import tiny_config  # noqa: E402
from galinear.testing.models import TEXTS  # noqa: E402

SETTINGS = dict(datasets=("a",), layer_sets=((0,),), methods=("lr1-cf",))


def _outside(count):
    torch.set_num_threads(count)
    return threads.snapshot()


def _given_back(before):
    """The process's settings are ``before``'s; a numba pool the study started is at numba's own default."""
    after = threads.snapshot()
    if before["numba"] is None and after["numba"] is not None:
        import numba

        assert after.pop("numba") == numba.config.NUMBA_NUM_THREADS
        before = {k: v for k, v in before.items() if k != "numba"}
    return after == before


def test_close_gives_back_the_counts_the_process_had(tmp_path, tiny):
    before = _outside(2)
    study = Study(tiny_config(tmp_path / "out", threads=1, **SETTINGS), tiny, texts=TEXTS)
    assert torch.get_num_threads() == 1  # the study's own count while it works
    study.close()
    assert _given_back(before) and torch.get_num_threads() == 2


def test_a_with_block_closes_the_study_and_auto_leaves_no_governor_behind(tmp_path, tiny):
    before = _outside(2)
    with Study(tiny_config(tmp_path / "out", threads="auto", **SETTINGS), tiny, texts=TEXTS) as study:
        assert threads.active() is study.governor is not None
        study.run(report=False)
    assert _given_back(before) and threads.active() is None


def test_a_study_that_cannot_be_made_gives_the_counts_back_at_once(tmp_path, tiny):
    before = _outside(2)
    with pytest.raises(ValueError, match="text is empty"):
        Study(tiny_config(tmp_path / "out", threads=1, **SETTINGS), tiny, texts={"a": ""})
    assert _given_back(before) and torch.get_num_threads() == 2
