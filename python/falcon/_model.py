"""The cluster layer's value types, with the spec's field names (include/falcon/model.h).

Every type is a frozen dataclass: compare with ==, print with repr, convert with
``to_dict()`` / ``from_dict()``. ``to_dict()`` gives plain Python values (lists, dicts, str,
int, bool, None; ``WorkloadState`` as its string); ``from_dict()`` accepts what ``to_dict()``
gives and the layer's JSON (``json.loads`` of ``falcon --json`` output), and raises
``ValueError`` naming the class and field for a missing field, an unknown field or a wrong type.
Times are ISO 8601 UTC strings with milliseconds and ``Z`` (``2026-04-13T08:00:00.000Z``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, TypeVar

__all__ = [
    "WorkloadState",
    "AcceleratorSlot",
    "ClusterConfig",
    "ClusterProbeResult",
    "ClusterSignals",
    "SignalTerm",
    "CandidateScore",
    "ClusterSelection",
    "WorkloadSpec",
    "WorkloadHandle",
    "WorkloadStatus",
    "WorkloadInfo",
    "LogFilter",
    "LogExportResult",
    "WarmupResult",
    "DoctorCheck",
    "ExportProgress",
    "FabricConfig",
]


class WorkloadState(str, enum.Enum):
    """A workload's state as the layer reports it (xpk's own words are mapped onto these).

    A ``str`` enum: ``WorkloadState.RUNNING == "RUNNING"`` is true.
    """

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_terminal(self) -> bool:
        """True for COMPLETED and FAILED."""
        return self in (WorkloadState.COMPLETED, WorkloadState.FAILED)

    def __str__(self) -> str:
        return self.value


# --- field readers: each names the class and the field it rejects.


class _Reader:
    def __init__(self, cls: str, data: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        if not isinstance(data, Mapping):
            raise ValueError(f"{cls}.from_dict: expected a dict, got {type(data).__name__}")
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ValueError(f"{cls}.from_dict: unknown field(s) {', '.join(map(str, unknown))}")
        self.cls = cls
        self.data = data

    def _bad(self, key: str, want: str, value: Any) -> ValueError:
        return ValueError(f"{self.cls}.{key}: expected {want}, got {value!r}")

    def _get(self, key: str, default: Any) -> Any:
        if key in self.data:
            return self.data[key]
        if default is _REQUIRED:
            raise ValueError(f"{self.cls}.from_dict: missing field {key}")
        return default() if callable(default) else default

    def text(self, key: str, default: Any = None) -> str:
        v = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(v, str):
            raise self._bad(key, "a string", v)
        return v

    def opt_text(self, key: str) -> Optional[str]:
        v = self._get(key, None)
        if v is not None and not isinstance(v, str):
            raise self._bad(key, "a string or None", v)
        return v

    def num(self, key: str, default: Any = None) -> int:
        v = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(v, int) or isinstance(v, bool):
            raise self._bad(key, "an int", v)
        return v

    def opt_num(self, key: str) -> Optional[int]:
        v = self._get(key, None)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise self._bad(key, "an int or None", v)
        return v

    def opt_real(self, key: str) -> Optional[float]:
        v = self._get(key, None)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool)):
            raise self._bad(key, "a number or None", v)
        return None if v is None else float(v)

    def real(self, key: str, default: float) -> float:
        v = self.opt_real(key)
        return default if v is None else v

    def one(self, key: str, cls: Any) -> Any:
        v = self._get(key, _REQUIRED)
        return v if isinstance(v, cls) else cls.from_dict(v)

    def flag(self, key: str) -> bool:
        v = self._get(key, _REQUIRED)
        if not isinstance(v, bool):
            raise self._bad(key, "a bool", v)
        return v

    def str_list(self, key: str, default: Any = None) -> list[str]:
        v = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
            raise self._bad(key, "a list of strings", v)
        return list(v)

    def int_list(self, key: str, optional: bool = False) -> Optional[list[int]]:
        v = self._get(key, None if optional else _REQUIRED)
        if v is None and optional:
            return None
        if not isinstance(v, (list, tuple)) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in v
        ):
            raise self._bad(key, "a list of ints", v)
        return list(v)

    def str_dict(self, key: str, default: Any = None) -> dict[str, str]:
        v = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(v, Mapping) or not all(
            isinstance(k, str) and isinstance(x, str) for k, x in v.items()
        ):
            raise self._bad(key, "a dict of strings to strings", v)
        return dict(v)

    def state(self, key: str) -> WorkloadState:
        v = self._get(key, _REQUIRED)
        try:
            return WorkloadState(v)
        except ValueError:
            raise self._bad(key, "one of " + ", ".join(s.value for s in WorkloadState), v) from None

    def items(self, key: str, cls: Any) -> list[Any]:
        v = self._get(key, _REQUIRED)
        if not isinstance(v, (list, tuple)):
            raise self._bad(key, f"a list of {cls.__name__}", v)
        return [x if isinstance(x, cls) else cls.from_dict(x) for x in v]


_REQUIRED = object()
T = TypeVar("T")


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(x) for x in value]
    if isinstance(value, dict):
        return {k: _plain(x) for k, x in value.items()}
    return value


class _Value:
    """to_dict() for every model dataclass."""

    def to_dict(self) -> dict[str, Any]:
        """The value as plain Python data, with the spec's field names."""
        return {name: _plain(getattr(self, name)) for name in self.__dataclass_fields__}  # type: ignore[attr-defined]


