"""The layer's errors (include/falcon/errors.h), as Python exceptions with attributes.

    FalconError
    ├── ClusterConfigError        repos.yaml is missing, malformed or invalid     .problems
    ├── InvalidValueError         a value given (name, rank, slice, time) breaks  .field
    │                             its rule (also a ValueError)
    ├── UnknownClusterError       a cluster name the registry does not know       .cluster
    │                             (also a KeyError, as the spec says)
    ├── NoAvailableClusterError   no candidate, or every candidate unreachable    .accelerator,
    │                             or full                                         .probe_results
    ├── ClusterUnreachableError   one cluster's probe timed out or failed         .cluster
    ├── XpkCommandError           an xpk command failed                           .cluster,
    │   │                                                                         .exit_code, .stderr
    │   └── WorkloadSubmitError   `xpk workload create` failed or was refused     + .workload
    │       ├── WorkloadExistsError       the name exists on the cluster (nothing created)
    │       ├── WorkloadNotCreatedError   xpk gave up before its create step (nothing created)
    │       └── InvalidWorkloadSpecError  refused before xpk ran (also a ValueError)
    ├── WorkloadNotFoundError     status/cancel of a workload the cluster lacks   .cluster, .workload
    ├── LogRetrievalError         Cloud Logging or Cloud Storage failed           .http_status, .status
    ├── CommandStartError         a binary could not be started                   .binary
    ├── StateStoreError           the state database failed                       .backend, .location,
    │                                                                             .operation, .db_message
    └── ServiceError              a `falcon serve` refused a request for a reason .type, .http_status
        │                         of its own (falcon.Client: Unauthorized, Forbidden, NotFound, ...)
        └── ServiceUnavailableError   the service could not be reached, or broke off (also an OSError)

Every error has ``.message`` (what ``str()`` gives) and ``.details`` (the extra fields as a
dict, as ``falcon --json`` prints them). Bad arguments (a malformed since, a negative rank) raise
``InvalidValueError``, a ``ValueError``.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from ._model import ClusterProbeResult

__all__ = [
    "FalconError",
    "ClusterConfigError",
    "InvalidValueError",
    "UnknownClusterError",
    "NoAvailableClusterError",
    "ClusterUnreachableError",
    "XpkCommandError",
    "WorkloadSubmitError",
    "WorkloadExistsError",
    "WorkloadNotCreatedError",
    "InvalidWorkloadSpecError",
    "WorkloadNotFoundError",
    "LogRetrievalError",
    "CommandStartError",
    "StateStoreError",
    "ServiceError",
    "ServiceUnavailableError",
]


class FalconError(Exception):
    """The root of the layer's errors."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class ClusterConfigError(FalconError):
    """repos.yaml is missing, malformed or invalid; ``problems`` lists every problem, each
    ``file:line:col: path: problem``."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.problems: list[str] = list(self.details.get("problems", []))


class InvalidValueError(FalconError, ValueError):
    """A value given (a workload or cluster name, a rank, a slice, a time) breaks its rule;
    ``field`` names the argument."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.field: str = self.details.get("field", "")


class UnknownClusterError(FalconError, KeyError):
    """A cluster name the registry does not know (the spec's KeyError)."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.cluster: str = self.details.get("cluster", "")


class NoAvailableClusterError(FalconError):
    """No cluster offers the accelerator, or every candidate is unreachable or full;
    ``probe_results`` holds every probe made (empty when there was no candidate)."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.accelerator: str = self.details.get("accelerator", "")
        self.probe_results: list[ClusterProbeResult] = [
            r if isinstance(r, ClusterProbeResult) else ClusterProbeResult.from_dict(r)
            for r in self.details.get("probe_results", [])
        ]


class ClusterUnreachableError(FalconError):
    """One cluster's probe timed out or failed."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.cluster: str = self.details.get("cluster", "")


class XpkCommandError(FalconError):
    """An xpk command failed: ``exit_code`` (None when xpk did not run or was killed) and
    ``stderr``, what xpk printed that explains the failure."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.cluster: str = self.details.get("cluster", "")
        self.exit_code: Optional[int] = self.details.get("exit_code")
        self.stderr: str = self.details.get("stderr", "")


