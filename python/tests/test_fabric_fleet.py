"""The spec's acceptance rows of ClusterFabric, through Python, against the local fleet
(real fleet-xpk subprocesses, real HTTP to the fleet's Logging and Storage endpoints).
docs/acceptance.md maps each row to its test here and to the C++ one."""

from __future__ import annotations

import datetime

import falcon
import pytest
from falcon import LogFilter, WorkloadSpec, WorkloadState


def spec_named(name: str, accelerator: str = "tpu-v4-64", **kw: object) -> WorkloadSpec:
    return WorkloadSpec(name=name, docker_image="gcr.io/falcon/bench:1",
                        command=["python3", "train.py", "--steps", "20"],
                        accelerator_type=accelerator, **kw)  # type: ignore[arg-type]


def fleet_workload(fleet, cluster_id: str, name: str) -> dict:
    """The fleet's record of workload `name` on GKE cluster `cluster_id` (what xpk was given)."""
    state = fleet.request("GET", "/fleet/v1/state")
    for c in state["clusters"]:
        if c["cluster_id"] == cluster_id:
            for w in c["workloads"]:
                if w["name"] == name:
                    return w
    raise AssertionError(f"workload {name} is not on cluster {cluster_id}")


# --- 6. ClusterFabric (integration)


def test_initialisation_creates_every_module_from_the_repos_yaml_path(fleet, fabric):
    clusters = fabric.list_clusters()
    assert [c.name for c in clusters] == ["tpu-a", "tpu-down", "tpu-b", "gpu-x"]
    assert clusters[3].cluster_id == "gpu-cluster-x"
    assert clusters[2].accelerator_slots == [falcon.AcceleratorSlot("v4-64", "tpu", 2)]
    assert fabric.config().source_path == str(fleet.repos_path)
    assert fabric.get_cluster("tpu-b").zone == "us-central2-b"
    assert fabric.get_cluster_status("tpu-b").reachable
    assert len(fabric.list_workloads("tpu-a")) == 4
    assert list(fabric.stream_pod_log(fabric.handle_for("tpu-b", "nothing-here"), 0)) == []


def test_construction_fails_fast_on_a_bad_configuration(tmp_path):
    with pytest.raises(falcon.ClusterConfigError) as e:
        falcon.ClusterFabric(str(tmp_path / "missing.yaml"))
    assert e.value.problems and "missing.yaml" in e.value.problems[0]
    bad = tmp_path / "repos.yaml"
    bad.write_text("clusters:\n  c1:\n    provider: gke\n")
    with pytest.raises(falcon.ClusterConfigError) as e:
        falcon.check_config(str(bad))
    text = "\n".join(e.value.problems)
    for field in ("project", "zone", "cluster_id"):
        assert field in text


def test_select_submit_and_poll_status_end_to_end(fleet, fabric):
    selection = fabric.select_cluster("tpu-v4-64")
    assert selection.selected_cluster == "tpu-b"
    assert selection.candidates == ["tpu-a", "tpu-down", "tpu-b"]
    assert [r.cluster for r in selection.probe_results] == ["tpu-a", "tpu-down", "tpu-b"]
    assert selection.probe_results[0].queue_depth == 3  # full: 3 > max 2
    assert not selection.probe_results[1].reachable
    assert selection.reason == "selected tpu-b: reachable, queue_depth=0 <= max=5"

    handle = fabric.submit_workload(selection.selected_cluster, spec_named("e2e-train"))
    assert (handle.workload_name, handle.cluster, handle.namespace) == (
        "e2e-train", "tpu-b", "default")
    assert handle.submitted_at.endswith("Z")

    status = fabric.get_workload_status(handle)
    assert status.state is WorkloadState.RUNNING and status.start_time and not status.end_time
    fleet.advance(101)
    status = fabric.get_workload_status(handle)
    assert status.state is WorkloadState.COMPLETED
    assert status.state.is_terminal and status.end_time and status.exit_code == 0

    lines = list(fabric.stream_pod_log(handle, 0))
    assert "XPK Start" in lines[0] and lines[-1] == "EXIT_CODE=0"
    assert len(list(fabric.stream_pod_log(handle, 0, LogFilter(tail_lines=2)))) == 2

    exported = fabric.export_pod_logs(handle, LogFilter(), "gs://falcon-logs/sessions/s-1/logs/")
    assert exported.workload_name == "e2e-train" and exported.cluster == "tpu-b"
    assert exported.exported_ranks == [0, 1, 2, 3]
    assert exported.gcs_uris[2] == "gs://falcon-logs/sessions/s-1/logs/rank-2.log"

    assert fabric.cancel_workload(handle) is True
    with pytest.raises(falcon.WorkloadNotFoundError):
        fabric.get_workload_status(handle)


