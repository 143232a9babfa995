"""falcon.Client: the same calls as falcon.ClusterFabric, answered by a `falcon serve` over HTTP.

A business layer can switch between the fabric in-process and a shared service (one probe cache,
one read quota, one history for a team) by changing one line::

    fabric = falcon.ClusterFabric("repos.yaml")             # in-process
    fabric = falcon.Client("http://127.0.0.1:8787")          # through falcon serve
    fabric = falcon.Client("https://falcon.internal:8787", token=os.environ["FALCON_TOKEN"])

Values are the same model classes; errors are the same exception classes (the service sends the
CLI's JSON error shape, whose ``type`` names the class), so ``except NoAvailableClusterError``
works with either. What only a service can refuse raises ``ServiceError`` (``.http_status``,
``.type``: ``Unauthorized``, ``Forbidden``, ``NotFound``, ``Stopping``, ...); a request the
service finds malformed raises ``ValueError``, as the fabric does for bad arguments; a service
that cannot be reached raises ``ServiceUnavailableError`` (an ``OSError`` too).

Differences from the fabric, by the nature of a service (docs/serve.md):
- ``get_cluster_status`` answers from the service's probe cache (kept fresh by its health loop),
  without probing; ``select_cluster`` never decides on a probe older than the service's
  ``serve.max_probe_age_s``.
- ``stream_pod_log`` reads the service's line stream as the caller iterates (the service reads
  Cloud Logging ahead of the caller only as far as the connection buffers allow).
- ``export_pod_logs`` starts the export on the service and polls its progress every
  ``poll_interval`` seconds; ``progress`` sees the ranks' latest counts at each poll.
"""

from __future__ import annotations

import http.client
import json
import queue
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Mapping, Optional, Union

from ._errors import _CLASSES, FalconError
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
    WorkloadStatus,
)

__all__ = ["Client", "ServiceError", "ServiceUnavailableError", "ServiceLogStream"]


