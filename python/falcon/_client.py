"""falcon.Client: the same calls as falcon.ClusterFabric, answered by a `falcon serve` over HTTP.

A business layer can switch between the fabric in-process and a shared service (one probe cache,
one read quota, one history for a team) by changing one line::

    fabric = falcon.ClusterFabric("repos.yaml")             # in-process
    fabric = falcon.Client("http://127.0.0.1:8787")          # through falcon serve
    fabric = falcon.Client("https://falcon.internal:8787", token=os.environ["FALCON_TOKEN"])

The requests are made by the C++ client the ``falcon --server`` CLI uses (include/falcon/
client.h, make_remote_client): values are the same model classes and errors the same exception
classes as the fabric's, so ``except NoAvailableClusterError`` works with either. What only a
service can refuse raises ``ServiceError`` (``.http_status``, ``.type``: ``Unauthorized``,
``Forbidden``, ``NotFound``, ``Stopping``, ...); a request the service finds malformed raises
``ValueError``, as the fabric does for bad arguments; a service that cannot be reached raises
``ServiceUnavailableError`` (an ``OSError`` too).

Differences from the fabric, by the nature of a service (docs/serve.md):
- ``get_cluster_status`` answers with the service's probe of the cluster when it is at most a
  second old, else probes it for this call; ``select_cluster`` never decides on a probe older
  than the service's ``serve.max_probe_age_s``.
- ``stream_pod_log`` reads the service's line stream on a thread of its own, at most a few
  thousand lines ahead of the caller.
- ``export_pod_logs`` starts the export on the service and follows its progress there; Ctrl-C
  (or a raise in ``progress``) stops waiting, and the export goes on in the service.
"""

from __future__ import annotations

import json
from typing import Callable, Optional

from . import _falcon
from ._errors import ServiceError, ServiceUnavailableError
from ._fabric import LogStream, _check, _dump, _filter, _load, _load_list, _progress_callback
from ._model import (
    ClusterConfig,
    ClusterProbeResult,
    ClusterSelection,
    ExportProgress,
    LogExportResult,
    LogFilter,
    WorkloadHandle,
    WorkloadInfo,
    WorkloadSpec,
    WorkloadState,
    WorkloadStatus,
)

__all__ = ["Client", "ServiceError", "ServiceUnavailableError"]


