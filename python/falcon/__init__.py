"""falcon: the Falcon cluster layer for a Python business layer.

The C++ ClusterFabric in-process (``falcon._falcon``), with the spec's value types as frozen
dataclasses and its errors as exceptions with attributes::

    import falcon

    fabric = falcon.ClusterFabric("repos.yaml")
    choice = fabric.select_cluster("tpu-v4-64")
    spec = falcon.WorkloadSpec(name="llama-8b-bench", docker_image="gcr.io/p/img:1",
                               command=["python3", "train.py"], accelerator_type="tpu-v4-64")
    handle = fabric.submit_workload(choice.selected_cluster, spec)

See examples/business_layer.py for the whole flow.
"""

from ._errors import (
    ClusterConfigError,
    ClusterUnreachableError,
    CommandStartError,
    FalconError,
    FencedError,
    InvalidValueError,
    InvalidWorkloadSpecError,
    LogRetrievalError,
    NoAvailableClusterError,
    ServiceError,
    ServiceUnavailableError,
    StateStoreError,
    UnknownClusterError,
    WorkloadExistsError,
    WorkloadNotCreatedError,
    WorkloadNotFoundError,
    WorkloadSubmitError,
    XpkCommandError,
)
from . import fence
from ._client import Client
from ._fabric import ClusterFabric, LogStream, check_config
from ._falcon import __version__
from ._model import (
    AcceleratorSlot,
    ClusterConfig,
    AcceleratorCapacity,
    ClusterProbeResult,
    CandidateScore,
    ClusterSelection,
    ClusterSignals,
    SignalTerm,
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

__all__ = [
    "__version__",
    "ClusterFabric",
    "Client",
    "ServiceError",
    "FencedError",
    "fence",
    "ServiceUnavailableError",
    "LogStream",
    "check_config",
    "WorkloadState",
    "AcceleratorSlot",
    "ClusterConfig",
    "AcceleratorCapacity",
    "ClusterProbeResult",
    "CandidateScore",
    "ClusterSelection",
    "ClusterSignals",
    "SignalTerm",
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
    "FalconError",
    "ClusterConfigError",
    "UnknownClusterError",
    "NoAvailableClusterError",
    "ClusterUnreachableError",
    "XpkCommandError",
    "WorkloadSubmitError",
    "WorkloadExistsError",
    "WorkloadNotCreatedError",
    "InvalidValueError",
    "InvalidWorkloadSpecError",
    "WorkloadNotFoundError",
    "LogRetrievalError",
    "CommandStartError",
    "StateStoreError",
]

# Shown as falcon.X (in tracebacks and reprs of the classes), where they are meant to be used.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type):
        _obj.__module__ = __name__
del _name, _obj