class ServiceError(FalconError):
    """The service refused a request for a reason of its own (not a layer error): ``.type`` is
    its error type (``Unauthorized``, ``Forbidden``, ``NotFound``, ``Stopping``, ...) and
    ``.http_status`` the HTTP status."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.type: str = str(self.details.get("type", ""))
        self.http_status: int = int(self.details.get("http_status", 0))


class ServiceUnavailableError(ServiceError, OSError):
    """The service could not be reached, or broke off an answer."""


def _known(cls: Any, data: Mapping[str, Any]) -> Any:
    """cls.from_dict over the fields cls knows: the service adds fields of its own (ids, ages)."""
    fields = cls.__dataclass_fields__
    return cls.from_dict({k: v for k, v in data.items() if k in fields})


def _error_from(status: int, body: bytes) -> Exception:
    try:
        error = json.loads(body.decode("utf-8", "replace"))["error"]
        type_name = str(error.get("type", ""))
        message = str(error.get("message", ""))
        details = {k: v for k, v in error.items() if k not in ("type", "message")}
    except (ValueError, KeyError, TypeError, AttributeError):
        text = body.decode("utf-8", "replace").strip()[:200]
        return ServiceError(
            f"HTTP {status} from the falcon service: {text or 'no body'}",
            {"type": "HttpError", "http_status": status},
        )
    cls = _CLASSES.get(type_name)
    if cls is not None and cls is not FalconError:
        return cls(message, details)
    if status == 400:
        return ValueError(message)
    details.update({"type": type_name, "http_status": status})
    return ServiceError(message, details)


class ServiceLogStream:
    """The lines of one rank from the service, read as the caller iterates. ``close()`` (or
    leaving a ``with`` block, or breaking out of a for loop and dropping the stream) ends the
    request; the service stops reading Cloud Logging for it."""

    def __init__(self, connection: http.client.HTTPConnection,
                 response: http.client.HTTPResponse) -> None:
        self._connection: Optional[http.client.HTTPConnection] = connection
        self._response = response

    def __iter__(self) -> "ServiceLogStream":
        return self

    def __next__(self) -> str:
        if self._connection is None:
            raise StopIteration
        try:
            line = self._response.readline()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise ServiceUnavailableError(f"the falcon service broke off a log stream: {e}",
                                          {"type": "Disconnected"}) from e
        if not line:
            self.close()
            raise StopIteration
        return line.decode("utf-8", "replace").rstrip("\n")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    @property
    def closed(self) -> bool:
        return self._connection is None

    def __enter__(self) -> "ServiceLogStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class Client:
    """The facade's calls through a `falcon serve` at ``url`` (``http://host:port`` or
    ``https://...``). ``token``: a bearer token of the service's tokens file (``read`` for
    reads, ``operate`` for submit, cancel and export); none is needed on loopback by default.
    ``timeout``: seconds to wait for an answer to start (a follow waits as long as lines come).
    ``cafile``: a CA bundle to trust for https (else the system's). Safe to use from many
    threads: every call has its own connection."""

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = 120.0,
                 cafile: Optional[str] = None) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"Client url: expected http://host:port or https://host:port, "
                             f"got {url!r}")
        self.url = url.rstrip("/")
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port
        self._token = token
        self._timeout = timeout
        self._ssl = ssl.create_default_context(cafile=cafile) if self._https else None

    def __repr__(self) -> str:
        return f"falcon.Client({self.url!r})"

    # --- HTTP

    def _connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _open(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None,
              body: Optional[Any] = None, timeout: Optional[float] = -1.0
              ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        if query:
            pairs = [(k, _query_value(v)) for k, v in query.items() if v is not None]
            if pairs:
                path += "?" + urllib.parse.urlencode(pairs)
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection = self._connect(self._timeout if timeout == -1.0 else timeout)
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as e:
            connection.close()
            raise ServiceUnavailableError(
                f"cannot reach the falcon service at {self.url} ({method} {path.split('?')[0]}): "
                f"{e}", {"type": "Unreachable"}) from e
        if response.status >= 400:
            payload = response.read()
            connection.close()
            raise _error_from(response.status, payload)
        return connection, response

    def _call(self, method: str, path: str, query: Optional[Mapping[str, Any]] = None,
              body: Optional[Any] = None) -> Any:
        connection, response = self._open(method, path, query, body)
        try:
            payload = response.read()
        except (OSError, http.client.HTTPException) as e:
            raise ServiceUnavailableError(f"the falcon service broke off its answer to {method} "
                                          f"{path.split('?')[0]}: {e}",
                                          {"type": "Disconnected"}) from e
        finally:
            connection.close()
        try:
            return json.loads(payload)
        except ValueError as e:
            raise ServiceError(f"the falcon service answered {method} {path.split('?')[0]} with "
                               f"a body that is not JSON", {"type": "BadAnswer"}) from e

    # --- Clusters

    def list_clusters(self) -> list[ClusterConfig]:
        """Every registered cluster, in file order."""
        return [ClusterConfig.from_dict(c["config"]) for c in self._call("GET", "/v1/clusters")["clusters"]]

    def get_cluster(self, cluster: str) -> ClusterConfig:
        """Raises UnknownClusterError (also a KeyError)."""
        return ClusterConfig.from_dict(self._call("GET", _path("clusters", cluster))["config"])

    def get_cluster_status(self, cluster: str) -> ClusterProbeResult:
        """The service's latest probe of ``cluster`` (its health loop keeps it fresh). Raises
        UnknownClusterError, and ServiceError (type ``NotProbedYet``) before the first probe."""
        probe = self._call("GET", _path("clusters", cluster), {"limit": 1})["probe"]
        if probe is None:
            raise ServiceError(f"the falcon service has not probed cluster {cluster!r} yet",
                               {"type": "NotProbedYet", "cluster": cluster})
        return ClusterProbeResult.from_dict(probe["result"])

    def select_cluster(self, accelerator_type: str) -> ClusterSelection:
        """The best cluster for ``accelerator_type``, decided on probes no older than the
        service's serve.max_probe_age_s. Raises NoAvailableClusterError (.probe_results)."""
        answer = self._call("POST", "/v1/select",
                            body={"accelerator_type": accelerator_type, "explain": True})
        return _known(ClusterSelection, answer)  # type: ignore[no-any-return]

    # --- Workloads

    def submit_workload(self, cluster: str, spec: WorkloadSpec) -> WorkloadHandle:
        """Raises UnknownClusterError, WorkloadSubmitError (.stderr), ValueError for a spec the
        service refuses before calling xpk."""
        if not isinstance(spec, WorkloadSpec):
            raise TypeError(f"spec: expected falcon.WorkloadSpec, got {type(spec).__name__}")
        spec_dict = {k: v for k, v in spec.to_dict().items() if v is not None}
        answer = self._call("POST", "/v1/workloads", body={"cluster": cluster, "spec": spec_dict})
        return WorkloadHandle.from_dict(answer["handle"])

    def select_and_submit(self, spec: WorkloadSpec) -> tuple[WorkloadHandle, ClusterSelection]:
        """The service selects the best cluster for ``spec.accelerator_type`` (from its probe
        cache) and submits there, recording the submission with that decision. Returns the
        handle and the decision. Raises NoAvailableClusterError, and as submit_workload."""
        if not isinstance(spec, WorkloadSpec):
            raise TypeError(f"spec: expected falcon.WorkloadSpec, got {type(spec).__name__}")
        spec_dict = {k: v for k, v in spec.to_dict().items() if v is not None}
        answer = self._call("POST", "/v1/workloads", body={"spec": spec_dict})
        return (WorkloadHandle.from_dict(answer["handle"]),
                ClusterSelection.from_dict(answer["selection"]))

    def get_workload_status(self, handle: WorkloadHandle) -> WorkloadStatus:
        """Raises UnknownClusterError, WorkloadNotFoundError, XpkCommandError."""
        answer = self._call("GET", _path("workloads", handle.cluster, handle.workload_name))
        return WorkloadStatus.from_dict(answer["status"])

    def cancel_workload(self, handle: WorkloadHandle) -> bool:
        """True once deleted. Raises WorkloadNotFoundError, UnknownClusterError, XpkCommandError."""
        answer = self._call("DELETE", _path("workloads", handle.cluster, handle.workload_name))
        return bool(answer["cancelled"])

    def list_workloads(self, cluster: str,
                       state_filter: Optional[str] = None) -> list[WorkloadInfo]:
        """Every workload the cluster lists now (through xpk), optionally of one state."""
        answer = self._call("GET", "/v1/workloads",
                            {"live": "true", "cluster": cluster, "state": state_filter})
        for entry in answer["clusters"]:
            if entry.get("error"):
                raise _error_from(502, json.dumps({"error": entry["error"]}).encode())
            return [WorkloadInfo.from_dict(w) for w in entry["workloads"]]
        return []

    def handle_for(self, cluster: str, workload_name: str) -> WorkloadHandle:
        """A handle for a workload known by name (namespace and submission time from the
        service's records). Raises UnknownClusterError, WorkloadNotFoundError."""
        return WorkloadHandle.from_dict(
            self._call("GET", _path("workloads", cluster, workload_name))["handle"])

    # --- Logs

    def stream_pod_log(self, handle: WorkloadHandle, rank: int,
                       filter: Optional[LogFilter] = None, slice: int = 0) -> ServiceLogStream:
        """The lines of worker ``rank`` of slice ``slice``, read as the caller iterates.
        ``filter.since``, ``filter.grep`` and ``filter.tail_lines`` apply; ``filter.ranks`` is
        ignored. Raises LogRetrievalError (a failure before the first line) at once."""
        connection, response = self._open(
            "GET", _path("workloads", handle.cluster, handle.workload_name, "logs"),
            _log_query(rank, slice, filter), timeout=self._timeout)
        return ServiceLogStream(connection, response)

    def follow_pod_log_until_finished(
        self, handle: WorkloadHandle, rank: int, on_line: Callable[[str], object],
        filter: Optional[LogFilter] = None, slice: int = 0, *,
        interrupted: Optional[Callable[[], bool]] = None,
    ) -> None:
        """``falcon job logs --follow`` through the service: ``on_line`` gets each line as it
        arrives, until the workload is done (the service decides, as the fabric does) or
        ``interrupted()`` returns true (asked after each line and every second while quiet), or
        ``on_line`` raises (propagated). Ctrl-C raises KeyboardInterrupt within about a second."""
        if filter is not None and filter.tail_lines is not None:
            raise ValueError("follow_pod_log_until_finished: filter.tail_lines is not supported "
                             "with a follow")
        query = _log_query(rank, slice, filter)
        query["follow"] = "true"
        connection, response = self._open(
            "GET", _path("workloads", handle.cluster, handle.workload_name, "logs"), query,
            timeout=self._timeout)
        # The answer has started: lines may be minutes apart now. A socket timeout would leave
        # http.client's response unreadable, so a thread reads with no timeout and hands chunks
        # over a small queue; this thread waits on the queue a second at a time (interrupted(),
        # Ctrl-C) and closes the connection when it leaves, which ends the reader's read.
        if connection.sock is not None:
            connection.sock.settimeout(None)
        chunks: "queue.Queue[Union[bytes, BaseException]]" = queue.Queue(maxsize=16)
        done = threading.Event()

        def read_chunks() -> None:
            while not done.is_set():
                try:
                    item: Union[bytes, BaseException] = response.read1(65536)
                except BaseException as e:  # handed to the caller's thread
                    item = e
                while not done.is_set():
                    try:
                        chunks.put(item, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if not isinstance(item, bytes) or not item:
                    return

        reader = threading.Thread(target=read_chunks, name="falcon-follow", daemon=True)
        reader.start()
        try:
            pending = b""
            while True:
                if interrupted is not None and interrupted():
                    return
                try:
                    chunk = chunks.get(timeout=1.0)
                except queue.Empty:
                    continue  # quiet: ask interrupted() again
                if isinstance(chunk, BaseException):
                    raise ServiceUnavailableError(
                        f"the falcon service broke off a follow of {handle.workload_name}: "
                        f"{chunk}", {"type": "Disconnected"}) from chunk
                if not chunk:
                    if pending:
                        on_line(pending.decode("utf-8", "replace"))
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    on_line(line.decode("utf-8", "replace"))
                    if interrupted is not None and interrupted():
                        return
        finally:
            done.set()
            if connection.sock is not None:
                try:
                    connection.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            connection.close()

    def export_pod_logs(
        self, handle: WorkloadHandle, filter: Optional[LogFilter], gcs_dest: str,
        slice: int = 0, progress: Optional[Callable[[ExportProgress], object]] = None,
        via: str = "read", keep_staging: bool = False, *, poll_interval: float = 1.0,
    ) -> LogExportResult:
        """Archives the ranks of ``filter.ranks`` (None: every rank found) to
        ``<gcs_dest>/rank-<N>.log`` on the service, by ``via`` (``auto``, ``read``, ``copy`` or
        ``sink``: docs/log-export.md), polling its progress every ``poll_interval`` seconds
        (while it waits in the service's queue too); ``progress`` gets the counts of each rank
        that changed. Raises the export's error (LogRetrievalError, ...) when it failed."""
        body: dict[str, Any] = {"cluster": handle.cluster, "workload": handle.workload_name,
                                "dest": gcs_dest, "slice": slice, "via": via,
                                "keep_staging": keep_staging}
        if filter is not None:
            if filter.ranks is not None:
                body["ranks"] = list(filter.ranks)
            if filter.since is not None:
                body["since"] = filter.since
        started = self._call("POST", "/v1/exports", body=body)
        export_id = started["id"]
        seen: dict[str, Any] = {}
        while True:
            record = self._call("GET", _path("exports", str(export_id)))
            if progress is not None and isinstance(record.get("progress"), dict):
                for rank, counts in sorted(record["progress"].items(), key=lambda kv: int(kv[0])):
                    if seen.get(rank) != counts:
                        seen[rank] = counts
                        progress(ExportProgress(rank=int(rank), lines=counts["lines"],
                                                bytes=counts["bytes"], done=counts["done"]))
            if record["state"] == "done":
                return LogExportResult.from_dict(record["result"])
            if record["state"] == "failed":
                result = record.get("result")
                error = result.get("error") if isinstance(result, dict) else None
                if isinstance(error, dict):
                    raise _error_from(502, json.dumps({"error": error}).encode())
                raise ServiceError(f"export {export_id} failed: {result}",
                                   {"type": "ExportFailed"})
            time.sleep(poll_interval)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _path(*segments: str) -> str:
    return "/v1/" + "/".join(urllib.parse.quote(s, safe="") for s in segments)


def _log_query(rank: int, slice: int, filter: Optional[LogFilter]) -> dict[str, Any]:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank: expected an int >= 0, got {rank!r}")
    query: dict[str, Any] = {"rank": rank, "slice": slice}
    if filter is not None:
        query["since"] = filter.since
        query["grep"] = filter.grep
        query["tail"] = filter.tail_lines
    return query
