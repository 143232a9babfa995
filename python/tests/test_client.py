"""falcon.Client against a real `falcon serve` on the local fleet: the same values and the same
exception classes as the in-process fabric, so a business layer can switch between them."""

from __future__ import annotations

import pathlib
import socket
import subprocess
import threading
from typing import Iterator, Optional

import falcon
import pytest
from conftest import BIN, Fleet
from falcon import LogFilter, WorkloadSpec, WorkloadState


class Serve:
    """`falcon serve` on a port the OS picks, its stderr drained into a file."""

    def __init__(self, fleet: Fleet, tokens_file: Optional[pathlib.Path] = None) -> None:
        argv = [str(BIN / "falcon"), "--config", str(fleet.repos_path), "serve", "--listen",
                "127.0.0.1:0", "--state", str(fleet.dir / "serve.db")]
        if tokens_file is not None:
            argv += ["--tokens-file", str(tokens_file)]
        self.log_path = fleet.dir / "serve.stderr"
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        first = self.proc.stderr.readline().decode()  # the bound address comes first
        self._drain = threading.Thread(target=self._copy_stderr, daemon=True)
        self._drain.start()
        if not first.startswith("listening on "):
            self.stop()
            pytest.fail(f"falcon serve did not start: {first}{self.log_path.read_text()}")
        self.url = first.split()[2]

    def _copy_stderr(self) -> None:
        assert self.proc.stderr is not None
        with open(self.log_path, "wb") as out:
            for line in self.proc.stderr:
                out.write(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        self._drain.join(timeout=60)


@pytest.fixture
def serve(fleet: Fleet) -> Iterator[Serve]:
    s = Serve(fleet)
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def client(serve: Serve) -> falcon.Client:
    return falcon.Client(serve.url)


def spec_named(name: str, accelerator: str = "tpu-v4-64") -> WorkloadSpec:
    return WorkloadSpec(name=name, docker_image="gcr.io/falcon/bench:1",
                        command=["python3", "train.py"], accelerator_type=accelerator)


def test_the_client_gives_what_the_fabric_gives(fleet, fabric, client):
    assert client.list_clusters() == fabric.list_clusters()
    assert client.get_cluster("tpu-b") == fabric.get_cluster("tpu-b")

    remote = client.select_cluster("tpu-v4-64")
    local = fabric.select_cluster("tpu-v4-64")
    assert isinstance(remote, falcon.ClusterSelection)
    assert (remote.selected_cluster, remote.candidates, remote.reason) == (
        local.selected_cluster, local.candidates, local.reason)
    assert [(r.cluster, r.reachable, r.queue_depth) for r in remote.probe_results] == [
        (r.cluster, r.reachable, r.queue_depth) for r in local.probe_results]
    # The explanation comes through the service's directly written answer too.
    assert remote.policy == local.policy == "priority"
    assert [(s.cluster, s.eligible, s.rank, s.signals.queue_depth) for s in remote.scores] == [
        (s.cluster, s.eligible, s.rank, s.signals.queue_depth) for s in local.scores]
    assert all(isinstance(s, falcon.CandidateScore) for s in remote.scores)
    assert remote.scores and remote.scores[0].verdict
    status = client.get_cluster_status("tpu-a")  # from the service's cache, probed by select
    assert (status.reachable, status.queue_depth) == (True, 3)


def test_a_workload_through_the_service_from_submit_to_export(fleet, fabric, client):
    handle = client.submit_workload("tpu-b", spec_named("via-serve"))
    assert (handle.workload_name, handle.cluster, handle.namespace) == (
        "via-serve", "tpu-b", "default")
    assert client.handle_for("tpu-b", "via-serve") == handle
    assert client.get_workload_status(handle).state is WorkloadState.RUNNING
    assert [w.name for w in client.list_workloads("tpu-b", "RUNNING")] == ["via-serve"]
    fleet.advance(101)
    status = client.get_workload_status(handle)
    assert status.state is WorkloadState.COMPLETED and status.exit_code == 0
    assert status == fabric.get_workload_status(handle)

    with client.stream_pod_log(handle, 1) as stream:
        remote_lines = list(stream)
    assert remote_lines == list(fabric.stream_pod_log(handle, 1))
    assert remote_lines[-1] == "EXIT_CODE=0"
    assert list(client.stream_pod_log(handle, 1, LogFilter(tail_lines=2))) == remote_lines[-2:]

    seen: list[falcon.ExportProgress] = []
    result = client.export_pod_logs(handle, LogFilter(ranks=[0, 2]), "gs://falcon-logs/via-serve",
                                    progress=seen.append)
    assert result.exported_ranks == [0, 2]
    assert result.gcs_uris[2] == "gs://falcon-logs/via-serve/rank-2.log"
    assert "via-serve/rank-2.log" in fleet.objects("falcon-logs", "via-serve/")
    assert {p.rank for p in seen if p.done} == {0, 2}

    assert client.cancel_workload(handle) is True
    with pytest.raises(falcon.WorkloadNotFoundError):
        client.get_workload_status(handle)


def test_select_and_submit_through_the_service_records_the_decision(fleet, client):
    handle, selection = client.select_and_submit(spec_named("placed-serve"))
    assert handle.cluster == selection.selected_cluster == "tpu-b"
    assert selection.selection_id > 0
    assert client.handle_for("tpu-b", "placed-serve") == handle
    with pytest.raises(falcon.NoAvailableClusterError):
        client.select_and_submit(spec_named("nowhere-serve", "tpu-v9-1"))


def test_a_follow_through_the_service_ends_with_the_workload(fleet, client):
    handle = client.submit_workload("tpu-b", spec_named("follow-serve"))
    fleet.advance(101)  # finished: the follow prints everything, lingers and ends
    lines: list[str] = []
    client.follow_pod_log_until_finished(handle, 0, lines.append)
    assert lines and lines[-1] == "EXIT_CODE=0"


def test_errors_are_the_fabrics_exception_classes(fleet, client):
    with pytest.raises(falcon.UnknownClusterError) as unknown:
        client.get_cluster("no-such-cluster")
    assert isinstance(unknown.value, KeyError) and unknown.value.cluster == "no-such-cluster"
    with pytest.raises(falcon.NoAvailableClusterError) as none:
        client.select_cluster("h100-80gb-8")
    assert none.value.probe_results == []
    with pytest.raises(falcon.WorkloadNotFoundError):
        client.get_workload_status(falcon.WorkloadHandle("never-submitted", "tpu-b", "default", ""))
    with pytest.raises(ValueError):
        client.submit_workload("tpu-b", WorkloadSpec(name="Bad Name", docker_image="i",
                                                     command=["x"], accelerator_type="tpu-v4-64"))
    with pytest.raises(ValueError):
        client.stream_pod_log(falcon.WorkloadHandle("x", "tpu-b", "default", ""), -1)


def test_tokens_decide_who_may_read_and_who_may_act(fleet):
    tokens = fleet.dir / "tokens"
    tokens.write_text("reader-token-0123456789 read\noperator-token-0123456789 operate\n")
    tokens.chmod(0o600)
    s = Serve(fleet, tokens_file=tokens)
    try:
        with pytest.raises(falcon.ServiceError) as anonymous:
            falcon.Client(s.url).list_clusters()
        assert anonymous.value.http_status == 401
        reader = falcon.Client(s.url, token="reader-token-0123456789")
        assert [c.name for c in reader.list_clusters()][0] == "tpu-a"
        with pytest.raises(falcon.ServiceError) as refused:
            reader.submit_workload("tpu-b", spec_named("not-allowed"))
        assert refused.value.http_status == 403
        operator = falcon.Client(s.url, token="operator-token-0123456789")
        assert operator.submit_workload("tpu-b", spec_named("allowed")).cluster == "tpu-b"
    finally:
        s.stop()


def test_a_service_that_is_not_there_is_an_os_error():
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(falcon.ServiceUnavailableError) as gone:
            falcon.Client(url, timeout=10).list_clusters()
    assert isinstance(gone.value, OSError) and url in str(gone.value)
    with pytest.raises(ValueError):
        falcon.Client("ftp://example")


def test_a_client_stream_closed_early_a_raising_follow_and_a_raising_progress(
        fleet, fabric, client):
    handle = fabric.handle_for("tpu-b", "client-bulk")
    fleet.generate_logs(cluster="tpu-b", workload="client-bulk", ranks=[0],
                        lines_per_rank=20000, interval_ms=10)
    stream = client.stream_pod_log(handle, 0)
    first = next(stream)
    stream.close()  # the request ends; the lines read ahead are dropped
    assert first and stream.closed
    with pytest.raises(StopIteration):
        next(stream)

    seen: list[str] = []

    def on_line(line: str) -> None:
        seen.append(line)
        if len(seen) == 3:
            raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        client.follow_pod_log_until_finished(handle, 0, on_line)
    assert seen[0] == first and len(seen) == 3

    def progress(p: falcon.ExportProgress) -> None:
        raise ValueError(f"stop at rank {p.rank}")

    with pytest.raises(ValueError, match="stop at rank 0"):
        client.export_pod_logs(handle, LogFilter(ranks=[0]), "gs://falcon-logs/client-stop",
                               progress=progress)