@dataclass(frozen=True)
class AcceleratorSlot(_Value):
    """An accelerator type a cluster offers, and how much the layer prefers it there."""

    type: str  #: canonical (xpk's) name: "v4-64", "h100-80gb-8"
    device_class: str  #: "tpu" | "gpu" | "cpu": picks xpk's --tpu-type or --device-type
    priority: int = 1  #: 1 is the most preferred; sorted ascending

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AcceleratorSlot":
        r = _Reader(cls.__name__, d, ("type", "device_class", "priority"))
        dc = r.text("device_class")
        if dc not in ("tpu", "gpu", "cpu"):
            raise ValueError(f"AcceleratorSlot.device_class: expected tpu, gpu or cpu, got {dc!r}")
        return cls(type=r.text("type"), device_class=dc, priority=r.num("priority", 1))


@dataclass(frozen=True)
class ClusterConfig(_Value):
    """One cluster of repos.yaml (``accelerator_slots`` is the YAML key ``accelerator_types``)."""

    name: str
    provider: str
    project: str
    zone: str  #: what xpk gets as --zone: a zone, or a region
    cluster_id: str  #: the GKE cluster's name
    accelerator_slots: list[AcceleratorSlot] = field(default_factory=list)
    default_namespace: str = "default"
    gcs_bucket: str = ""
    max_queue_depth: int = 5
    probe_timeout_s: int = 15
    labels: dict[str, str] = field(default_factory=dict)
    location: str = ""  #: the GKE cluster's region or zone (gcloud --location); defaults to zone
    #: this cluster's ``probe.backend`` ("xpk" or "kube"); None: the file's global one
    probe_backend: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ClusterConfig":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        zone = r.text("zone")
        return cls(
            name=r.text("name"),
            provider=r.text("provider"),
            project=r.text("project"),
            zone=zone,
            cluster_id=r.text("cluster_id"),
            accelerator_slots=r.items("accelerator_slots", AcceleratorSlot),
            default_namespace=r.text("default_namespace", "default"),
            gcs_bucket=r.text("gcs_bucket", ""),
            max_queue_depth=r.num("max_queue_depth", 5),
            probe_timeout_s=r.num("probe_timeout_s", 15),
            labels=r.str_dict("labels", dict),
            location=r.text("location", zone),
            probe_backend=_probe_backend(r.opt_text("probe_backend")),
        )


def _probe_backend(value: Optional[str]) -> Optional[str]:
    if value is not None and value not in ("xpk", "kube"):
        raise ValueError(f"ClusterConfig.probe_backend: must be 'xpk' or 'kube', got {value!r}")
    return value


@dataclass(frozen=True)
class AcceleratorCapacity(_Value):
    """Free quota of one Kueue ResourceFlavor of a cluster, in chips (docs/selection.md)."""

    flavor: str
    device_type: str = ""  #: the xpk type the flavor is named for ("v4-64"); "" if none
    accelerator: str = ""  #: the GKE accelerator label it stands for
    resource: str = ""  #: "google.com/tpu" | "nvidia.com/gpu"
    nominal: float = 0.0  #: nominalQuota over the ClusterQueue's resource groups
    used: float = 0.0  #: the larger of usage and reservation
    largest_free_block: Optional[float] = None  #: None when the cluster does not say
    #: its largest block, free or not (the largest slice it can ever hold); None: not said
    largest_block: Optional[float] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "AcceleratorCapacity":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            flavor=r.text("flavor"),
            device_type=r.text("device_type", ""),
            accelerator=r.text("accelerator", ""),
            resource=r.text("resource", ""),
            nominal=r.real("nominal", 0.0),
            used=r.real("used", 0.0),
            largest_free_block=r.opt_real("largest_free_block"),
            largest_block=r.opt_real("largest_block"),
        )


