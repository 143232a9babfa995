"""ClusterFabric: the cluster layer's one entry point, in-process (include/falcon/fabric.h)."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Optional, TypeVar

from . import _falcon
from ._model import (
    ClusterConfig,
    ClusterProbeResult,
    ClusterSelection,
    DoctorCheck,
    ExportProgress,
    FabricConfig,
    LogExportResult,
    LogFilter,
    WarmupResult,
    WorkloadHandle,
    WorkloadInfo,
    WorkloadSpec,
    WorkloadState,
    WorkloadStatus,
)

__all__ = ["ClusterFabric", "LogStream", "check_config"]

_T = TypeVar("_T")


def _load(cls: Any, text: str) -> Any:
    return cls.from_dict(json.loads(text))


def _load_list(cls: Any, text: str) -> list[Any]:
    return [cls.from_dict(x) for x in json.loads(text)]


def _dump(value: Any) -> str:
    return json.dumps(value.to_dict())


def _check(value: Any, cls: type, name: str) -> None:
    if not isinstance(value, cls):
        raise TypeError(f"{name} must be a falcon.{cls.__name__}, not {type(value).__name__}")


def _filter(value: Optional[LogFilter]) -> str:
    if value is None:
        return _dump(LogFilter())
    _check(value, LogFilter, "filter")
    return _dump(value)


def _progress_callback(
    progress: Optional[Callable[[ExportProgress], object]],
) -> Optional[Callable[[dict[str, Any]], object]]:
    """The native module's progress callable (a dict per call) for ``progress``."""
    if progress is None:
        return None
    user = progress

    def callback(d: dict[str, Any]) -> object:
        return user(ExportProgress(**d))

    return callback