def test_select_and_submit_places_the_workload_and_returns_the_decision(fleet, fabric):
    handle, selection = fabric.select_and_submit(spec_named("placed-run"))
    assert selection.selected_cluster == "tpu-b" == handle.cluster
    assert selection.selection_id > 0
    assert handle.workload_name == "placed-run"
    assert fabric.get_workload_status(handle).state is WorkloadState.RUNNING
    with pytest.raises(falcon.NoAvailableClusterError):
        fabric.select_and_submit(spec_named("nowhere", "tpu-v9-1"))


def test_cluster_names_resolve_through_the_registry(fleet, fabric):
    handle = fabric.submit_workload("gpu-x", spec_named("gpu-bench", "a100-40gb-8"))
    assert handle.cluster == "gpu-x"
    assert fleet_workload(fleet, "gpu-cluster-x", "gpu-bench")["device_class"] == "gpu"
    assert [w.name for w in fabric.list_workloads("gpu-x")] == ["gpu-bench"]
    assert "gpu-bench" not in [w.name for w in fabric.list_workloads("tpu-b")]
    assert fabric.handle_for("gpu-x", "gpu-bench") == handle


def test_unknown_cluster_names_raise_unknown_cluster_error_a_key_error(fabric):
    ghost = falcon.WorkloadHandle("w", "no-such-cluster", "default", "2026-04-13T00:00:00.000Z")
    calls = [
        lambda: fabric.submit_workload("no-such-cluster", spec_named("w")),
        lambda: fabric.get_cluster_status("no-such-cluster"),
        lambda: fabric.list_workloads("no-such-cluster"),
        lambda: fabric.get_workload_status(ghost),
        lambda: fabric.cancel_workload(ghost),
        lambda: fabric.stream_pod_log(ghost, 0),
        lambda: fabric.export_pod_logs(ghost, None, "gs://b/x"),
        lambda: fabric.handle_for("no-such-cluster", "w"),
        lambda: fabric.get_cluster("no-such-cluster"),
    ]
    for call in calls:
        with pytest.raises(KeyError) as e:  # the spec's KeyError
            call()
        assert isinstance(e.value, falcon.UnknownClusterError)
        assert e.value.cluster == "no-such-cluster"
        assert "registered: tpu-a, tpu-down, tpu-b, gpu-x" in str(e.value)


def test_errors_from_inside_pass_through_unchanged(fleet, fabric):
    with pytest.raises(falcon.NoAvailableClusterError) as none:
        fabric.select_cluster("tpu-v9-9999")
    assert "no cluster supports tpu-v9-9999" in str(none.value)
    assert none.value.probe_results == []

    fabric.submit_workload("tpu-b", spec_named("twice"))
    with pytest.raises(falcon.WorkloadSubmitError) as submit:
        fabric.submit_workload("tpu-b", spec_named("twice"))
    assert submit.value.workload == "twice" and submit.value.cluster == "tpu-b"
    assert submit.value.stderr != ""
    assert isinstance(submit.value, falcon.XpkCommandError)

    with pytest.raises(falcon.WorkloadNotFoundError) as missing:
        fabric.cancel_workload(fabric.handle_for("tpu-b", "never-submitted"))
    assert (missing.value.cluster, missing.value.workload) == ("tpu-b", "never-submitted")

    with pytest.raises(falcon.XpkCommandError) as xpk:
        fabric.list_workloads("tpu-down")
    assert xpk.value.exit_code not in (None, 0) and "i/o timeout" in xpk.value.stderr

    fleet.add_fault({"route": "logging.list", "times": 1, "status": 403})
    with pytest.raises(falcon.LogRetrievalError) as logs:
        list(fabric.stream_pod_log(fabric.handle_for("tpu-b", "twice"), 0))
    assert logs.value.http_status == 403 and logs.value.status == "PERMISSION_DENIED"


def test_reload_keeps_the_old_configuration_when_the_new_one_is_broken(fleet, fabric):
    original = fleet.repos_path.read_text()
    fleet.repos_path.write_text("clusters: [oops\n")
    with pytest.raises(falcon.ClusterConfigError):
        fabric.reload()
    assert len(fabric.list_clusters()) == 4
    fleet.repos_path.write_text(original)
    fabric.reload()
    assert len(fabric.list_clusters()) == 4


# --- 3. ClusterSelector rows, through the facade


def test_selection_skips_a_full_queue_and_an_unreachable_cluster_and_records_all(fabric):
    s = fabric.select_cluster("v4-64")  # either spelling
    by_name = {r.cluster: r for r in s.probe_results}
    assert by_name["tpu-a"].reachable and by_name["tpu-a"].queue_depth == 3
    assert by_name["tpu-a"].running_count == 1
    assert not by_name["tpu-down"].reachable and by_name["tpu-down"].error
    assert by_name["tpu-down"].queue_depth is None
    assert by_name["tpu-b"].queue_depth == 0 and by_name["tpu-b"].running_count == 0
    assert s.selected_cluster == "tpu-b" and s.decided_at.endswith("Z")