@dataclass(frozen=True)
class ClusterProbeResult(_Value):
    """The outcome of probing one cluster (``xpk workload list``)."""

    cluster: str
    reachable: bool
    queue_depth: Optional[int]  #: QUEUED workloads; None when unreachable
    running_count: Optional[int]  #: RUNNING workloads; None when unreachable
    error: Optional[str]  #: why it is unreachable; None when reachable
    probed_at: str
    #: free quota per Kueue flavor (the kube probe backend); empty when not known
    capacity: list[AcceleratorCapacity] = field(default_factory=list)
    #: seconds its recent workloads waited from quota to admission (Kueue's admission checks,
    #: e.g. node provisioning; the kube probe backend); None when not known
    admission_delay_s: Optional[float] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ClusterProbeResult":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            cluster=r.text("cluster"),
            reachable=r.flag("reachable"),
            queue_depth=r.opt_num("queue_depth"),
            running_count=r.opt_num("running_count"),
            error=r.opt_text("error"),
            probed_at=r.text("probed_at"),
            capacity=r.items("capacity", AcceleratorCapacity) if "capacity" in d else [],
            admission_delay_s=r.opt_real("admission_delay_s"),
        )


@dataclass(frozen=True)
class ClusterSignals(_Value):
    """The signals a candidate was judged on (docs/selection.md); None: not known."""

    queue_depth: Optional[int] = None
    running: Optional[int] = None
    drain_per_min: Optional[float] = None  #: workloads admitted per minute over the window
    recent_wait_s: Optional[float] = None  #: mean admission wait of the window's admissions
    #: the probe's recent wait from quota to admission (admission checks), seconds
    admission_delay_s: Optional[float] = None
    health: Optional[float] = None  #: share of successful probes and submits, 0..1
    health_samples: int = 0
    latency_ms: Optional[float] = None  #: mean probe duration over the window
    slice_chips: Optional[float] = None  #: the request's slice, in chips
    free_chips: Optional[float] = None  #: free chips of the matching Kueue flavors
    nominal_chips: Optional[float] = None  #: their nominal quota
    largest_free_block: Optional[float] = None  #: the largest block one slice can take whole
    fragmentation: Optional[float] = None  #: 1 - largest free block / free chips
    #: their largest block, free or not: a larger slice never fits there
    largest_block: Optional[float] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ClusterSignals":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            queue_depth=r.opt_num("queue_depth"),
            running=r.opt_num("running"),
            drain_per_min=r.opt_real("drain_per_min"),
            recent_wait_s=r.opt_real("recent_wait_s"),
            admission_delay_s=r.opt_real("admission_delay_s"),
            health=r.opt_real("health"),
            health_samples=r.num("health_samples", 0),
            latency_ms=r.opt_real("latency_ms"),
            slice_chips=r.opt_real("slice_chips"),
            free_chips=r.opt_real("free_chips"),
            nominal_chips=r.opt_real("nominal_chips"),
            largest_free_block=r.opt_real("largest_free_block"),
            fragmentation=r.opt_real("fragmentation"),
            largest_block=r.opt_real("largest_block"),
        )


@dataclass(frozen=True)
class SignalTerm(_Value):
    """One signal's part in a candidate's ranking: value, normalized (0..1), weight, contribution."""

    signal: str
    value: Optional[float] = None
    normalized: Optional[float] = None
    weight: float = 0.0
    contribution: float = 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SignalTerm":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            signal=r.text("signal"),
            value=r.opt_real("value"),
            normalized=r.opt_real("normalized"),
            weight=r.real("weight", 0.0),
            contribution=r.real("contribution", 0.0),
        )


