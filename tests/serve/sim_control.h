// SimControl: a ControlPlane over simulated clusters for the supervisor's tests (workloads by
// cluster and state, reachability, scripted submit failures), recording every submit and
// cancel in order.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "falcon/errors.h"
#include "falcon/workload_manager.h"
#include "serve/api_server.h"
#include "serve/supervisor.h"

namespace falcon::testing {

class SimControl final : public ControlPlane {
 public:
  struct Workload {
    std::string state = "QUEUED";
    std::optional<int> exit_code;
    WorkloadSpec spec;
  };
  struct Cluster {
    bool reachable = true;
    std::map<std::string, Workload> workloads;
  };

  mutable std::mutex mutex;
  std::vector<std::string> order = {"tpu-a", "tpu-b", "tpu-c"};
  std::map<std::string, Cluster> sim = {{"tpu-a", {}}, {"tpu-b", {}}, {"tpu-c", {}}};
  std::vector<std::pair<std::string, std::string>> submits;  // (cluster, name)
  // Each submit's selection_id, by (cluster, workload); decisions made so far (their ids).
  std::map<std::pair<std::string, std::string>, std::int64_t> links;
  std::int64_t decisions = 0;
  std::vector<std::pair<std::string, std::string>> cancels;
  std::vector<std::string> breaker_failures;
  std::map<std::string, int> cancel_calls;  // by cluster, answered or not
  int failing_submits = 0;                  // the next N submits fail (transient)
  int store_refusals = 0;  // the next N submits fail as a store that cannot take their intent
  std::map<std::string, int> failing_on;  // the next N submits to a cluster fail (transient)
  bool create_then_fail = false;    // a failing submit makes the workload all the same (a timeout)
  std::function<void()> on_status;  // called by status() (a slow log read), before it answers
  std::string cut_after_failed_create;  // this cluster stops answering after a failed create
  bool by_queue = false;                // select_excluding: fewest QUEUED first
  // A submit to an unreachable cluster fails as xpk does when its existence check cannot reach
  // the cluster: WorkloadNotCreatedError (else a plain WorkloadSubmitError).
  bool not_created_when_unreachable = false;
  std::string dies_on_create;  // this cluster stops answering when a create reaches it
  // The first `hold_submits` submits wait for each other (all in flight together) before they
  // land, up to 5 s; max_in_flight is the most submits seen in flight at once.
  // Storage fencing: with `fence`, advance_fence hands out epochs 1, 2, ... per managed name;
  // the next `fence_failures` advances fail as a Cloud Storage that cannot be written.
  bool fence = false;
  int fence_failures = 0;
  std::map<std::string, std::int64_t> fence_epochs;
  int hold_submits = 0;
  int submits_arrived = 0;
  int in_flight = 0;
  int max_in_flight = 0;
  std::condition_variable held;
  std::vector<std::string> ops;  // "submit <cluster>/<name>", "cancel <cluster>/<name>" in order
  std::vector<PlacementHints> hints_seen;  // what each decision was told
  // The supervisor's lists of these clusters fail though the clusters run on (a blip of the
  // supervisor's own calls); what the health loop's cache holds is `probes`.
  std::set<std::string> lists_fail;
  std::map<std::string, ProbeSnapshot> probes;
  // What a failing submit says: xpk's create output, which mentions an unrelated "already
  // exists" (its RoleBinding) on every create.
  std::string failing_message =
      "xpk workload create failed: [XPK] RoleBinding: xpk-sa-pod-reader-binding already exists. "
      "Skipping its creation. ... Unable to connect to the server: net/http: TLS handshake "
      "timeout";

  void set(const std::string& c, const std::string& name, const std::string& state,
           std::optional<int> exit_code = std::nullopt) {
    std::lock_guard lock(mutex);
    sim.at(c).workloads[name].state = state;
    sim.at(c).workloads[name].exit_code = exit_code;
  }
  void reach(const std::string& c, bool reachable) {
    std::lock_guard lock(mutex);
    sim.at(c).reachable = reachable;
  }
  // Live copies of `prefix`* across reachable and unreachable clusters (not finished).
  int live_copies(const std::string& prefix) const {
    std::lock_guard lock(mutex);
    int n = 0;
    for (const auto& [c, cl] : sim) {
      for (const auto& [name, w] : cl.workloads) {
        if (name.rfind(prefix, 0) == 0 && !is_terminal_state(w.state)) ++n;
      }
    }
    return n;
  }
  std::optional<WorkloadSpec> spec_of(const std::string& c, const std::string& name) const {
    std::lock_guard lock(mutex);
    const auto& w = sim.at(c).workloads;
    if (!w.contains(name)) return std::nullopt;
    return w.at(name).spec;
  }

