"""Token-block workers (galinear.nn.functional.threads): every block once, errors raised, the
caller's count recorded, and the spinor backend the same on any number of workers."""
from __future__ import annotations

import os
import threading

import pytest
import torch

from galinear.nn import RotorLinear
from galinear.nn.functional import plan as dispatch
from galinear.nn.functional import threads


def _numba_started():
    """Run one parallel loop so that numba has chosen its threading layer."""
    pytest.importorskip("numba", reason="the block workers share numba kernels only where numba is installed")
    from galinear import _numba

    if _numba.numba.config.DISABLE_JIT:
        pytest.skip("NUMBA_DISABLE_JIT=1: no threading layer")
    RotorLinear(512, 512, chunk_size=512, backend="spinor").eval()(torch.randn(4, 512))
    if not threads.concurrent_numba_ok():
        pytest.skip(f"numba's threading layer {_numba.numba.threading_layer()!r} is not thread-safe: one worker")


@pytest.mark.parametrize("blocks, workers", [(1, 2), (5, 1), (7, 2), (40, 3), (3, 64)])
def test_every_block_runs_once(blocks, workers):
    seen, lock = [], threading.Lock()

    def work(next_block):
        while (index := next_block()) is not None:
            with lock:
                seen.append(index)

    threads.for_each_block(blocks, work, workers)
    assert sorted(seen) == list(range(blocks))


def test_two_workers_run_at_once():
    """Each worker takes one block and waits for the other: one thread alone would time out."""
    _numba_started()
    barrier = threading.Barrier(2, timeout=30)
    names = set()

    def work(next_block):
        if next_block() is not None:
            names.add(threading.current_thread().name)
            barrier.wait()

    threads.for_each_block(2, work, 2)
    assert len(names) == 2


@pytest.mark.parametrize("where", ["this thread", "a helper"])
def test_an_error_in_any_worker_is_raised_after_all_stopped(where):
    _numba_started()
    main = threading.current_thread()
    taken = []

    def work(next_block):
        while (index := next_block()) is not None:
            taken.append(index)
            if (threading.current_thread() is main) == (where == "this thread"):
                raise RuntimeError("block failed")
            threading.Event().wait(0.01)

    with pytest.raises(RuntimeError, match="block failed"):
        threads.for_each_block(50, work, 2)
    assert len(set(taken)) == len(taken)


def test_the_context_records_the_callers_count():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert threads.caller_threads() == 2
        with threads.intra_op_threads(1):
            assert torch.get_num_threads() == 1 and threads.caller_threads() == 2
            with threads.intra_op_threads(1):  # nested: still the outermost caller's count
                assert threads.caller_threads() == 2
        with threads.intra_op_threads(1, workers=3):
            assert threads.caller_threads() == 3
        assert torch.get_num_threads() == 2 and threads.caller_threads() == 2
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="worker count"):
        threads.intra_op_threads(1, workers=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_spinor_layer_is_the_same_on_one_or_two_workers(dtype):
    """A 2048-token batch is many token blocks: shared among the caller's two threads, the output
    and the gradients equal one thread's bit for bit (each block is computed the same way)."""
    _numba_started()
    torch.manual_seed(0)
    layer = RotorLinear(512, 512, chunk_size=512, backend="spinor").to(dtype)
    x = torch.randn(2048, 512, dtype=dtype)
    before = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            layer.zero_grad()
            xs = x.clone().requires_grad_(True)
            y = layer(xs)
            y.pow(2).sum().backward()
            results.append((y.detach(), xs.grad, [p.grad.clone() for p in layer.parameters()]))
    finally:
        torch.set_num_threads(before)
    (y1, g1, p1), (y2, g2, p2) = results
    assert torch.equal(y1, y2) and torch.equal(g1, g2)
    for a, b in zip(p1, p2):
        torch.testing.assert_close(a, b, rtol=1e-12 if dtype == torch.float64 else 1e-5, atol=0)


def test_spinor_blocks_go_to_the_callers_threads(monkeypatch):
    """Inside the single-threaded call of a layer, the spinor backend's blocks run on more than one
    thread when the caller had two."""
    _numba_started()
    from galinear.nn.functional import spinor

    names = set()
    products = spinor._products

    def spy(*args):
        names.add(threading.current_thread().name)
        threading.Event().wait(0.005)  # long enough that the helper takes blocks too
        return products(*args)

    monkeypatch.setattr(spinor, "_products", spy)
    layer = RotorLinear(512, 512, chunk_size=512, backend="spinor").eval()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch.no_grad():
            layer(torch.randn(4096, 512))
    finally:
        torch.set_num_threads(before)
    assert len(names) == 2, names
    assert dispatch.plan(9, 4096, "cpu", torch.float32, "inference", 2, backend="spinor").threads == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_gets_its_own_pool():
    """After fork the parent's pool threads do not exist in the child: the child must not hand
    blocks to them (it would wait for ever), so it starts a pool of its own."""
    _numba_started()
    threads.for_each_block(4, lambda next_block: [None for _ in iter(next_block, None)], 2)  # the pool exists
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 only if two threads took blocks
        code = 1
        try:
            names = set()

            def work(next_block):
                if next_block() is not None:
                    names.add(threading.current_thread().name)
                    barrier.wait()

            barrier = threading.Barrier(2, timeout=20)
            threads.for_each_block(2, work, 2)
            code = 0 if len(names) == 2 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