class Client:
    """The facade's calls through a `falcon serve` at ``url`` (``http://host:port`` or
    ``https://...``). ``token``: a bearer token of the service's tokens file (``read`` for
    reads, ``operate`` for submit, cancel and export); none is needed on loopback by default.
    ``timeout``: seconds to wait for an answer to start (a follow waits as long as lines come).
    ``cafile``: a CA bundle to trust for https (else the system's). Every call blocks with the
    GIL released; safe to use from many threads."""

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = 120.0,
                 cafile: Optional[str] = None) -> None:
        self.url = url.rstrip("/")
        self._native = _falcon.Client(url, token or "", float(timeout), cafile or "")

    def __repr__(self) -> str:
        return f"falcon.Client({self.url!r})"

    # --- Clusters

    def list_clusters(self) -> list[ClusterConfig]:
        """Every registered cluster, in file order."""
        return _load_list(ClusterConfig, self._native.list_clusters())

    def get_cluster(self, cluster: str) -> ClusterConfig:
        """Raises UnknownClusterError (also a KeyError)."""
        return _load(ClusterConfig, self._native.get_cluster(cluster))  # type: ignore[no-any-return]

    def get_cluster_status(self, cluster: str) -> ClusterProbeResult:
        """The service's probe of ``cluster``, at most a second old (probed for this call if need
        be). Raises UnknownClusterError."""
        return _load(ClusterProbeResult, self._native.get_cluster_status(cluster))  # type: ignore[no-any-return]

    def select_cluster(self, accelerator_type: str) -> ClusterSelection:
        """The best cluster for ``accelerator_type``, decided on probes no older than the
        service's serve.max_probe_age_s, with the whole explanation. Raises
        NoAvailableClusterError (.probe_results)."""
        return _load(ClusterSelection, self._native.select_cluster(accelerator_type))  # type: ignore[no-any-return]

    # --- Workloads

    def submit_workload(self, cluster: str, spec: WorkloadSpec) -> WorkloadHandle:
        """Raises UnknownClusterError, WorkloadSubmitError (.stderr), ValueError for a spec the
        service refuses before calling xpk."""
        _check(spec, WorkloadSpec, "spec")
        if not cluster:
            raise ValueError("cluster: expected a cluster's name; select_and_submit selects one")
        placed = json.loads(self._native.submit(_dump(spec), cluster))
        return WorkloadHandle.from_dict(placed["handle"])

    def select_and_submit(self, spec: WorkloadSpec) -> tuple[WorkloadHandle, ClusterSelection]:
        """The service selects the best cluster for ``spec.accelerator_type`` (from its probe
        cache) and submits there, recording the submission with that decision. Returns the
        handle and the decision. Raises NoAvailableClusterError, and as submit_workload."""
        _check(spec, WorkloadSpec, "spec")
        placed = json.loads(self._native.submit(_dump(spec), ""))
        return (WorkloadHandle.from_dict(placed["handle"]),
                ClusterSelection.from_dict(placed["selection"]))

    def get_workload_status(self, handle: WorkloadHandle) -> WorkloadStatus:
        """Raises UnknownClusterError, WorkloadNotFoundError, XpkCommandError."""
        _check(handle, WorkloadHandle, "handle")
        return _load(WorkloadStatus, self._native.get_workload_status(  # type: ignore[no-any-return]
            handle.cluster, handle.workload_name))

    def cancel_workload(self, handle: WorkloadHandle) -> bool:
        """True once deleted. Raises WorkloadNotFoundError, UnknownClusterError, XpkCommandError."""
        _check(handle, WorkloadHandle, "handle")
        cancelled: bool = self._native.cancel_workload(handle.cluster, handle.workload_name)
        return cancelled

    def list_workloads(self, cluster: str,
                       state_filter: Optional[str | WorkloadState] = None) -> list[WorkloadInfo]:
        """Every workload the cluster lists now (through xpk), optionally of one state."""
        state = None if state_filter is None else WorkloadState(state_filter).value
        return _load_list(WorkloadInfo, self._native.list_workloads(cluster, state))

    def handle_for(self, cluster: str, workload_name: str) -> WorkloadHandle:
        """A handle for a workload known by name: namespace and submission time from the
        service's submission record (without asking xpk), else the cluster's default namespace
        and an empty submitted_at. Raises UnknownClusterError."""
        return _load(WorkloadHandle, self._native.handle_for(cluster, workload_name))  # type: ignore[no-any-return]

    # --- Logs

    def stream_pod_log(self, handle: WorkloadHandle, rank: int,
                       filter: Optional[LogFilter] = None, slice: int = 0) -> LogStream:
        """The lines of worker ``rank`` of slice ``slice``, read as the caller iterates.
        ``filter.since``, ``filter.grep`` and ``filter.tail_lines`` apply; ``filter.ranks`` is
        ignored. Raises LogRetrievalError (a failure before the first line) at once;
        ``close()`` (or leaving a ``with`` block) ends the request."""
        _check(handle, WorkloadHandle, "handle")
        return LogStream(self._native.stream_pod_log(_dump(handle), rank, _filter(filter), slice))

    def follow_pod_log_until_finished(
        self, handle: WorkloadHandle, rank: int, on_line: Callable[[str], object],
        filter: Optional[LogFilter] = None, slice: int = 0, *,
        interrupted: Optional[Callable[[], bool]] = None,
    ) -> None:
        """``falcon job logs --follow`` through the service: ``on_line`` gets each line as it
        arrives, until the workload is done (the service decides, as the fabric does) or
        ``interrupted()`` returns true (asked between lines and about every 100 ms while
        quiet), or ``on_line`` raises (propagated). Ctrl-C raises KeyboardInterrupt."""
        _check(handle, WorkloadHandle, "handle")
        self._native.follow_pod_log_until_finished(_dump(handle), rank, _filter(filter), slice,
                                                   interrupted, on_line)

    def export_pod_logs(
        self, handle: WorkloadHandle, filter: Optional[LogFilter], gcs_dest: str,
        slice: int = 0, progress: Optional[Callable[[ExportProgress], object]] = None,
        via: str = "read", keep_staging: bool = False,
    ) -> LogExportResult:
        """Archives the ranks of ``filter.ranks`` (None: every rank found) to
        ``<gcs_dest>/rank-<N>.log`` on the service, by ``via`` (``auto``, ``read``, ``copy`` or
        ``sink``: docs/log-export.md), following its progress there; ``progress`` gets the
        counts of each rank that changed. Raises the export's error (LogRetrievalError, ...)
        when it failed."""
        _check(handle, WorkloadHandle, "handle")
        callback = _progress_callback(progress)
        return _load(LogExportResult, self._native.export_pod_logs(  # type: ignore[no-any-return]
            _dump(handle), _filter(filter), gcs_dest, slice, callback, via, keep_staging))