  std::vector<ClusterEntry> list_clusters() override { return {}; }
  ClusterConfig cluster_config(const std::string&) const override {
    throw std::logic_error("not used");
  }
  std::optional<ProbeSnapshot> cached_probe(const std::string& c) const override {
    std::lock_guard lock(mutex);
    const auto it = probes.find(c);
    if (it == probes.end()) return std::nullopt;
    return it->second;
  }
  Decision select_explained(const std::string& accelerator) override {
    return select_excluding(accelerator, {});
  }
  using ControlPlane::select_excluding;
  // The first reachable cluster in `order`, not excluded; with `by_queue`, the one with the
  // fewest QUEUED workloads (the hints' in-flight placements counted), then `order`, as the
  // priority policy ranks equal priorities. A cluster of hints.no_room only when no other can.
  Decision select_excluding(const std::string& accelerator,
                            const std::vector<std::string>& excluded,
                            const PlacementHints& hints) override {
    std::lock_guard lock(mutex);
    hints_seen.push_back(hints);
    for (const bool with_full : {false, true}) {
      std::string best;
      int best_queue = 0;
      for (const std::string& c : order) {
        if (std::find(excluded.begin(), excluded.end(), c) != excluded.end()) continue;
        if (!sim.at(c).reachable) continue;
        if (!with_full && hints.no_room.contains(c)) continue;
        int queue = 0;
        if (by_queue) {
          for (const auto& [name, w] : sim.at(c).workloads) queue += w.state == "QUEUED";
          if (const auto it = hints.in_flight.find(c); it != hints.in_flight.end()) {
            queue += it->second;
          }
        }
        if (best.empty() || queue < best_queue) {
          best = c;
          best_queue = queue;
        }
      }
      if (best.empty()) continue;
      Decision o;
      o.selection.selected_cluster = best;
      o.selection.selection_id = ++decisions;
      // The winner's part in it: its QUEUED workloads (with the caller's in flight).
      CandidateScore winner;
      winner.cluster = best;
      winner.eligible = true;
      winner.rank = 1;
      int queued = 0;
      for (const auto& [name, w] : sim.at(best).workloads) queued += w.state == "QUEUED";
      if (const auto it = hints.in_flight.find(best); it != hints.in_flight.end()) {
        queued += it->second;
      }
      winner.signals.queue_depth = queued;
      o.selection.scores = {winner};
      return o;
    }
    throw NoAvailableClusterError("every cluster is excluded or unreachable", accelerator, {});
  }
  std::optional<FenceTicket> advance_fence(const std::string& name) override {
    std::lock_guard lock(mutex);
    if (!fence) return std::nullopt;
    if (fence_failures > 0) {
      --fence_failures;
      throw LogRetrievalError("upload of gs://fence/" + name + "/epoch: 503 UNAVAILABLE", 503);
    }
    return FenceTicket{"gs://fence/" + name + "/epoch", ++fence_epochs[name]};
  }
  void record_cluster_failure(const std::string& c) override {
    std::lock_guard lock(mutex);
    breaker_failures.push_back(c);
  }
  Submission submit(const SubmitRequest& request) override {
    const std::string& c = request.cluster;
    const WorkloadSpec& spec = request.spec;
    std::unique_lock lock(mutex);
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
    if (++submits_arrived <= hold_submits) {
      held.notify_all();
      held.wait_for(lock, std::chrono::seconds(5), [&] { return submits_arrived >= hold_submits; });
    }
    struct Landed {
      int& n;
      ~Landed() { --n; }
    } landed{in_flight};
    if (store_refusals > 0) {
      --store_refusals;
      throw StateStoreError("postgresql", "postgresql://db/f",
                            "record the submission of workload '" + spec.name + "'",
                            "the database system is starting up");
    }
    if (failing_submits > 0 || failing_on[c] > 0) {
      --(failing_submits > 0 ? failing_submits : failing_on[c]);
      if (create_then_fail) sim.at(c).workloads[spec.name].spec = spec;
      if (cut_after_failed_create == c) sim.at(c).reachable = false;
      throw WorkloadSubmitError(failing_message, c, spec.name, 1, "");
    }
    auto& cl = sim.at(c);
    if (c == dies_on_create) cl.reachable = false;
    if (!cl.reachable && not_created_when_unreachable) {
      throw WorkloadNotCreatedError(
          "xpk workload create failed before its create step (nothing was created): [XPK] Task "
          "Check if Workload Already Exists failed with 1: Unable to connect to the server",
          c, spec.name, 1, "");
    }
    if (!cl.reachable) throw WorkloadSubmitError("Unable to connect", c, spec.name, 1, "");
    if (cl.workloads.contains(spec.name)) {
      // The fabric's words for a duplicate (XpkWorkloadManager::submit).
      throw WorkloadExistsError("workload '" + spec.name + "' already exists on cluster '" + c +
                                    "' (xpk workload create exited 1 without replacing it)",
                                c, spec.name, 1, "");
    }
    cl.workloads[spec.name].spec = spec;
    submits.emplace_back(c, spec.name);
    links[{c, spec.name}] = request.selection_id;
    ops.push_back("submit " + c + "/" + spec.name);
    return {.handle = {spec.name, c, "default", "2026-04-13T08:00:00.000Z"}};
  }
  WorkloadHandle handle_for(const std::string& c, const std::string& w) override {
    return {w, c, "default", ""};
  }
  WorkloadStatus status(const std::string& c, const std::string& w) override {
    const WorkloadHandle h = handle_for(c, w);
    if (on_status) on_status();
    std::lock_guard lock(mutex);
    const auto& cl = sim.at(h.cluster);
    if (!cl.reachable) throw XpkCommandError("Unable to connect", h.cluster, 1, "");
    const auto it = cl.workloads.find(h.workload_name);
    if (it == cl.workloads.end()) throw WorkloadNotFoundError(h.cluster, h.workload_name);
    WorkloadStatus s;
    s.workload_name = h.workload_name;
    s.state = it->second.state;
    s.exit_code = it->second.exit_code;
    return s;
  }
  Cancellation cancel(const std::string& c, const std::string& w) override {
    const WorkloadHandle h = handle_for(c, w);
    std::lock_guard lock(mutex);
    ++cancel_calls[h.cluster];
    auto& cl = sim.at(h.cluster);
    if (!cl.reachable) throw XpkCommandError("Unable to connect", h.cluster, 1, "");
    if (cl.workloads.erase(h.workload_name) == 0) {
      throw WorkloadNotFoundError(h.cluster, h.workload_name);
    }
    cancels.emplace_back(h.cluster, h.workload_name);
    ops.push_back("cancel " + h.cluster + "/" + h.workload_name);
    return {h, true};
  }
  std::vector<WorkloadInfo> list_workloads(const std::string& c,
                                           const std::optional<std::string>&) override {
    std::lock_guard lock(mutex);
    const auto& cl = sim.at(c);
    if (!cl.reachable || lists_fail.contains(c)) {
      throw XpkCommandError("Unable to connect to the server", c, 1, "");
    }
    std::vector<WorkloadInfo> out;
    for (const auto& [name, w] : cl.workloads) out.push_back({name, w.state, "v4-64", {}});
    return out;
  }
  // What the supervisor never asks.
  ClusterSelection recorded_selection(std::int64_t) override { throw std::logic_error("not used"); }
  std::vector<Recovery> recoveries(const std::optional<std::string>&) override {
    throw std::logic_error("not used");
  }
  LogLines read_log(const WorkloadHandle&, int, const LogFilter&, int) const override {
    throw std::logic_error("not used");
  }
  void read_logs(const LogRequest&, const std::function<void(const std::string&)>&,
                 const std::function<bool()>&) override {
    throw std::logic_error("not used");
  }
  LogExportResult export_logs(const ExportRequest&, const ExportObserver&) override {
    throw std::logic_error("not used");
  }
  ConfigInfo config_info() const override { return {}; }
  ProbeCacheStats cache_stats() const override { return {}; }
  bool ready() const override { return true; }
};

}  // namespace falcon::testing