def test_all_candidates_failing_raises_with_every_probe_result(fleet, fabric):
    # tpu-b full too: two of eight run (its capacity), six wait: queue_depth 6 > max 5.
    for i in range(8):
        fabric.submit_workload("tpu-b", spec_named(f"fill-{i}"))
    with pytest.raises(falcon.NoAvailableClusterError) as e:
        fabric.select_cluster("tpu-v4-64")
    assert [r.cluster for r in e.value.probe_results] == ["tpu-a", "tpu-down", "tpu-b"]
    assert e.value.accelerator == "tpu-v4-64"
    assert e.value.probe_results[2].queue_depth == 6


def test_gpu_selection_and_cluster_status(fabric):
    s = fabric.select_cluster("a100-40gb-8")
    assert s.selected_cluster == "gpu-x" and s.candidates == ["gpu-x"]
    status = fabric.get_cluster_status("tpu-down")
    assert status.reachable is False and status.error and status.probed_at.endswith("Z")


# --- 4. XpkWorkloadManager rows, through the facade


def test_submit_passes_env_and_extra_args_and_defaults_the_namespace(fleet, fabric):
    spec = spec_named("env-run", env={"FLEET_DURATION_S": "30"}, extra_args=["--num-slices=2"])
    handle = fabric.submit_workload("tpu-b", spec)
    assert handle.namespace == "default"  # namespace None: the cluster's default
    record = fleet_workload(fleet, "tpu-b", "env-run")
    assert record["num_slices"] == 2 and record["namespace"] == "default"
    assert record["env"]["FLEET_DURATION_S"] == "30" and record["tpu_type_flag"]
    assert record["command"] == "python3 train.py --steps 20"
    fleet.advance(31)  # FLEET_DURATION_S reached the workload: it ends after 30 s, not 100
    assert fabric.get_workload_status(handle).state is WorkloadState.COMPLETED


def test_list_workloads_filters_by_state(fleet, fabric):
    queued = fabric.list_workloads("tpu-a", "QUEUED")
    assert [w.state for w in queued] == [WorkloadState.QUEUED] * 3
    running = fabric.list_workloads("tpu-a", WorkloadState.RUNNING)
    assert [w.name for w in running] == ["long-run"]


def test_a_failed_workload_reports_the_exit_code_its_worker_printed(fleet, fabric):
    handle = fabric.submit_workload("tpu-b", spec_named("fails", env={"FLEET_EXIT_CODE": "3"}))
    fleet.advance(101)
    status = fabric.get_workload_status(handle)
    assert status.state is WorkloadState.FAILED and status.exit_code == 3


def test_warm_up_gives_one_result_per_cluster(fabric):
    results = fabric.warm_up()
    assert sorted(r.cluster for r in results) == ["gpu-x", "tpu-a", "tpu-b", "tpu-down"]
    assert all(isinstance(r, falcon.WarmupResult) for r in results)
    assert {r.cluster: r.ok for r in results}["tpu-b"] is True


# --- 5. CloudLogRetriever rows, through the facade


def finished(fleet, fabric, name: str) -> falcon.WorkloadHandle:
    handle = fabric.submit_workload("tpu-b", spec_named(name))
    fleet.advance(101)
    return handle


def test_grep_is_applied_by_the_server(fleet, fabric):
    handle = finished(fleet, fabric, "grep-run")
    lines = list(fabric.stream_pod_log(handle, 0, LogFilter(grep='textPayload:"EXIT_CODE"')))
    assert lines == ["EXIT_CODE=0"]


def test_since_drops_earlier_lines(fleet, fabric):
    handle = finished(fleet, fabric, "since-run")
    start = fabric.get_workload_status(handle).start_time
    assert start is not None
    since = datetime.datetime.fromisoformat(start.replace("Z", "+00:00")) + datetime.timedelta(
        seconds=50)
    every = list(fabric.stream_pod_log(handle, 0))
    late = list(fabric.stream_pod_log(
        handle, 0, LogFilter(since=since.isoformat().replace("+00:00", "Z"))))
    assert 0 < len(late) < len(every) and late == every[-len(late):]


def test_export_of_rank_zero_only(fleet, fabric):
    handle = finished(fleet, fabric, "export-run")
    events: list[falcon.ExportProgress] = []
    result = fabric.export_pod_logs(handle, LogFilter(ranks=[0]), "gs://falcon-logs/r0",
                                    progress=events.append)
    assert result.exported_ranks == [0] and list(result.gcs_uris) == [0]
    assert result.gcs_uris[0] == "gs://falcon-logs/r0/rank-0.log"
    assert events and events[-1].done and events[-1].rank == 0 and events[-1].lines > 0


