"""What the Python binding adds to the C++ fabric: the GIL is released while a call blocks,
stream_pod_log reads pages only as the caller iterates, callables are called back, and Ctrl-C
(SIGINT) interrupts a stream or a follow. Ordering is asserted through the server's request
counters and server-side delays, never through how long something took."""

from __future__ import annotations

import os
import signal
import threading
import time

import falcon
import pytest
from falcon import LogFilter

PAGE = 1000  # entries per entries:list page


def bulk_handle(fleet, fabric, name: str, lines: int) -> falcon.WorkloadHandle:
    """A workload name with `lines` lines of rank 0 in the fleet's Logging (no workload runs)."""
    handle = fabric.handle_for("tpu-b", name)
    fleet.generate_logs(cluster="tpu-b", workload=name, ranks=[0], lines_per_rank=lines,
                        interval_ms=10)
    return handle


def wait_for(predicate, what: str, deadline_s: float = 60) -> None:
    """Polls `predicate` (a server counter) until it holds; fails after the deadline."""
    end = time.monotonic() + deadline_s
    while not predicate():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_stream_reads_a_page_only_when_the_lines_before_it_are_used_up(fleet, fabric):
    handle = bulk_handle(fleet, fabric, "lazy", 2 * PAGE + 500)
    before = fleet.requests("logging.list")
    stream = fabric.stream_pod_log(handle, 0)
    assert fleet.requests("logging.list") == before  # nothing read yet
    first = next(stream)
    assert first and fleet.requests("logging.list") == before + 1
    for _ in range(PAGE - 1):
        next(stream)
    assert fleet.requests("logging.list") == before + 1  # the first page, used up
    next(stream)
    assert fleet.requests("logging.list") == before + 2
    rest = list(stream)
    assert len(rest) == PAGE + 500 - 1
    assert stream.closed


def test_breaking_out_of_the_loop_stops_reading(fleet, fabric):
    handle = bulk_handle(fleet, fabric, "breaks", 3 * PAGE)
    before = fleet.requests("logging.list")
    seen = 0
    with fabric.stream_pod_log(handle, 0) as stream:
        for _ in stream:
            seen += 1
            if seen == PAGE + 1:  # into the second page
                break
    assert stream.closed
    assert list(stream) == []
    assert fleet.requests("logging.list") == before + 2  # the third page is never read


def test_two_threads_stream_while_a_third_selects(fleet, fabric):
    # Both streams' first page is held 20 s by the server; the selection (three probes through
    # fleet-xpk) must finish while both are still waiting, which needs the GIL released.
    a = bulk_handle(fleet, fabric, "reader-a", 50)
    b = bulk_handle(fleet, fabric, "reader-b", 50)
    before = fleet.requests("logging.list")
    fleet.add_fault({"route": "logging.list", "times": 2, "delay_ms": 20000})
    results: dict[str, list[str]] = {}

    def read(name: str, handle: falcon.WorkloadHandle) -> None:
        results[name] = list(fabric.stream_pod_log(handle, 0))

    threads = [threading.Thread(target=read, args=(n, h)) for n, h in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    wait_for(lambda: fleet.requests("logging.list") == before + 2, "both streams' requests")
    selection = fabric.select_cluster("tpu-v4-64")
    assert selection.selected_cluster == "tpu-b"
    assert results == {}, "a stream finished before the selection: was the GIL held?"
    for t in threads:
        t.join()
    assert len(results["a"]) == 50 and len(results["b"]) == 50


def test_one_stream_shared_by_two_threads_gives_each_line_once(fleet, fabric):
    handle = bulk_handle(fleet, fabric, "shared", PAGE + 200)
    stream = fabric.stream_pod_log(handle, 0)
    got: list[list[str]] = [[], []]

    def drain(i: int) -> None:
        for line in stream:
            got[i].append(line)

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got[0]) + len(got[1]) == PAGE + 200
    assert len(set(got[0]) | set(got[1])) == PAGE + 200