class LogStream(Iterator[str]):
    """The lines of one rank, oldest first, read lazily: a page of up to 1000 entries is fetched
    (without holding the GIL) only when the lines before it are used up, so breaking out of the
    loop stops reading. Single pass. ``close()`` (or leaving a ``with`` block) releases it at
    once. ``next()`` raises LogRetrievalError when a page cannot be read after retries, and
    KeyboardInterrupt on Ctrl-C once the page in flight has arrived (the line that ``next()``
    was reading is then dropped; the stream stays usable)."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def __iter__(self) -> "LogStream":
        return self

    def __next__(self) -> str:
        line: str = self._native.__next__()
        return line

    def close(self) -> None:
        """Stops reading; later ``next()`` calls end the iteration."""
        self._native.close()

    @property
    def closed(self) -> bool:
        """True once the lines are used up or the stream was closed."""
        closed: bool = self._native.closed
        return closed

    def __enter__(self) -> "LogStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_config(config_path: str) -> FabricConfig:
    """Reads and validates a configuration without building a fabric (``falcon config
    validate``). Raises ClusterConfigError listing every problem."""
    return _load(FabricConfig, _falcon.check_config(config_path))  # type: ignore[no-any-return]


class ClusterFabric:
    """The cluster layer's one entry point: registry, prober, selector, xpk workload manager and
    Cloud Logging retriever behind one object.

    Typical flow::

        fabric = falcon.ClusterFabric("repos.yaml")              # ClusterConfigError
        choice = fabric.select_cluster("tpu-v4-64")              # NoAvailableClusterError
        handle = fabric.submit_workload(choice.selected_cluster, spec)
        while not fabric.get_workload_status(handle).state.is_terminal:
            time.sleep(30)
        for line in fabric.stream_pod_log(handle, 0):            # pages fetched lazily
            parse_metrics(line)
        fabric.export_pod_logs(handle, falcon.LogFilter(), "gs://bucket/profiles/s-42/logs")

    Every method blocks the calling thread with the GIL released, so other Python threads run
    meanwhile; all are safe to call from several threads at once. select -> submit is not
    atomic: the chosen cluster may fill up in between; the caller retries or selects again.
    Errors are falcon.FalconError subclasses (falcon._errors) and ValueError for bad arguments.
    """

    def __init__(self, config_path: str) -> None:
        """Loads ``config_path`` (repos.yaml) and creates the modules with real effects (xpk
        subprocesses, HTTP to Cloud Logging and Storage, the system clock). Raises
        ClusterConfigError listing every problem."""
        self._native = _falcon.Fabric(str(config_path))

    def reload(self) -> None:
        """Re-reads the configuration. On failure raises ClusterConfigError and keeps the
        previous one."""
        self._native.reload()

    def config(self) -> FabricConfig:
        """The configuration in force (settings included)."""
        return _load(FabricConfig, self._native.config())  # type: ignore[no-any-return]

    # --- Clusters

    def list_clusters(self) -> list[ClusterConfig]:
        """Every registered cluster, in file order."""
        return _load_list(ClusterConfig, self._native.list_clusters())

    def get_cluster(self, cluster: str) -> ClusterConfig:
        """The named cluster. Raises UnknownClusterError (a KeyError)."""
        return _load(ClusterConfig, self._native.get_cluster(cluster))  # type: ignore[no-any-return]

    def get_cluster_status(self, cluster: str) -> ClusterProbeResult:
        """Probes one cluster now (``xpk workload list``). An unreachable cluster gives
        ``reachable=False`` with the reason in ``error``, not an exception. Raises
        UnknownClusterError."""
        return _load(ClusterProbeResult, self._native.get_cluster_status(cluster))  # type: ignore[no-any-return]

    def select_cluster(self, accelerator_type: str) -> ClusterSelection:
        """The best cluster for ``accelerator_type``: every candidate probed in parallel, the
        most preferred reachable one whose queue_depth <= max_queue_depth chosen. Raises
        NoAvailableClusterError with every probe result."""
        return _load(ClusterSelection, self._native.select_cluster(accelerator_type))  # type: ignore[no-any-return]

    def warm_up(self) -> list[WarmupResult]:
        """Fetches every cluster's credentials into its own kubeconfig, in parallel (the spec's
        start-up warm-up). One result per cluster; never raises for a cluster's failure."""
        return _load_list(WarmupResult, self._native.warm_up())

    # --- Workloads

    def submit_workload(self, cluster: str, spec: WorkloadSpec) -> WorkloadHandle:
        """Submits ``spec`` to the named cluster (``xpk workload create``). Raises
        UnknownClusterError, WorkloadSubmitError (with xpk's ``stderr`` and ``exit_code``)."""
        _check(spec, WorkloadSpec, "spec")
        return _load(WorkloadHandle, self._native.submit_workload(cluster, _dump(spec)))  # type: ignore[no-any-return]

    def select_and_submit(self, spec: WorkloadSpec) -> tuple[WorkloadHandle, ClusterSelection]:
        """Selects the best cluster for ``spec.accelerator_type`` and submits there, recording the
        submission with the decision that chose its cluster (what ``falcon job submit`` without
        ``--cluster`` does). Returns the handle and the decision. Raises NoAvailableClusterError,
        and as submit_workload."""
        _check(spec, WorkloadSpec, "spec")
        placed = json.loads(self._native.select_and_submit(_dump(spec)))
        return (WorkloadHandle.from_dict(placed["handle"]),
                ClusterSelection.from_dict(placed["selection"]))

    def get_workload_status(self, handle: WorkloadHandle) -> WorkloadStatus:
        """State and times from ``xpk workload list``. ``exit_code``: 0 once COMPLETED; once
        FAILED, the code the failing worker printed (None when it is not in the logs); else
        None. Raises UnknownClusterError, XpkCommandError."""
        _check(handle, WorkloadHandle, "handle")
        return _load(WorkloadStatus, self._native.get_workload_status(_dump(handle)))  # type: ignore[no-any-return]

    def cancel_workload(self, handle: WorkloadHandle) -> bool:
        """Deletes the workload (``xpk workload delete``); True once deleted. Raises
        WorkloadNotFoundError, UnknownClusterError, XpkCommandError."""
        _check(handle, WorkloadHandle, "handle")
        result: bool = self._native.cancel_workload(_dump(handle))
        return result

    def list_workloads(
        self, cluster: str, state_filter: Optional[str | WorkloadState] = None
    ) -> list[WorkloadInfo]:
        """Every workload of the cluster, optionally only those in ``state_filter`` (QUEUED,
        RUNNING, COMPLETED, FAILED, UNKNOWN). Raises UnknownClusterError, XpkCommandError."""
        state = None if state_filter is None else WorkloadState(state_filter).value
        return _load_list(WorkloadInfo, self._native.list_workloads(cluster, state))

    def handle_for(self, cluster: str, workload_name: str) -> WorkloadHandle:
        """A handle for a workload known only by name: namespace and submission time come from
        falcon's submission record when falcon submitted it, else the cluster's default
        namespace and an empty submitted_at. Raises UnknownClusterError."""
        return _load(WorkloadHandle, self._native.handle_for(cluster, workload_name))  # type: ignore[no-any-return]

    # --- Logs (cluster, workload and namespace come from the handle)

    def stream_pod_log(
        self, handle: WorkloadHandle, rank: int, filter: Optional[LogFilter] = None, slice: int = 0
    ) -> LogStream:
        """The lines of worker ``rank`` of slice ``slice``, lazily (see LogStream). The lower
        time bound is ``filter.since``, else the handle's submitted_at minus a margin, else the
        last 24 hours. ``filter.grep`` is a Cloud Logging expression ANDed on the server;
        ``filter.tail_lines = N`` gives the last N lines (one request for N <= 1000);
        ``filter.ranks`` is ignored. Raises InvalidValueError (a ValueError) at once for a rank,
        slice, name or since that breaks its rule, naming it in ``field``; nothing is read
        before the first ``next()``."""
        _check(handle, WorkloadHandle, "handle")
        return LogStream(self._native.stream_pod_log(_dump(handle), rank, _filter(filter), slice))

    def follow_pod_log(
        self,
        handle: WorkloadHandle,
        rank: int,
        on_line: Callable[[str], object],
        filter: Optional[LogFilter] = None,
        slice: int = 0,
        *,
        should_stop: Optional[Callable[[], bool]] = None,
        poll_interval: float = 5.0,
        lookback: float = 5.0,
        visibility_delay: float = 2.0,
    ) -> None:
        """Calls ``on_line`` with each line of the rank once (no duplicates, none skipped), first
        what stream_pod_log would give, then polling for new lines every ``poll_interval``
        seconds (raised to the pace the project's read quota allows) until ``should_stop()``
        returns true (asked after every poll and every ~200 ms while waiting). Without
        ``should_stop`` it runs until interrupted. An exception raised by ``on_line`` or
        ``should_stop`` stops it and propagates; Ctrl-C raises KeyboardInterrupt within ~200 ms
        of a wait (a request in flight finishes first). Raises LogRetrievalError."""
        _check(handle, WorkloadHandle, "handle")
        self._native.follow_pod_log(
            _dump(handle), rank, _filter(filter), slice, poll_interval, lookback,
            visibility_delay, should_stop, on_line,
        )

    def follow_pod_log_until_finished(
        self,
        handle: WorkloadHandle,
        rank: int,
        on_line: Callable[[str], object],
        filter: Optional[LogFilter] = None,
        slice: int = 0,
        *,
        interrupted: Optional[Callable[[], bool]] = None,
        poll_interval: float = 5.0,
        lookback: float = 5.0,
        visibility_delay: float = 2.0,
    ) -> None:
        """follow_pod_log until the workload is done (``falcon job logs --follow``): the status
        is asked every 15 s, and polling lingers a poll interval and 5 s after a terminal state
        (or after the cluster no longer lists the workload) so that the last lines arrive.
        ``interrupted()`` returning true, an exception from a callable, or Ctrl-C stop it at
        once (the last two propagate)."""
        _check(handle, WorkloadHandle, "handle")
        self._native.follow_pod_log_until_finished(
            _dump(handle), rank, _filter(filter), slice, poll_interval, lookback,
            visibility_delay, interrupted, on_line,
        )

    def export_pod_logs(
        self,
        handle: WorkloadHandle,
        filter: Optional[LogFilter],
        gcs_dest: str,
        slice: int = 0,
        progress: Optional[Callable[[ExportProgress], object]] = None,
        via: str = "read",
        keep_staging: bool = False,
    ) -> LogExportResult:
        """Archives the ranks of ``filter.ranks`` (None: every rank found; [0]: rank 0 only) of
        slice ``slice`` to ``<gcs_dest>/rank-<N>.log``, then ``<gcs_dest>/collection_meta.json``,
        streaming each rank into a resumable upload (memory does not grow with the logs).
        ``progress`` gets an ExportProgress after every page for the ranks it touched and once
        per rank with ``done=True``. An exception raised by ``progress``, or Ctrl-C, aborts the
        export (its uploads are cancelled) and propagates. Raises LogRetrievalError, and
        ValueError before reading anything for a rank the workload does not have.

        ``via`` chooses how the entries are read (docs/log-export.md): ``"read"`` (the default,
        entries:list under the project's read quota), ``"copy"`` (an entries:copy operation into
        ``gcp.log_copy_staging``, then split per rank: no read quota; Ctrl-C cancels the
        operation), ``"sink"`` (the Log Router sink's archive ``gcp.log_archive``) or ``"auto"``
        (sink when the archive covers the window, else copy when ``gcp.log_copy`` allows it, else
        read). Every path writes the same rank objects. ``keep_staging`` keeps a copy's staged
        objects. ValueError for another ``via``."""
        _check(handle, WorkloadHandle, "handle")
        callback = _progress_callback(progress)
        return _load(  # type: ignore[no-any-return]
            LogExportResult,
            self._native.export_pod_logs(
                _dump(handle), _filter(filter), gcs_dest, slice, callback, via, keep_staging
            ),
        )

    def doctor(self) -> list[DoctorCheck]:
        """Checks this machine: xpk, gcloud, kubectl and the auth plugin, which credential
        source resolves (never the token), that the Logging and Storage endpoints answer, and
        a probe of every cluster. Never raises for a failed check."""
        return _load_list(DoctorCheck, self._native.doctor())

    def __repr__(self) -> str:
        return f"falcon.ClusterFabric({self.config().source_path!r})"