@dataclass(frozen=True)
class CandidateScore(_Value):
    """How one candidate fared in a decision: signals, terms, total, rank and verdict."""

    cluster: str
    priority: int = 1
    max_queue_depth: int = 5
    eligible: bool = False
    skip_reason: Optional[str] = None  #: why it was not eligible
    signals: ClusterSignals = field(default_factory=ClusterSignals)
    terms: list[SignalTerm] = field(default_factory=list)
    #: score (higher wins) or predicted wait in seconds (least-wait, lower wins); None otherwise
    total: Optional[float] = None
    rank: int = 0  #: 1: selected; 0: not eligible
    verdict: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CandidateScore":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            cluster=r.text("cluster"),
            priority=r.num("priority", 1),
            max_queue_depth=r.num("max_queue_depth", 5),
            eligible=r.flag("eligible"),
            skip_reason=r.opt_text("skip_reason"),
            signals=r.one("signals", ClusterSignals) if "signals" in d else ClusterSignals(),
            terms=r.items("terms", SignalTerm) if "terms" in d else [],
            total=r.opt_real("total"),
            rank=r.num("rank", 0),
            verdict=r.text("verdict", ""),
        )


@dataclass(frozen=True)
class ClusterSelection(_Value):
    """The full record of one cluster choice, for audit."""

    selected_cluster: str
    accelerator: str
    candidates: list[str]  #: in priority order
    probe_results: list[ClusterProbeResult]
    reason: str  #: "selected <name>: reachable, queue_depth=<N> <= max=<M>"
    decided_at: str
    #: the decision's id in the state store (`falcon cluster select` prints it; GET
    #: /v1/selections/{id} on a service); 0 when it was not stored
    selection_id: int = 0
    #: the policy that decided ("priority" | "score" | "least-wait"; docs/selection.md)
    policy: str = ""
    #: every candidate's signals, terms and verdict, in candidate order (--explain)
    scores: list[CandidateScore] = field(default_factory=list)
    #: why a decision made with a state store open is not in it (a full disk, a database
    #: restart); empty when it was recorded
    not_recorded: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ClusterSelection":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            selected_cluster=r.text("selected_cluster"),
            accelerator=r.text("accelerator"),
            candidates=r.str_list("candidates"),
            probe_results=r.items("probe_results", ClusterProbeResult),
            reason=r.text("reason"),
            decided_at=r.text("decided_at"),
            selection_id=r.num("selection_id", 0),
            policy=r.text("policy", ""),
            scores=r.items("scores", CandidateScore) if "scores" in d else [],
            not_recorded=r.text("not_recorded", ""),
        )


@dataclass(frozen=True)
class WorkloadSpec(_Value):
    """What the business layer asks to run."""

    name: str  #: [a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters (xpk's rule)
    docker_image: str
    command: list[str]  #: argv; joined shell-quoted into xpk's --command
    accelerator_type: str  #: either spelling: "tpu-v4-64" or "v4-64"
    priority: str = "medium"  #: very-low | low | medium | high | very-high
    env: dict[str, str] = field(default_factory=dict)
    namespace: Optional[str] = None  #: None: the cluster's default namespace
    extra_args: list[str] = field(default_factory=list)  #: appended verbatim to xpk's create

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WorkloadSpec":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            name=r.text("name"),
            docker_image=r.text("docker_image"),
            command=r.str_list("command"),
            accelerator_type=r.text("accelerator_type"),
            priority=r.text("priority", "medium"),
            env=r.str_dict("env", dict),
            namespace=r.opt_text("namespace"),
            extra_args=r.str_list("extra_args", list),
        )


@dataclass(frozen=True)
class WorkloadHandle(_Value):
    """Identifies a submitted workload for later calls."""

    workload_name: str
    cluster: str
    namespace: str
    submitted_at: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WorkloadHandle":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            workload_name=r.text("workload_name"),
            cluster=r.text("cluster"),
            namespace=r.text("namespace"),
            submitted_at=r.text("submitted_at"),
        )


@dataclass(frozen=True)
class WorkloadStatus(_Value):
    """A workload's state and times, from ``xpk workload list``."""

    workload_name: str
    state: WorkloadState
    start_time: Optional[str] = None
    end_time: Optional[str] = None
    #: 0 once COMPLETED; once FAILED the code the failing worker printed (None when not in the
    #: logs); else None.
    exit_code: Optional[int] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WorkloadStatus":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            workload_name=r.text("workload_name"),
            state=r.state("state"),
            start_time=r.opt_text("start_time"),
            end_time=r.opt_text("end_time"),
            exit_code=r.opt_num("exit_code"),
        )


