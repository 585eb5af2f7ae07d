"""galinear.optim.threads: the thread count of a training loop chosen from its step times.

The governor is driven with stated step times (a model of the machine: seconds per step for each
thread count), so what it chooses is checked exactly, without timing anything.
"""
from __future__ import annotations

import argparse

import pytest
import torch

from galinear.commands._config_options import thread_count
from galinear.optim import loop as optimise
from galinear.optim import threads as policy


class Machine:
    """Step times by thread count, changeable mid-run; records every count the governor sets."""

    def __init__(self, seconds: dict):
        self.seconds = dict(seconds)
        self.applied = []

    def apply(self, count):
        self.applied.append(count)

    def run(self, governor, steps):
        counts = []
        for _ in range(steps):
            count = governor.before_step()
            counts.append(count)
            governor.after_step(self.seconds[count])
        return counts


@pytest.mark.parametrize("most,expected", [(1, (1,)), (2, (1, 2)), (3, (1, 2, 3)), (6, (1, 2, 4, 6)),
                                           (8, (1, 2, 4, 8)), (16, (1, 2, 4, 8, 16))])
def test_candidates_are_the_powers_of_two_below_the_most_and_the_most(most, expected):
    assert policy.candidate_counts(most) == expected


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_counts_are_refused(bad):
    with pytest.raises(ValueError, match="positive integer"):
        policy.candidate_counts(bad)


@pytest.mark.parametrize("kwargs,match", [({"probe_steps": 0}, "probe_steps"), ({"every_seconds": 0}, "every_seconds"),
                                          ({"every_seconds": float("inf")}, "every_seconds"),
                                          ({"slowdown": 1.0}, "slowdown")])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        policy.ThreadGovernor(2, **kwargs)


def test_a_busy_machine_gets_one_thread_and_an_idle_one_two():
    busy = Machine({1: 1.0, 2: 2.1})  # two threads wait for the core another process holds
    governor = policy.ThreadGovernor(2, apply=busy.apply)
    counts = busy.run(governor, 12)
    # warm-up at the most, a probe interleaved 2, 1, 2, 1, then the faster count
    assert counts[:5] == [2, 2, 1, 2, 1]
    assert counts[5:] == [1] * 7
    assert governor.decisions == [{"step": 5, "count": 1, "medians": {1: 1.0, 2: 2.1}}]
    idle = Machine({1: 1.0, 2: 0.6})
    governor = policy.ThreadGovernor(2, apply=idle.apply)
    assert idle.run(governor, 12)[5:] == [2] * 7
    assert idle.applied == [2, 1, 2, 1, 2]  # set only when it changes (12 steps, 5 changes)


def test_a_tie_keeps_the_larger_count():
    machine = Machine({1: 1.0, 2: 1.0})
    governor = policy.ThreadGovernor(2, apply=machine.apply)
    assert machine.run(governor, 8)[-1] == 2


def test_the_counts_are_probed_again_after_every_seconds_of_steps():
    machine = Machine({1: 1.0, 2: 0.5})
    governor = policy.ThreadGovernor(2, every_seconds=3.0, apply=machine.apply)
    counts = machine.run(governor, 5 + 6)   # 6 steps of 0.5 s at 2 threads: 3 s
    assert counts[5:] == [2] * 6
    machine.seconds = {1: 1.0, 2: 2.5}      # a busy process starts; the next probe sees it
    counts = machine.run(governor, 6)
    assert counts[:4] == [2, 1, 2, 1] and counts[4:] == [1, 1]
    assert [d["count"] for d in governor.decisions] == [2, 1]


def test_each_confirming_probe_doubles_the_wait_up_to_the_longest():
    machine = Machine({1: 1.0, 2: 0.5})
    governor = policy.ThreadGovernor(2, every_seconds=2.0, longest_seconds=6.0, apply=machine.apply)
    machine.run(governor, 5)                      # warm-up and the first probe: 2 chosen
    waits = []
    for _ in range(4):                            # steps of 0.5 s at 2 threads until the next probe
        steps = 0
        while not governor._queue:
            assert governor.before_step() == 2
            governor.after_step(0.5)
            steps += 1
        waits.append(steps * 0.5)
        machine.run(governor, 4)                  # the probe confirms 2
    assert waits == [2.0, 4.0, 6.0, 6.0]
    machine.seconds = {1: 1.0, 2: 2.5}            # a change of choice resets the wait
    steps = 0
    while not governor._queue:
        governor.before_step()
        governor.after_step(0.5 if steps < 11 else 2.5)
        steps += 1
    machine.run(governor, 4)
    assert governor.chosen == 1 and governor._wait == 2.0


def test_three_slow_steps_in_a_row_start_a_probe_at_once():
    machine = Machine({1: 1.0, 2: 0.5})
    governor = policy.ThreadGovernor(2, every_seconds=1e6, apply=machine.apply)
    machine.run(governor, 6)
    machine.seconds = {1: 1.0, 2: 1.6}  # > 1.5 x the chosen median of 0.5 s
    counts = machine.run(governor, 3 + 4 + 2)
    assert counts[:3] == [2, 2, 2]          # three slow steps
    assert counts[3:7] == [2, 1, 2, 1]      # the probe
    assert counts[7:] == [1, 1]
    # two slow steps and a normal one do not
    machine = Machine({1: 1.0, 2: 0.5})
    governor = policy.ThreadGovernor(2, every_seconds=1e6, apply=machine.apply)
    machine.run(governor, 6)
    for seconds in (1.6, 1.6, 0.5, 1.6, 1.6, 0.5):
        assert governor.before_step() == 2
        governor.after_step(seconds)
    assert len(governor.decisions) == 1


