"""The client-side deadline that severs a connection a paused server never answers."""

from __future__ import annotations

import socket
import threading
import time

from langchain_rolling_memory.stores.postgres.deadlines import Deadlines, sever


def test_an_action_runs_at_its_deadline_and_marks_the_watch_fired() -> None:
    ran = threading.Event()
    with Deadlines().watch(0.05, ran.set) as watch:
        assert ran.wait(5)
    assert watch.fired


def test_a_block_that_ends_in_time_disarms_its_deadline() -> None:
    ran = threading.Event()
    deadlines = Deadlines()
    with deadlines.watch(0.2, ran.set) as watch:
        pass
    with deadlines.watch(0.05, lambda: None):  # a later deadline wakes the thread past the first
        time.sleep(0.3)
    assert not ran.is_set() and not watch.fired


def test_sever_wakes_a_blocked_reader_with_an_end_of_file() -> None:
    left, right = socket.socketpair()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(left.recv(10)))
    reader.start()
    with Deadlines().watch(0.05, lambda: sever(left.fileno())):
        reader.join(5)
    assert got == [b""] and left.fileno() != -1  # woken, and the caller's descriptor is still its own
    left.close()
    right.close()


def test_arming_a_later_deadline_does_not_wake_the_thread() -> None:
    # Every statement arms the same timeout: only a new earliest deadline may wake the thread,
    # or each statement pays a wake-up and a GIL hand-off. The thread reads the clock once per
    # wake-up; arming reads it once per arm.
    reads = 0
    lock = threading.Lock()

    def clock() -> float:
        nonlocal reads
        with lock:
            reads += 1
        return time.monotonic()

    deadlines = Deadlines(clock=clock)
    with deadlines.watch(60, lambda: None):
        time.sleep(0.05)  # the thread starts and sleeps until the first deadline
        before = reads
        for _ in range(100):
            with deadlines.watch(60, lambda: None):
                pass
        time.sleep(0.05)
        assert reads - before == 100  # the arms' own reads: the thread never woke
    ran = threading.Event()
    with deadlines.watch(0.01, ran.set):  # an earlier deadline still wakes it
        assert ran.wait(5)
