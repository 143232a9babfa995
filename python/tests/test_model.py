"""The model types as Python values: the spec's field names, equality, repr, to_dict/from_dict
(in the layer's JSON form, as the C++ side reads and writes it), WorkloadState as an enum, and
the exception classes with their attributes. No fleet needed."""

from __future__ import annotations

import dataclasses
import enum
import json

import falcon
import pytest
from falcon import (
    ClusterConfig,
    ClusterProbeResult,
    ClusterSelection,
    LogExportResult,
    LogFilter,
    WorkloadHandle,
    WorkloadInfo,
    WorkloadSpec,
    WorkloadState,
    WorkloadStatus,
)

SPEC_FIELDS = {
    "AcceleratorSlot": ["type", "device_class", "priority"],
    "ClusterConfig": ["name", "provider", "project", "zone", "cluster_id", "accelerator_slots",
                      "default_namespace", "gcs_bucket", "max_queue_depth", "probe_timeout_s",
                      "labels", "location", "probe_backend"],
    "ClusterProbeResult": ["cluster", "reachable", "queue_depth", "running_count", "error",
                           "probed_at", "capacity", "admission_delay_s"],
    "ClusterSelection": ["selected_cluster", "accelerator", "candidates", "probe_results",
                         "reason", "decided_at", "selection_id", "policy", "scores",
                         "not_recorded"],
    "WorkloadSpec": ["name", "docker_image", "command", "accelerator_type", "priority", "env",
                     "namespace", "extra_args"],
    "WorkloadHandle": ["workload_name", "cluster", "namespace", "submitted_at"],
    "WorkloadStatus": ["workload_name", "state", "start_time", "end_time", "exit_code"],
    "WorkloadInfo": ["name", "state", "accelerator_type", "start_time"],
    "LogFilter": ["ranks", "since", "grep", "tail_lines"],
    "LogExportResult": ["workload_name", "cluster", "exported_ranks", "gcs_uris", "exported_at"],
}


def test_every_model_type_has_the_spec_field_names_in_order():
    for name, fields in SPEC_FIELDS.items():
        cls = getattr(falcon, name)
        assert dataclasses.is_dataclass(cls)
        assert [f.name for f in dataclasses.fields(cls)] == fields, name


def test_values_are_frozen_comparable_and_printable():
    spec = WorkloadSpec(name="llama-8b-bench", docker_image="gcr.io/p/img:1",
                        command=["python3", "train.py"], accelerator_type="tpu-v4-64")
    same = WorkloadSpec(name="llama-8b-bench", docker_image="gcr.io/p/img:1",
                        command=["python3", "train.py"], accelerator_type="tpu-v4-64")
    assert spec == same and spec != dataclasses.replace(spec, priority="high")
    assert spec.priority == "medium" and spec.namespace is None and spec.env == {}
    assert repr(spec).startswith("WorkloadSpec(name='llama-8b-bench', docker_image=")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]


def test_workload_state_is_an_enum_and_a_string():
    assert issubclass(WorkloadState, enum.Enum)
    assert [s.value for s in WorkloadState] == ["QUEUED", "RUNNING", "COMPLETED", "FAILED",
                                                "UNKNOWN"]
    assert WorkloadState.RUNNING == "RUNNING" and str(WorkloadState.FAILED) == "FAILED"
    assert WorkloadState.COMPLETED.is_terminal and not WorkloadState.QUEUED.is_terminal
    status = WorkloadStatus.from_dict({"workload_name": "w", "state": "FAILED",
                                       "start_time": None, "end_time": None, "exit_code": 3})
    assert status.state is WorkloadState.FAILED
    assert status.to_dict()["state"] == "FAILED"
    with pytest.raises(ValueError, match="WorkloadStatus.state"):
        WorkloadStatus.from_dict({"workload_name": "w", "state": "DONE"})