def test_a_new_loop_skips_its_first_step_and_keeps_the_count_chosen():
    machine = Machine({1: 1.0, 2: 0.5})
    governor = policy.ThreadGovernor(2, every_seconds=1000.0, apply=machine.apply)
    machine.run(governor, 3)      # warm-up and half a probe
    governor.start_loop()         # e.g. the next layer's fit: steps of another cost
    machine.seconds = {1: 50.0, 2: 100.0}
    counts = machine.run(governor, 6)
    assert counts == [2, 2, 1, 2, 1, 1]  # no decision yet: the probe starts over, after the warm-up
    assert governor.decisions[-1]["medians"] == {1: 50.0, 2: 100.0}  # no sample of the earlier loop
    governor.start_loop()         # after a decision: the loop goes on at the count chosen
    machine.seconds = {1: 5.0, 2: 10.0}
    assert machine.run(governor, 4) == [1, 1, 1, 1] and len(governor.decisions) == 1
    assert governor._median == 5.0  # this loop's reference: the median of its 3 steps after the warm-up
    machine.seconds = {1: 8.0, 2: 4.0}  # the load changed: three slow steps start a probe
    assert machine.run(governor, 3 + 4 + 1) == [1, 1, 1, 2, 1, 2, 1, 2]
    assert governor.chosen == 2


def test_one_core_probes_nothing_and_unmeasured_steps_are_ignored():
    machine = Machine({1: 1.0})
    governor = policy.ThreadGovernor(1, apply=machine.apply)
    assert machine.run(governor, 5) == [1] * 5 and governor.decisions == []
    assert "nothing probed" in governor.summary()
    governor = policy.ThreadGovernor(2, apply=machine.apply)
    governor.before_step()
    governor.after_step(float("nan"))  # not counted: still the warm-up next
    assert governor.before_step() == 2 and not governor._queue


def test_summary_names_the_choice_and_the_medians():
    machine = Machine({1: 0.25, 2: 0.5})
    governor = policy.ThreadGovernor(2, apply=machine.apply)
    machine.run(governor, 6)
    assert governor.summary() == "threads chosen by step time: 1 at step 5 (2: 0.5 s, 1: 0.25 s)"


def test_use_installs_one_governor_for_the_process():
    governor = policy.ThreadGovernor(2, apply=lambda count: None)
    previous = policy.use(governor)
    try:
        assert policy.active() is governor
    finally:
        assert policy.use(previous) is governor
    with pytest.raises(TypeError, match="ThreadGovernor"):
        policy.use(2)


def test_the_optimiser_loop_drives_the_installed_governor():
    """optimise.train asks the governor for every step's count and reports every step's time."""
    machine = Machine({1: 1.0, 2: 2.0})
    seen = []

    class Recording(policy.ThreadGovernor):
        def after_step(self, seconds):
            seen.append((self.count, seconds))
            super().after_step(self.seconds_of[self.count])

    governor = Recording(2, apply=machine.apply)
    governor.seconds_of = machine.seconds
    weight = torch.nn.Parameter(torch.tensor([3.0]))
    optimizer = optimise.make_optimizer("adam", [weight], 0.1)
    previous = policy.use(governor)
    try:
        optimise.train(optimizer, lambda step: (weight ** 2).sum(), steps=7)
    finally:
        policy.use(previous)
    assert [count for count, _ in seen] == [2, 2, 1, 2, 1, 1, 1]
    assert all(seconds >= 0 for _, seconds in seen)
    # an explicit governor wins over the installed one, and a new loop starts with a warm-up
    other = Recording(2, apply=machine.apply)
    other.seconds_of = machine.seconds
    seen.clear()
    optimise.train(optimizer, lambda step: (weight ** 2).sum(), steps=2, threads=other)
    assert [count for count, _ in seen] == [2, 2] and other.steps == 2


def test_set_counts_sets_torch_and_numba():
    numba = pytest.importorskip("numba", reason="numba's thread count is only set where numba imports")
    before = torch.get_num_threads(), numba.get_num_threads()
    try:
        policy.set_counts(1)
        assert torch.get_num_threads() == 1 and numba.get_num_threads() == 1
    finally:
        torch.set_num_threads(before[0])
        numba.set_num_threads(before[1])


@pytest.mark.parametrize("text,expected", [("auto", "auto"), ("1", 1), ("12", 12)])
def test_the_option_takes_a_count_or_auto(text, expected):
    assert thread_count(text) == expected


@pytest.mark.parametrize("text", ["0", "-2", "x", "Auto", "1.5"])
def test_the_option_refuses_anything_else(text):
    with pytest.raises(argparse.ArgumentTypeError, match="positive integer or 'auto'"):
        thread_count(text)


def test_calibrate_times_matrix_products_at_each_count_and_starts_at_the_fastest():
    machine = Machine({})
    governor = policy.ThreadGovernor(2, apply=machine.apply)
    medians = governor.calibrate(products=1, rows=64, width=32)
    assert set(medians) == {1, 2} and all(seconds > 0 for seconds in medians.values())
    assert governor.chosen == min(medians, key=lambda count: (medians[count], -count))
    assert machine.applied[:4] == [2, 1, 2, 1] and governor.count == governor.chosen
    assert governor.calibration == medians and governor.decisions == []
    # the first loop still probes its own steps
    machine.seconds = {1: 1.0, 2: 0.5}
    assert machine.run(governor, 5)[1:] == [2, 1, 2, 1]
    assert policy.ThreadGovernor(1, apply=machine.apply).calibrate() == {}


def test_install_makes_calibrates_and_installs_one_governor():
    before = torch.get_num_threads()
    try:
        governor = policy.install(2)
        assert policy.active() is governor and governor.most == 2
        assert set(governor.calibration) == {1, 2} and torch.get_num_threads() == governor.chosen
    finally:
        policy.use(None)
        policy.set_counts(before)
