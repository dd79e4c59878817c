"""replay.overlap: a stage run in a thread of its own gives the items and calls of the sequential code, in order,
raises a stage's error in the caller's thread where the sequential code would have raised it, and ends its thread
when asked (also early). The replay through it is checked in test_bag_replay (the bytes of the sequential one)."""

from __future__ import annotations

import threading

import pytest

from ros_dofkit.replay.overlap import InOrderCalls, Prefetch, usable_cores


def test_usable_cores_counts_at_least_one():
    assert usable_cores() >= 1


def test_prefetch_yields_every_item_in_order_from_a_generator_run_in_its_own_thread():
    threads = []

    def items():
        for k in range(50):
            threads.append(threading.get_ident())
            yield k

    with Prefetch(items) as prefetch:
        assert list(prefetch) == list(range(50))
    assert set(threads) != {threading.get_ident()}  # made elsewhere than in the consumer's thread


def test_prefetch_raises_the_generators_error_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise ValueError("window 3 cannot be decoded")

    got = []
    with Prefetch(items) as prefetch, pytest.raises(ValueError, match="window 3"):
        for item in prefetch:
            got.append(item)
    assert got == [1, 2]


def test_prefetch_closed_early_closes_its_generator_and_ends_its_thread():
    closed = threading.Event()

    def items():
        try:
            k = 0
            while True:
                yield k
                k += 1
        finally:
            closed.set()

    prefetch = Prefetch(items)
    assert next(iter(prefetch)) == 0
    prefetch.close()
    assert closed.is_set()
    assert not prefetch._thread.is_alive()


def test_in_order_calls_run_in_submission_order_outside_the_callers_thread():
    seen = []
    calls = InOrderCalls(lambda k: seen.append((k, threading.get_ident())))
    for k in range(100):
        calls.submit(k)
    calls.finish()
    assert [k for k, _ in seen] == list(range(100))
    assert threading.get_ident() not in {ident for _, ident in seen}


def test_in_order_calls_raise_a_calls_error_and_skip_the_calls_after_it():
    seen = []
    release = threading.Event()

    def call(k):
        release.wait(5)
        if k == 2:
            raise OSError("disk full")
        seen.append(k)

    calls = InOrderCalls(call)
    for k in range(4):  # 0 runs, 1 waits; 2 and 3 wait for room
        if k == 2:
            release.set()
        calls.submit(k)
    with pytest.raises(OSError, match="disk full"):
        calls.finish()
    assert seen == [0, 1]  # 3 came after the failure: skipped
    assert not calls._thread.is_alive()


def test_in_order_calls_stopped_with_cancel_skip_the_waiting_call():
    seen = []
    running, release = threading.Event(), threading.Event()

    def call(k):
        running.set()
        release.wait(5)
        seen.append(k)

    calls = InOrderCalls(call)
    calls.submit(0)
    running.wait(5)
    calls.submit(1)  # waits behind the running one
    release.set()
    calls.stop(cancel=True)
    assert seen in ([0], [0, 1])  # 1 is skipped unless it had started before the cancel
    assert not calls._thread.is_alive()