SAMPLES = [
    ClusterConfig(name="tpu-v4-prod", provider="gke", project="p", zone="us-central2-b",
                  cluster_id="c", accelerator_slots=[falcon.AcceleratorSlot("v4-64", "tpu", 1)],
                  gcs_bucket="gs://b", labels={"env": "prod"}, location="us-central2-b",
                  probe_backend="kube"),
    ClusterProbeResult("c", True, 0, 2, None, "2026-04-13T08:00:00.000Z"),
    ClusterSelection("c", "tpu-v4-64", ["a", "c"],
                     [ClusterProbeResult("a", False, None, None, "timed out",
                                         "2026-04-13T08:00:00.000Z")],
                     "selected c: reachable, queue_depth=0 <= max=5", "2026-04-13T08:00:00.000Z"),
    WorkloadSpec("w", "img", ["a", "b c"], "v4-64", "high", {"K": "V"}, "ns", ["--x"]),
    WorkloadHandle("w", "c", "default", "2026-04-13T08:00:00.000Z"),
    WorkloadStatus("w", WorkloadState.COMPLETED, "t1", "t2", 0),
    WorkloadInfo("w", WorkloadState.QUEUED, "tpu-v4-64", None),
    LogFilter(ranks=[0, 3], since="2026-04-13T00:00:00Z", grep="textPayload:step", tail_lines=5),
    LogExportResult("w", "c", [0, 1], {0: "gs://b/rank-0.log", 1: "gs://b/rank-1.log"}, "t"),
]


@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: type(v).__name__)
def test_to_dict_and_from_dict_round_trip_also_through_json(value):
    d = value.to_dict()
    assert type(value).from_dict(d) == value
    assert type(value).from_dict(json.loads(json.dumps(d))) == value  # rank keys become "0"


def test_from_dict_names_the_class_and_field_it_rejects():
    with pytest.raises(ValueError, match="WorkloadHandle.from_dict: missing field cluster"):
        WorkloadHandle.from_dict({"workload_name": "w", "namespace": "n", "submitted_at": ""})
    with pytest.raises(ValueError, match="LogFilter.tail_lines: expected an int"):
        LogFilter.from_dict({"tail_lines": "10"})
    with pytest.raises(ValueError, match="unknown field"):
        LogFilter.from_dict({"rank": [0]})
    with pytest.raises(ValueError, match="ClusterConfig.probe_backend: must be 'xpk' or 'kube'"):
        ClusterConfig.from_dict({"name": "c", "provider": "gke", "project": "p", "zone": "z",
                                 "cluster_id": "c", "accelerator_slots": [],
                                 "probe_backend": "kubectl"})
    with pytest.raises(ValueError, match="device_class"):
        falcon.AcceleratorSlot.from_dict({"type": "x", "device_class": "fpga", "priority": 1})


def test_arguments_of_the_wrong_type_raise_type_error():
    # A dict where a WorkloadSpec belongs is refused before anything reaches the C++ side.
    with pytest.raises(TypeError, match="falcon.WorkloadSpec"):
        falcon.ClusterFabric.submit_workload(object.__new__(falcon.ClusterFabric), "c",
                                             {"name": "w"})  # type: ignore[arg-type]


def test_every_error_type_of_the_layer_has_its_class():
    from falcon import _falcon
    from falcon._errors import _CLASSES

    types = _falcon._error_types()
    assert "StateStoreError" in types and "WorkloadExistsError" in types
    assert [t for t in types if t not in _CLASSES] == []


