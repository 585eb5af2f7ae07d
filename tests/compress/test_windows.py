"""Windows and the leak-free split: no held-out token position in any training window."""
import numpy as np
import pytest

from galinear.lm.windows import split_windows, window_starts

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def test_window_starts_cover_with_stride():
    starts = window_starts(1300, 512, 256)
    assert starts.tolist() == [0, 256, 512, 768]
    assert starts[-1] + 512 <= 1300


@given(n_tokens=st.integers(200, 3000), window=st.sampled_from([16, 32, 48]), ratio=st.sampled_from([1, 2, 3]),
       seed=st.integers(0, 10), group=st.integers(1, 5), fraction=st.sampled_from([0.1, 0.2, 0.4]))
def test_heldout_positions_never_in_training(n_tokens, window, ratio, seed, group, fraction):
    stride = window // ratio
    tokens = np.arange(n_tokens)
    try:
        w = split_windows(tokens, window, stride, fraction, seed, group)
    except ValueError as exc:  # too few windows for a split: must say so
        assert "too few" in str(exc) or "no training window" in str(exc)
        return
    assert len(w.train) > 0 and len(w.heldout) > 0
    assert not (w.positions(w.train) & w.positions(w.heldout))
    # strided scoring: every scored label is scored once, and runs are detected correctly
    scored = []
    for i, start in enumerate(w.heldout):
        scored.extend(range(int(start) + w.score_from(i), int(start) + window))
    assert len(scored) == len(set(scored))
    for i in range(1, len(w.heldout)):
        assert w.heldout_first[i] == (w.heldout[i] - w.heldout[i - 1] >= window)
    assert w.heldout_first[0]


def test_split_is_seeded_and_subsampling_keeps_runs():
    tokens = np.arange(40 * 256 + 256)
    a = split_windows(tokens, 512, 256, 0.2, seed=3, group=4, max_train=10, max_heldout=8)
    b = split_windows(tokens, 512, 256, 0.2, seed=3, group=4, max_train=10, max_heldout=8)
    c = split_windows(tokens, 512, 256, 0.2, seed=4, group=4, max_train=10, max_heldout=8)
    assert np.array_equal(a.train, b.train) and np.array_equal(a.heldout, b.heldout)
    assert not (np.array_equal(a.heldout, c.heldout) and np.array_equal(a.train, c.train))
    assert len(a.train) == 10 and len(a.heldout) == 8
    assert a.heldout_first.sum() == 2  # two runs of four consecutive windows
    assert not (a.positions(a.train) & a.positions(a.heldout))


def test_too_short_text_is_refused():
    with pytest.raises(ValueError, match="fewer than one window"):
        split_windows(np.arange(100), 512, 256)
    with pytest.raises(ValueError, match="too few"):
        split_windows(np.arange(700), 512, 256)