@pytest.fixture(autouse=True)
def sigint_raises_keyboard_interrupt():
    """Ctrl-C as an interactive run has it: a test run started in the background (`make test &`,
    nohup) inherits SIGINT ignored, and Python then installs no handler of its own."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def interrupt_when(condition, what: str) -> threading.Thread:
    """Sends this process SIGINT (Ctrl-C) from another thread once `condition()` holds."""

    def run() -> None:
        wait_for(condition, what)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_ctrl_c_interrupts_a_stream_waiting_for_a_page(fleet, fabric):
    handle = bulk_handle(fleet, fabric, "interrupt-stream", 3 * PAGE)
    before = fleet.requests("logging.list")
    fleet.add_fault({"route": "logging.list", "times": 1, "delay_ms": 3000})
    stream = fabric.stream_pod_log(handle, 0)
    t = interrupt_when(lambda: fleet.requests("logging.list") > before, "the page request")
    lines = None
    with pytest.raises(KeyboardInterrupt):
        lines = list(stream)  # the signal arrives while the first page is in flight
    assert lines is None
    t.join()
    assert fleet.requests("logging.list") == before + 1  # no page read after Ctrl-C
    # The stream is still usable; the line whose read Ctrl-C interrupted is not given again.
    assert len(list(stream)) == 3 * PAGE - 1


def test_ctrl_c_interrupts_a_follow_between_polls(fleet, fabric):
    # No Python runs during the follow's waits (no should_stop, no new lines for on_line), so
    # only the module's own signal check can end it. Safety net: if it is not interrupted
    # within two minutes the server starts refusing reads and the follow fails with that.
    handle = bulk_handle(fleet, fabric, "interrupt-follow", 5)
    lines: list[str] = []
    got_lines = threading.Event()

    def on_line(line: str) -> None:
        lines.append(line)
        if len(lines) == 5:
            got_lines.set()

    fired: list[bool] = []

    def refuse_reads() -> None:
        fired.append(True)
        fleet.add_fault({"route": "logging.list", "times": 1000000, "status": 400})

    net = threading.Timer(120, refuse_reads)
    net.start()
    t = interrupt_when(got_lines.is_set, "the first lines")
    try:
        with pytest.raises(KeyboardInterrupt):
            fabric.follow_pod_log(handle, 0, on_line, poll_interval=0.5)
    finally:
        net.cancel()
    assert not fired, "the follow ran on until the server refused reads: Ctrl-C was not seen"
    assert len(lines) == 5
    t.join()


def test_follow_stops_when_should_stop_says_so_and_gives_every_line_once(fleet, fabric):
    handle = bulk_handle(fleet, fabric, "follow-stop", 30)
    lines: list[str] = []
    fabric.follow_pod_log(handle, 0, lines.append, should_stop=lambda: len(lines) >= 30,
                          poll_interval=0.1)
    assert len(lines) == 30 and len(set(lines)) == 30


def test_an_exception_in_on_line_stops_the_follow_and_propagates(fleet, fabric):
    handle = bulk_handle(fleet, fabric, "follow-raise", 30)
    seen: list[str] = []

    def on_line(line: str) -> None:
        seen.append(line)
        if len(seen) == 3:
            raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        fabric.follow_pod_log(handle, 0, on_line, poll_interval=3600)
    assert len(seen) == 3


def test_follow_until_finished_ends_after_the_workload_and_honours_interrupted(fleet, fabric):
    handle = fabric.submit_workload("tpu-b", falcon.WorkloadSpec(
        name="follow-done", docker_image="i:1", command=["true"], accelerator_type="tpu-v4-64"))
    fleet.advance(101)
    lines: list[str] = []
    calls = []

    def interrupted() -> bool:
        calls.append(1)
        return "EXIT_CODE=0" in lines  # stop once the last line arrived

    fabric.follow_pod_log_until_finished(handle, 0, lines.append, interrupted=interrupted,
                                         poll_interval=0.1)
    assert lines[-1] == "EXIT_CODE=0" and calls


def test_follow_until_finished_returns_by_itself_after_the_workload_ended(fleet, fabric):
    handle = fabric.submit_workload("tpu-b", falcon.WorkloadSpec(
        name="follow-end", docker_image="i:1", command=["true"], accelerator_type="tpu-v4-64"))
    fleet.advance(101)
    lines: list[str] = []
    fabric.follow_pod_log_until_finished(handle, 0, lines.append, poll_interval=0.1)
    assert lines[-1] == "EXIT_CODE=0"


def test_an_exception_in_export_progress_aborts_the_export(fleet, fabric):
    handle = bulk_handle(fleet, fabric, "export-raise", 20)

    def progress(p: falcon.ExportProgress) -> None:
        raise ValueError(f"stop at rank {p.rank}")

    with pytest.raises(ValueError, match="stop at rank 0"):
        fabric.export_pod_logs(handle, LogFilter(ranks=[0]), "gs://falcon-logs/aborted",
                               progress=progress)
    assert fleet.objects("falcon-logs", "aborted/") == []