class WorkloadSubmitError(XpkCommandError):
    """``xpk workload create`` failed, or the layer refused the spec before running it."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.workload: str = self.details.get("workload", "")


class WorkloadExistsError(WorkloadSubmitError):
    """A workload of that name exists on the cluster already; nothing was created."""


class WorkloadNotCreatedError(WorkloadSubmitError):
    """xpk gave up before its create step (the cluster did not answer its existence check, or
    its scheduling validation failed): nothing was created, so submitting again is safe."""


class InvalidWorkloadSpecError(WorkloadSubmitError, ValueError):
    """The spec was refused before xpk ran (name, priority, environment, image, command,
    accelerator, namespace): the caller's input is at fault."""


class WorkloadNotFoundError(FalconError):
    """Status or cancel of a workload the cluster does not have."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.cluster: str = self.details.get("cluster", "")
        self.workload: str = self.details.get("workload", "")


class LogRetrievalError(FalconError):
    """Cloud Logging or Cloud Storage failed: ``http_status`` (0 for transport failures) and
    ``status``, the google.rpc code name ("RESOURCE_EXHAUSTED") or ""."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.http_status: int = self.details.get("http_status", 0)
        self.status: str = self.details.get("status", "")


class CommandStartError(FalconError):
    """A binary (xpk, gcloud) could not be started."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.binary: str = self.details.get("binary", "")


class StateStoreError(FalconError):
    """The state database failed."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.backend: str = self.details.get("backend", "")
        self.location: str = self.details.get("location", "")
        self.operation: str = self.details.get("operation", "")
        self.db_message: str = self.details.get("db_message", "")


class FencedError(FalconError):
    """A newer copy of this managed workload was started (storage fencing): this copy must not
    write. ``uri`` is the fence object, ``epoch`` this copy's epoch, ``current`` the newer one."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.uri: str = self.details.get("uri", "")
        self.epoch: int = self.details.get("epoch", 0)
        self.current: int = self.details.get("current", 0)


class ServiceError(FalconError):
    """A `falcon serve` refused a request for a reason of its own (not a layer error): ``.type``
    is its error type (``Unauthorized``, ``Forbidden``, ``NotFound``, ``Stopping``, ...) and
    ``.http_status`` the HTTP status (0 when the failure was not an HTTP answer)."""

    def __init__(self, message: str, details: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message, details)
        self.type: str = str(self.details.get("type", ""))
        self.http_status: int = int(self.details.get("http_status", 0))


class ServiceUnavailableError(ServiceError, OSError):
    """The service could not be reached, or broke off an answer."""


_CLASSES: dict[str, type[FalconError]] = {
    cls.__name__: cls
    for cls in (
        FalconError,
        ClusterConfigError,
        InvalidValueError,
        UnknownClusterError,
        NoAvailableClusterError,
        ClusterUnreachableError,
        XpkCommandError,
        WorkloadSubmitError,
        WorkloadExistsError,
        WorkloadNotCreatedError,
        InvalidWorkloadSpecError,
        WorkloadNotFoundError,
        LogRetrievalError,
        CommandStartError,
        StateStoreError,
        FencedError,
    )
}


def _from_native(type_name: str, message: str, details_json: str) -> FalconError:
    """Called by the C++ module for every falcon::FalconError it sees."""
    cls = _CLASSES.get(type_name, FalconError)
    return cls(message, json.loads(details_json))


def _from_service(status: int, type_name: str, message: str, error_json: str) -> Exception:
    """Called by the C++ module for a server's error answer (``{"type", "message", ...}``) that
    the client did not turn into a layer error itself."""
    details = {k: v for k, v in json.loads(error_json).items() if k not in ("type", "message")}
    cls = _CLASSES.get(type_name)
    if cls is not None and cls is not FalconError:
        return cls(message, details)
    if status == 400:
        return ValueError(message)
    details.update({"type": type_name, "http_status": status})
    return ServiceError(message, details)


def _unreachable(message: str) -> ServiceUnavailableError:
    """Called by the C++ module when a `falcon serve` cannot be reached."""
    return ServiceUnavailableError(message, {"type": "Unreachable"})