@dataclass(frozen=True)
class WorkloadInfo(_Value):
    """One row of ``xpk workload list``, summarised."""

    name: str
    state: WorkloadState
    accelerator_type: str  #: from falcon's submission record; "" when not known
    start_time: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WorkloadInfo":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            name=r.text("name"),
            state=r.state("state"),
            accelerator_type=r.text("accelerator_type"),
            start_time=r.opt_text("start_time"),
        )


@dataclass(frozen=True)
class LogFilter(_Value):
    """Which log lines to read."""

    ranks: Optional[list[int]] = None  #: None: every rank; [0]: rank 0 only
    since: Optional[str] = None  #: RFC 3339; only entries at or after it
    grep: Optional[str] = None  #: a Cloud Logging query expression, run server-side
    tail_lines: Optional[int] = None  #: only the last N lines

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LogFilter":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            ranks=r.int_list("ranks", optional=True),
            since=r.opt_text("since"),
            grep=r.opt_text("grep"),
            tail_lines=r.opt_num("tail_lines"),
        )


@dataclass(frozen=True)
class LogExportResult(_Value):
    """Where an export put each rank's log."""

    workload_name: str
    cluster: str
    exported_ranks: list[int]
    gcs_uris: dict[int, str]  #: {rank: "gs://.../rank-0.log"}
    exported_at: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LogExportResult":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        raw = r._get("gcs_uris", _REQUIRED)
        uris: dict[int, str] = {}
        if not isinstance(raw, Mapping):
            raise r._bad("gcs_uris", "a dict of rank to URI", raw)
        for k, v in raw.items():
            try:
                rank = int(k)
            except (TypeError, ValueError):
                raise r._bad("gcs_uris", "rank keys (int or digits)", k) from None
            if not isinstance(v, str):
                raise r._bad("gcs_uris", "URI strings", v)
            uris[rank] = v
        return cls(
            workload_name=r.text("workload_name"),
            cluster=r.text("cluster"),
            exported_ranks=r.int_list("exported_ranks") or [],
            gcs_uris=uris,
            exported_at=r.text("exported_at"),
        )


@dataclass(frozen=True)
class WarmupResult(_Value):
    """One cluster's credential warm-up (``gcloud container clusters get-credentials``)."""

    cluster: str
    ok: bool
    error: Optional[str]  #: why it failed; None when ok
    elapsed_ms: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "WarmupResult":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            cluster=r.text("cluster"),
            ok=r.flag("ok"),
            error=r.opt_text("error"),
            elapsed_ms=r.num("elapsed_ms"),
        )


@dataclass(frozen=True)
class DoctorCheck(_Value):
    """One line of ``falcon doctor``."""

    name: str
    status: str  #: "ok" | "warn" | "fail"
    detail: str
    fix: Optional[str]  #: how to fix it; None when ok

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DoctorCheck":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(
            name=r.text("name"), status=r.text("status"), detail=r.text("detail"), fix=r.opt_text("fix")
        )


@dataclass(frozen=True)
class ExportProgress(_Value):
    """One export progress event: lines and bytes of a rank so far; done once it is finished."""

    rank: int
    lines: int
    bytes: int
    done: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ExportProgress":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        return cls(rank=r.num("rank"), lines=r.num("lines"), bytes=r.num("bytes"), done=r.flag("done"))


@dataclass(frozen=True)
class FabricConfig(_Value):
    """The configuration in force: the clusters and the layer's settings (plain dicts)."""

    source_path: str
    clusters: list[ClusterConfig]
    xpk: dict[str, Any]
    gcp: dict[str, Any]
    selection: dict[str, Any]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FabricConfig":
        r = _Reader(cls.__name__, d, tuple(cls.__dataclass_fields__))
        out: dict[str, dict[str, Any]] = {}
        for key in ("xpk", "gcp", "selection"):
            v = r._get(key, _REQUIRED)
            if not isinstance(v, Mapping):
                raise r._bad(key, "a dict", v)
            out[key] = dict(v)
        return cls(
            source_path=r.text("source_path"),
            clusters=r.items("clusters", ClusterConfig),
            xpk=out["xpk"],
            gcp=out["gcp"],
            selection=out["selection"],
        )