def test_export_takes_a_path_and_refuses_an_unknown_one(fleet, fabric):
    handle = finished(fleet, fabric, "export-via")
    result = fabric.export_pod_logs(handle, LogFilter(ranks=[0]), "gs://falcon-logs/via-read",
                                    via="read")
    assert result.exported_ranks == [0]
    # auto without an archive or gcp.log_copy reads too.
    assert fabric.export_pod_logs(handle, LogFilter(ranks=[0]), "gs://falcon-logs/via-auto",
                                  via="auto").exported_ranks == [0]
    with pytest.raises(ValueError, match="via must be"):
        fabric.export_pod_logs(handle, LogFilter(), "gs://falcon-logs/x", via="fast")
    # copy without gcp.log_copy_staging says what to set, before anything is copied.
    with pytest.raises(falcon.LogRetrievalError, match="gcp.log_copy_staging"):
        fabric.export_pod_logs(handle, LogFilter(), "gs://falcon-logs/x", via="copy")


def test_bad_log_arguments_raise_before_any_read(fleet, fabric):
    handle = finished(fleet, fabric, "bad-args")
    before = fleet.requests("logging.list")
    with pytest.raises(falcon.InvalidValueError) as e:
        fabric.stream_pod_log(handle, -1)
    assert e.value.field == "rank" and isinstance(e.value, ValueError)
    with pytest.raises(falcon.InvalidValueError) as e:
        fabric.stream_pod_log(handle, 0, slice=2147483647)
    assert e.value.field == "slice"
    with pytest.raises(falcon.InvalidValueError, match="out of range"):
        fabric.stream_pod_log(handle, 0, falcon.LogFilter(since="9999-12-31T23:59:59Z"))
    assert fleet.requests("logging.list") == before


# --- The rest of the facade


def test_config_and_check_config_give_the_settings_in_force(fleet, fabric):
    config = fabric.config()
    assert isinstance(config, falcon.FabricConfig)
    assert config == falcon.check_config(str(fleet.repos_path))
    assert config.gcp["logging_endpoint"] == fleet.url
    assert config.xpk["command_timeout_s"] == 60 and config.xpk["binary"].endswith("fleet-xpk")
    assert [c.name for c in config.clusters] == [c.name for c in fabric.list_clusters()]
    assert falcon.FabricConfig.from_dict(config.to_dict()) == config


def test_doctor_reports_every_check_without_raising(fabric):
    checks = fabric.doctor()
    assert checks and all(isinstance(c, falcon.DoctorCheck) for c in checks)
    assert all(c.status in ("ok", "warn", "fail") for c in checks)
    by_name = {c.name: c for c in checks}
    assert by_name["cluster tpu-b"].status == "ok"
    assert by_name["cluster tpu-down"].status == "fail" and by_name["cluster tpu-down"].fix


def test_fence_check_passes_the_current_epoch_and_raises_once_a_newer_one_exists(
        fleet, monkeypatch) -> None:
    """Storage fencing (issue 27): falcon.fence.check() as a copy of a managed workload calls it
    before a checkpoint write, against the fleet's Cloud Storage."""
    import urllib.request

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fleet.url)
    monkeypatch.setenv("FALCON_ACCESS_TOKEN_FILE", str(fleet.dir / "token"))
    monkeypatch.delenv("FALCON_FENCE_URI", raising=False)
    monkeypatch.delenv("FALCON_FENCE_EPOCH", raising=False)
    assert falcon.fence.check() == 0  # started without a fence: nothing to read

    req = urllib.request.Request(
        fleet.url + "/upload/storage/v1/b/fence-bkt/o?uploadType=media&name=f/train/epoch",
        data=b"2\n", method="POST", headers={"Authorization": "Bearer " + fleet.token})
    urllib.request.urlopen(req, timeout=60).read()

    monkeypatch.setenv("FALCON_FENCE_URI", "gs://fence-bkt/f/train/epoch")
    monkeypatch.setenv("FALCON_FENCE_EPOCH", "2")
    assert falcon.fence.check() == 2
    monkeypatch.setenv("FALCON_FENCE_EPOCH", "1")
    with pytest.raises(falcon.FencedError) as e:
        falcon.fence.check()
    assert (e.value.uri, e.value.epoch, e.value.current) == ("gs://fence-bkt/f/train/epoch", 1, 2)
    assert falcon.fence.check("gs://fence-bkt/f/train/epoch", 5) == 2
    with pytest.raises(ValueError):
        falcon.fence.check("s3://x/y", 1)
    monkeypatch.setenv("FALCON_FENCE_EPOCH", "one")
    with pytest.raises(ValueError, match="FALCON_FENCE_EPOCH"):
        falcon.fence.check()