def test_exception_classes_carry_their_attributes():
    from falcon._errors import _from_native

    e = _from_native("NoAvailableClusterError", "no cluster for x", json.dumps({
        "accelerator": "x", "probe_results": [SAMPLES[1].to_dict()]}))
    assert isinstance(e, falcon.NoAvailableClusterError) and isinstance(e, falcon.FalconError)
    assert e.probe_results == [SAMPLES[1]] and e.accelerator == "x"
    assert str(e) == "no cluster for x"

    e = _from_native("WorkloadSubmitError", "create failed", json.dumps({
        "cluster": "c", "exit_code": 1, "stderr": "[XPK] boom", "workload": "w"}))
    assert isinstance(e, falcon.XpkCommandError)
    assert (e.cluster, e.exit_code, e.stderr, e.workload) == ("c", 1, "[XPK] boom", "w")

    e = _from_native("UnknownClusterError", "unknown cluster 'z'", json.dumps({"cluster": "z"}))
    assert isinstance(e, KeyError) and e.cluster == "z" and str(e) == "unknown cluster 'z'"

    e = _from_native("LogRetrievalError", "denied", json.dumps({"http_status": 403,
                                                                "status": "PERMISSION_DENIED"}))
    assert (e.http_status, e.status) == (403, "PERMISSION_DENIED")

    e = _from_native("ClusterConfigError", "bad", json.dumps({"problems": ["f:1:1: x: y"]}))
    assert e.problems == ["f:1:1: x: y"]
    for name in ("ClusterUnreachableError", "WorkloadNotFoundError", "CommandStartError",
                 "StateStoreError", "XpkCommandError", "WorkloadExistsError",
                 "WorkloadNotCreatedError", "InvalidWorkloadSpecError"):
        assert type(_from_native(name, "m", "{}")).__name__ == name

    # The submit failures are WorkloadSubmitErrors by cause; a refused spec is a ValueError too.
    for name in ("WorkloadExistsError", "WorkloadNotCreatedError", "InvalidWorkloadSpecError"):
        e = _from_native(name, "m", json.dumps({"cluster": "c", "workload": "w"}))
        assert isinstance(e, falcon.WorkloadSubmitError) and e.workload == "w"
    assert isinstance(_from_native("InvalidWorkloadSpecError", "m", "{}"), ValueError)
    e = _from_native("InvalidValueError", "rank: -1 is not...", json.dumps({"field": "rank"}))
    assert isinstance(e, ValueError) and isinstance(e, falcon.FalconError) and e.field == "rank"
    assert not isinstance(_from_native("WorkloadExistsError", "m", "{}"), ValueError)


def test_probe_capacity_and_capacity_signals_read_back():
    p = falcon.ClusterProbeResult.from_dict({
        "cluster": "tpu-a", "reachable": True, "queue_depth": 0, "running_count": 1,
        "error": None, "probed_at": "2026-12-01T10:00:00.000Z",
        "capacity": [{"flavor": "1xv4-64", "device_type": "v4-64",
                      "accelerator": "tpu-v4-podslice", "resource": "google.com/tpu",
                      "nominal": 128, "used": 64, "largest_free_block": 32,
                      "largest_block": 64}]})
    assert p.capacity == [falcon.AcceleratorCapacity(
        "1xv4-64", "v4-64", "tpu-v4-podslice", "google.com/tpu", 128.0, 64.0, 32.0, 64.0)]
    assert p.admission_delay_s is None
    assert falcon.ClusterProbeResult.from_dict({
        "cluster": "tpu-a", "reachable": True, "queue_depth": 0, "running_count": 1,
        "error": None, "probed_at": "2026-12-01T10:00:00.000Z",
        "admission_delay_s": 42.5}).admission_delay_s == 42.5
    assert falcon.ClusterSignals.from_dict({"admission_delay_s": 60}).admission_delay_s == 60.0
    # Without capacity (the xpk backend) the field is absent from the JSON.
    assert falcon.ClusterProbeResult.from_dict({
        "cluster": "tpu-a", "reachable": False, "queue_depth": None, "running_count": None,
        "error": "down", "probed_at": "2026-12-01T10:00:00.000Z"}).capacity == []
    s = falcon.ClusterSignals.from_dict({"slice_chips": 32, "free_chips": 64,
                                         "largest_free_block": 16, "fragmentation": 0.75})
    assert (s.slice_chips, s.fragmentation) == (32.0, 0.75)
    with pytest.raises(ValueError, match="AcceleratorCapacity.nominal"):
        falcon.AcceleratorCapacity.from_dict({"flavor": "f", "nominal": "lots"})
