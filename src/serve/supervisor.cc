// The supervisor of managed workloads (include/falcon/supervisor.h, docs/self-healing.md).
#include "serve/supervisor.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/client.h"
#include "falcon/errors.h"
#include "falcon/scoring.h"
#include "falcon/workload_manager.h"
#include "serve/api_server.h"
#include "serve/prometheus_text.h"
#include "util/time_format.h"

namespace falcon {

using nlohmann::json;

namespace {

bool is_set(StoreTime t) { return t.time_since_epoch().count() != 0; }

double seconds_between(StoreTime from, StoreTime to) {
  return std::chrono::duration<double>(to - from).count();
}

std::chrono::milliseconds to_duration(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000.0)));
}

std::int64_t to_ms(StoreTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

StoreTime from_ms(std::int64_t ms) { return StoreTime(std::chrono::milliseconds(ms)); }

std::string seconds_text(double s) {
  return s >= 10 ? fmt::format("{:.0f}s", s) : fmt::format("{:.1f}s", s);
}

std::optional<double> span(const std::optional<StoreTime>& from,
                           const std::optional<StoreTime>& to) {
  if (!from || !to) return std::nullopt;
  return seconds_between(*from, *to);
}

std::string default_holder() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::random_device rd;
  return fmt::format("{}:{}:{:08x}", host[0] ? host : "falcon", ::getpid(), rd());
}

}  // namespace

namespace {

// The one way a managed workload's state changes after it was created: the move is checked
// against managed_transition_allowed (state_store.h), and a workload that leaves recovering
// leaves its recovery phase too. A move the table refuses is a bug: it throws, and the pass
// leaves the record as it was.
void move_to(ManagedWorkloadRecord& m, ManagedState to) {
  if (!managed_transition_allowed(m.state, to)) {
    throw std::logic_error(fmt::format("managed workload '{}' cannot move from {} to {}", m.name,
                                       to_string(m.state), to_string(to)));
  }
  m.state = to;
  if (to != ManagedState::kRecovering) m.phase = RecoveryPhase::kNone;
}

}  // namespace

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kHealthy:
      return "healthy";
    case Verdict::kPending:
      return "pending";
    case Verdict::kCompleted:
      return "completed";
    case Verdict::kInfrastructure:
      return kIncidentInfrastructure;
    case Verdict::kApplication:
      return kIncidentApplication;
  }
  return "healthy";
}

// --- The classifier.

Classification classify(IncarnationMemory& memory, const IncarnationObservation& obs,
                        const SupervisorSettings& settings, const std::string& cluster) {
  Classification c;
  if (!obs.reachable) {
    if (!is_set(memory.unreachable_since)) memory.unreachable_since = obs.at;
    // A cluster is lost only on evidence that spans the grace from every source: when the
    // health loop saw it answer after this look lost it, the outage counts from then (a
    // supervisor list that timed out once is not a dead cluster).
    if (is_set(obs.answered_elsewhere) && obs.answered_elsewhere > memory.unreachable_since) {
      memory.unreachable_since = std::min(obs.answered_elsewhere, obs.at);
    }
    const double down = seconds_between(memory.unreachable_since, obs.at);
    c.violation_at = memory.unreachable_since;
    c.cause = fmt::format("cluster {} unreachable for {}: {}", cluster, seconds_text(down),
                          obs.error.empty() ? "no answer" : obs.error);
    c.verdict = down >= settings.unreachable_grace_s ? Verdict::kInfrastructure : Verdict::kPending;
    c.cluster_fault = true;
    return c;
  }
  memory.unreachable_since = StoreTime{};
  if (!obs.listed) {
    c.verdict = Verdict::kInfrastructure;
    c.violation_at = obs.at;
    c.cause =
        fmt::format("no longer listed on cluster {} (deleted or evicted by the platform)", cluster);
    return c;
  }
  if (obs.state == "RUNNING") {
    if (!is_set(memory.running_since)) memory.running_since = obs.at;
    memory.was_running = true;
    memory.requeued_since = StoreTime{};
    memory.failed_unread_since = StoreTime{};
    return c;
  }
  memory.running_since = StoreTime{};
  if (obs.state == "QUEUED") {
    if (!memory.was_running) return c;  // waiting for its first admission
    if (!is_set(memory.requeued_since)) memory.requeued_since = obs.at;
    const double queued = seconds_between(memory.requeued_since, obs.at);
    c.violation_at = memory.requeued_since;
    c.cause =
        fmt::format("evicted on cluster {}: QUEUED again after RUNNING, not readmitted for {}",
                    cluster, seconds_text(queued));
    c.verdict = queued >= settings.readmit_grace_s ? Verdict::kInfrastructure : Verdict::kPending;
    return c;
  }
  if (obs.state == "COMPLETED") {
    c.verdict = Verdict::kCompleted;
    return c;
  }
  if (obs.state == "FAILED") {
    c.violation_at = is_set(memory.failed_unread_since) ? memory.failed_unread_since : obs.at;
    if (!obs.exit_code) {
      // The EXIT_CODE line may not be readable yet (Cloud Logging ingests with a delay; a log
      // read can fail): concluding "application failure" at the first look left node failures
      // unrecovered. Looked at again every pass for unreachable_grace_s, then the conservative
      // side.
      if (!is_set(memory.failed_unread_since)) memory.failed_unread_since = obs.at;
      const double unread = seconds_between(memory.failed_unread_since, obs.at);
      c.violation_at = memory.failed_unread_since;
      if (unread < settings.unreachable_grace_s) {
        c.verdict = Verdict::kPending;
        c.cause = fmt::format(
            "the workload failed on cluster {}; no exit code readable from its logs yet ({})",
            cluster, seconds_text(unread));
        return c;
      }
    }
    if (obs.exit_code && (*obs.exit_code == 137 || *obs.exit_code == 143)) {
      c.verdict = Verdict::kInfrastructure;
      c.cause = fmt::format(
          "workers killed by the platform on cluster {} (EXIT_CODE={}, no application failure)",
          cluster, *obs.exit_code);
    } else {
      c.verdict = Verdict::kApplication;
      c.cause =
          obs.exit_code
              ? fmt::format("the workload failed on cluster {} with EXIT_CODE={}", cluster,
                            *obs.exit_code)
              : fmt::format(
                    "the workload failed on cluster {}; no exit code could be read "
                    "from its logs for {}",
                    cluster, seconds_text(seconds_between(memory.failed_unread_since, obs.at)));
    }
    return c;
  }
  // UNKNOWN or a state this code does not know: treat as not listed after the unreachable grace.
  if (!is_set(memory.unreachable_since)) memory.unreachable_since = obs.at;
  const double unknown = seconds_between(memory.unreachable_since, obs.at);
  c.violation_at = memory.unreachable_since;
  c.cause = fmt::format("state {} on cluster {} for {}", obs.state, cluster, seconds_text(unknown));
  c.verdict =
      unknown >= settings.unreachable_grace_s ? Verdict::kInfrastructure : Verdict::kPending;
  return c;
}

// --- SVRT.

SvrtPhases svrt_phases(const RecoveryRecord& r) {
  return SvrtPhases{.svrt = span(r.t_violation, r.recovered),
                    .detection = span(r.t_violation, r.detected),
                    .decision = span(r.detected, r.decided),
                    .submit = span(r.decided, r.submitted),
                    .admission = span(r.submitted, r.admitted),
                    .stability = span(r.admitted, r.recovered)};
}

Recovery recovery_of(const RecoveryRecord& r) {
  const SvrtPhases p = svrt_phases(r);
  const auto time = [](const std::optional<StoreTime>& t) {
    return t ? std::optional(format_iso8601(*t)) : std::nullopt;
  };
  const auto seconds = [](const std::optional<double>& s) {
    return s ? std::optional(std::round(*s * 1000.0) / 1000.0) : std::nullopt;
  };
  const auto text = [](const std::string& v) {
    return v.empty() ? std::nullopt : std::optional(v);
  };
  return {.id = r.incident_id,
          .workload = r.workload,
          .kind = r.classification,
          .cause = r.cause,
          .from_cluster = r.cluster,
          .to_cluster = text(r.to_cluster),
          .replacement = text(r.replacement),
          .t_violation = time(r.t_violation),
          .t_detected = time(r.detected),
          .t_decided = time(r.decided),
          .t_submitted = time(r.submitted),
          .t_admitted = time(r.admitted),
          .t_recovered = time(r.recovered),
          .svrt_s = seconds(p.svrt),
          .detection_s = seconds(p.detection),
          .decision_s = seconds(p.decision),
          .submit_s = seconds(p.submit),
          .admission_s = seconds(p.admission),
          .stability_s = seconds(p.stability),
          .attempts = r.attempts,
          .outcome = r.outcome};
}

json managed_json(const ManagedWorkloadRecord& m) {
  return {{"name", m.name},
          {"incarnation", m.incarnation},
          {"cluster", m.cluster},
          {"state", to_string(m.state)},
          {"phase", m.phase == RecoveryPhase::kNone ? json(nullptr) : json(to_string(m.phase))},
          {"recoveries", m.attempts},
          {"max_recoveries", m.max_recoveries},
          {"stable_after_s", static_cast<double>(m.stable_after.count()) / 1000.0},
          {"recover_on_failure", m.recover_on_failure},
          {"accelerator_type", m.spec.accelerator_type},
          {"created_at", format_iso8601(m.created_at)},
          {"updated_at", format_iso8601(m.updated_at)}};
}

// --- Admission.

namespace {

// Storage fencing: the copy about to start gets the epoch just written for it under its managed
// workload's name (fence.h). Throws what advance_fence throws: the copy is then not started.
void add_fence(ControlPlane& control, const std::string& managed_name, WorkloadSpec& copy) {
  if (auto ticket = control.advance_fence(managed_name)) {
    copy.env[kFenceUriEnv] = ticket->uri;
    copy.env[kFenceEpochEnv] = std::to_string(ticket->epoch);
  }
}

}  // namespace

WorkloadHandle submit_managed(ControlPlane& control, StateStore& store, const Clock& clock,
                              const std::string& cluster, const WorkloadSpec& spec,
                              const ManageOptions& options, std::int64_t selection_id) {
  if (spec.name.size() > kMaxManagedNameLength) {
    throw InvalidWorkloadSpecError(
        fmt::format("managed workload name '{}' is {} characters; at most {} (its replacements "
                    "are named <name>-r<k> within xpk's 40)",
                    spec.name, spec.name.size(), kMaxManagedNameLength),
        cluster, spec.name);
  }
  if (options.max_recoveries < 0) {
    throw std::invalid_argument("managed.max_recoveries: must be >= 0");
  }
  if (options.stable_after.count() < 0) {
    throw std::invalid_argument("managed.stable_after_s: must be >= 0");
  }
  ManagedWorkloadRecord record;
  record.name = spec.name;
  record.spec = spec;
  record.max_recoveries = options.max_recoveries;
  record.stable_after = options.stable_after;
  record.recover_on_failure = options.recover_on_failure;
  record.incarnation = spec.name;
  record.cluster = cluster;
  record.state = ManagedState::kSubmitting;
  record.created_at = clock.now();
  record.updated_at = record.created_at;
  if (!store.create_managed(record)) {
    throw WorkloadExistsError(
        fmt::format("managed workload '{}' already exists (GET /v1/managed)", spec.name), cluster,
        spec.name, std::nullopt, "");
  }
  try {
    WorkloadSpec first = spec;
    add_fence(control, spec.name, first);
    WorkloadHandle handle =
        control.submit({.spec = first, .cluster = cluster, .selection_id = selection_id}).handle;
    try {
      if (auto stored = store.get_managed(spec.name);
          stored && stored->state == ManagedState::kSubmitting) {
        move_to(*stored, ManagedState::kStarting);
        stored->updated_at = clock.now();
        store.update_managed(*stored);
      }
    } catch (const std::exception&) {
      // The supervisor takes it as starting after kSubmittingGrace.
    }
    return handle;
  } catch (...) {
    try {
      store.delete_managed(spec.name);
    } catch (const std::exception&) {
      // The supervisor finds the incarnation missing and recovers it: nothing is lost.
    }
    throw;
  }
}

Placement place_workload(ControlPlane& control, StateStore& store, const Clock& clock,
                         const WorkloadSpec& spec, const std::optional<std::string>& cluster,
                         std::int64_t selection_id, const std::optional<ManageOptions>& managed) {
  Placement out;
  std::string where;
  if (cluster) {
    where = *cluster;
  } else {
    out.selection = control.select_explained(spec.accelerator_type);
    where = out.selection->selection.selected_cluster;
    selection_id = out.selection->selection.selection_id;
  }
  out.handle =
      managed
          ? submit_managed(control, store, clock, where, spec, *managed, selection_id)
          : control.submit({.spec = spec, .cluster = where, .selection_id = selection_id}).handle;
  return out;
}

// --- The supervisor.

namespace {

// The memory kept in a managed record's detail_json.
struct Detail {
  IncarnationMemory memory;
  std::string incident;  // the open incident ("" when none)
  int incidents = 0;     // incidents opened so far (their ids: <name>-<n>)
  std::string old_name;  // the incarnation being replaced
  std::string old_cluster;
  std::string to_cluster;         // submitting: where
  std::int64_t selection_id = 0;  // the recorded decision that chose to_cluster (0: none)
  std::string replacement;
  int submit_attempts = 0;
  int no_cluster = 0;  // decisions in a row that found no available cluster
  int rounds = 0;      // rounds of failed creates that left no other cluster (back-offs)
  // Clusters a create of the replacement failed on (confirmed not created there), excluded from
  // the next decisions until no other cluster can take it.
  std::vector<std::string> create_failed;
  // Clusters where a replacement of the open incident waited unadmitted for readmit_grace_s
  // (full): excluded from its later decisions, so that a move does not go back to one (with
  // only the last one excluded, a replacement went back and forth between two full clusters
  // while others had free slots).
  std::vector<std::string> full;
  StoreTime next_attempt{};
  StoreTime fence_since{};  // the old cluster has not answered a cancel since
  // phase confirming: a create on to_cluster failed and that cluster did not answer since.
  StoreTime unconfirmed_since{};
  std::vector<std::pair<std::string, std::string>> fenced;  // (cluster, name) to cancel later

  static Detail parse(const std::string& text) {
    Detail d;
    const json j = json::parse(text, nullptr, false);
    if (!j.is_object()) return d;
    auto ms = [&](const json& o, const char* k) {
      return o.contains(k) && o[k].is_number_integer() ? from_ms(o[k].get<std::int64_t>())
                                                       : StoreTime{};
    };
    if (const auto it = j.find("memory"); it != j.end() && it->is_object()) {
      d.memory.was_running = it->value("was_running", false);
      d.memory.running_since = ms(*it, "running_since_ms");
      d.memory.unreachable_since = ms(*it, "unreachable_since_ms");
      d.memory.requeued_since = ms(*it, "requeued_since_ms");
      d.memory.failed_unread_since = ms(*it, "failed_unread_since_ms");
    }
    d.incident = j.value("incident", std::string());
    d.incidents = j.value("incidents", 0);
    d.old_name = j.value("old_name", std::string());
    d.old_cluster = j.value("old_cluster", std::string());
    d.to_cluster = j.value("to_cluster", std::string());
    d.selection_id = j.value("selection_id", std::int64_t{0});
    d.replacement = j.value("replacement", std::string());
    d.submit_attempts = j.value("submit_attempts", 0);
    d.no_cluster = j.value("no_cluster", 0);
    d.rounds = j.value("rounds", 0);
    for (auto [key, list] : {std::pair{"create_failed", &d.create_failed}, {"full", &d.full}}) {
      if (const auto it = j.find(key); it != j.end() && it->is_array()) {
        for (const json& c : *it) {
          if (c.is_string()) list->push_back(c.get<std::string>());
        }
      }
    }
    d.next_attempt = ms(j, "next_attempt_ms");
    d.fence_since = ms(j, "fence_since_ms");
    d.unconfirmed_since = ms(j, "unconfirmed_since_ms");
    if (const auto it = j.find("fenced"); it != j.end() && it->is_array()) {
      for (const json& f : *it) {
        d.fenced.emplace_back(f.value("cluster", std::string()), f.value("name", std::string()));
      }
    }
    return d;
  }

  std::string dump() const {
    json j = json::object();
    json m = {{"was_running", memory.was_running}};
    if (is_set(memory.running_since)) m["running_since_ms"] = to_ms(memory.running_since);
    if (is_set(memory.unreachable_since)) {
      m["unreachable_since_ms"] = to_ms(memory.unreachable_since);
    }
    if (is_set(memory.requeued_since)) m["requeued_since_ms"] = to_ms(memory.requeued_since);
    if (is_set(memory.failed_unread_since)) {
      m["failed_unread_since_ms"] = to_ms(memory.failed_unread_since);
    }
    j["memory"] = m;
    j["incidents"] = incidents;
    if (!incident.empty()) j["incident"] = incident;
    if (!old_name.empty()) j["old_name"] = old_name;
    if (!old_cluster.empty()) j["old_cluster"] = old_cluster;
    if (!to_cluster.empty()) j["to_cluster"] = to_cluster;
    if (selection_id != 0) j["selection_id"] = selection_id;
    if (!replacement.empty()) j["replacement"] = replacement;
    if (submit_attempts > 0) j["submit_attempts"] = submit_attempts;
    if (no_cluster > 0) j["no_cluster"] = no_cluster;
    if (rounds > 0) j["rounds"] = rounds;
    if (!create_failed.empty()) j["create_failed"] = create_failed;
    if (!full.empty()) j["full"] = full;
    if (is_set(next_attempt)) j["next_attempt_ms"] = to_ms(next_attempt);
    if (is_set(fence_since)) j["fence_since_ms"] = to_ms(fence_since);
    if (is_set(unconfirmed_since)) j["unconfirmed_since_ms"] = to_ms(unconfirmed_since);
    if (!fenced.empty()) {
      json f = json::array();
      for (const auto& [c, n] : fenced) f.push_back({{"cluster", c}, {"name", n}});
      j["fenced"] = f;
    }
    return j.dump();
  }
};

// Histogram buckets of recovery phases (seconds).
constexpr std::array<double, 14> kPhaseBounds = {0.5, 1,   2,   5,    10,   30,   60,
                                                 120, 300, 600, 1200, 1800, 3600, 7200};
constexpr std::array<const char*, 6> kPhases = {"detection", "decision",  "submit",
                                                "admission", "stability", "svrt"};

struct PhaseHistogram {
  std::array<std::uint64_t, kPhaseBounds.size()> buckets{};
  std::uint64_t count = 0;
  double sum = 0;
  void observe(double s) {
    ++count;
    sum += s;
    for (std::size_t i = 0; i < kPhaseBounds.size(); ++i) {
      if (s <= kPhaseBounds[i]) {
        ++buckets[i];
        return;
      }
    }
  }
};

// A lost lease, thrown out of a pass.
struct LostLease {};

// A managed workload's record was written by someone else since this pass read it (the API's
// cancel, another replica) or the lease moved on: this pass's view of it is stale, so its turn
// ends here and the next pass reads it again and decides anew.
struct ManagedConflict : std::runtime_error {
  ManagedConflict()
      : std::runtime_error(
            "its record changed since this pass read it (a cancel, or another replica); it is "
            "read again next pass") {}
};

}  // namespace

// --- Cancel.

namespace {

// `handle` names `m` (its first incarnation's name, on any cluster: a person cancels a managed
// workload by the name they gave it, wherever it runs now), or is, or is about to be, an
// incarnation of it: its current one, the one its recovery replaces, or the replacement its
// recovery is submitting.
bool is_incarnation_of(const ManagedWorkloadRecord& m, const WorkloadHandle& h) {
  if (m.name == h.workload_name) return true;
  if (m.incarnation == h.workload_name && m.cluster == h.cluster) return true;
  const Detail d = Detail::parse(m.detail_json);
  return (d.old_name == h.workload_name && d.old_cluster == h.cluster) ||
         (d.replacement == h.workload_name && d.to_cluster == h.cluster);
}

// Marks `m` cancelled over the supervisor's writes: on a conflict it reads the record again and
// tries again. The record as it now stands; nullopt when it ended (or went) meanwhile.
std::optional<ManagedWorkloadRecord> mark_cancelled(StateStore& store, const Clock& clock,
                                                    ManagedWorkloadRecord m) {
  // Each conflict is a supervisor write that landed in between; a pass writes a record a few
  // times at most, so this ends long before the bound.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    move_to(m, ManagedState::kCancelled);
    m.updated_at = clock.now();
    if (store.update_managed(m)) return m;
    std::optional<ManagedWorkloadRecord> again = store.get_managed(m.name);
    if (!again || !is_active(again->state)) return std::nullopt;
    m = std::move(*again);
  }
  throw StateStoreError(store.backend(), store.location(), "update_managed",
                        fmt::format("managed workload '{}' changed 1000 times while it was being "
                                    "cancelled",
                                    m.name));
}

}  // namespace

CancelOutcome cancel_workload(ControlPlane& control, StateStore& store, const Clock& clock,
                              const WorkloadHandle& handle) {
  CancelOutcome out;
  std::vector<WorkloadHandle> current;  // the managed workloads' incarnations, when others
  for (ManagedWorkloadRecord& m :
       list_all_managed(store, {ManagedState::kSubmitting, ManagedState::kStarting,
                                ManagedState::kRunning, ManagedState::kRecovering})) {
    if (!is_incarnation_of(m, handle)) continue;
    out.managed = m.name;
    const std::optional<ManagedWorkloadRecord> cancelled = mark_cancelled(store, clock, m);
    if (cancelled &&
        (cancelled->incarnation != handle.workload_name || cancelled->cluster != handle.cluster)) {
      current.push_back({cancelled->incarnation, cancelled->cluster, "", ""});
    }
  }
  for (const WorkloadHandle& h : current) {
    try {
      control.cancel(h.cluster, h.workload_name);
    } catch (const WorkloadNotFoundError&) {
    }
  }
  try {
    out.cancelled = control.cancel(handle.cluster, handle.workload_name).cancelled;
  } catch (const WorkloadNotFoundError&) {
    if (!out.managed) throw;
  }
  return out;
}

struct Supervisor::Impl {
  SupervisorOptions options;
  std::string holder;

  mutable std::mutex mutex;  // settings, leader, metrics, loop state
  std::condition_variable wake;
  SupervisorSettings settings;
  bool leader = false;
  std::int64_t token = 0;
  StoreTime renewed_at{};
  std::map<std::string, PhaseHistogram> phases;
  std::map<std::pair<std::string, std::string>, std::uint64_t> outcomes;  // (kind, outcome)

  std::mutex pass_mutex;  // one pass at a time
  std::thread loop;
  bool running = false;
  bool stopping = false;

  // Per pass: each cluster's workload list (or why it could not be read), and when it was read.
  struct Listing {
    bool ok = false;
    std::string error;
    std::map<std::string, WorkloadInfo> workloads;
    StoreTime at{};  // when the list call started: what it shows is at least that recent
    // RUNNING and QUEUED workloads on it (every workload of the cluster, managed or not).
    int running() const { return count("RUNNING"); }
    int occupied() const { return count("RUNNING") + count("QUEUED"); }
    int count(const char* state) const {
      return static_cast<int>(std::count_if(workloads.begin(), workloads.end(), [&](const auto& w) {
        return w.second.state == state;
      }));
    }
  };
  // A pass handles several workloads at once (SupervisorOptions::parallel): the per-pass state
  // below is guarded by pass_state.
  std::mutex pass_state;
  std::map<std::string, std::shared_ptr<const Listing>> listings;
  // Held while a cluster's list is read: the workloads that need it meanwhile wait for that read
  // instead of reading it again.
  std::map<std::string, std::shared_ptr<std::mutex>> list_locks;
  // Per pass: decided and not submitted yet (workload -> cluster), and the submits made (cluster,
  // when): placements a list read before them does not show.
  std::map<std::string, std::string> placing;
  std::vector<std::pair<std::string, StoreTime>> placed;
  // Placements decided so far (under pass_state): a decision that sees it change while it
  // listed and selected (no lock is held across that I/O) is made again, so that each decision
  // counts every placement decided before it.
  std::uint64_t placements = 0;
  // Across passes (this replica's memory): a cluster's capacity as learned from a replacement
  // that waited there unadmitted for readmit_grace_s while it ran N workloads (xpk's list and
  // probes say nothing of free slots): N. Raised when a list shows it running more.
  std::map<std::string, int> learned_capacity;
  // Per pass: the earliest moment a pass has something to do (a grace period, the fencing lease,
  // a back-off or a stability window ending); the loop runs the next pass then when that comes
  // before interval_s.
  StoreTime next_due{};
  // Per pass: the clusters whose breaker this pass has fed a failure already. One outage is one
  // failure, however many managed workloads it takes down (a killed cluster with 16 of them
  // opened its breaker at once and kept it open far beyond the outage).
  std::set<std::string> breaker_fed;
  // Across passes: when move_queued last looked for a better cluster for a workload (by name).
  std::map<std::string, StoreTime> move_checked;
  // Fenced incarnations not known deleted (cluster -> names): as the last pass read them from
  // the records, and those fenced since. sweep_fenced() deletes them the moment their cluster
  // answers; the records lose them at the next pass (cancel_fenced).
  std::mutex fenced_mutex;
  std::map<std::string, std::set<std::string>> fenced_copies;
  // How many clusters a sweep lists at once.
  static constexpr int kSweepWidth = 8;
  std::thread sweeper;

  explicit Impl(SupervisorOptions o) : options(std::move(o)) {
    if (!options.control) throw std::invalid_argument("Supervisor: no control plane");
    if (!options.store) throw std::invalid_argument("Supervisor: no state store");
    if (!options.clock) options.clock = make_system_clock();
    holder = options.holder.empty() ? default_holder() : options.holder;
    settings = options.settings;
  }

  SupervisorSettings current_settings() const {
    std::lock_guard lock(mutex);
    return settings;
  }

  void event(const std::string& level, const std::string& message) const {
    if (options.on_event) options.on_event(level, message);
  }

  StoreTime now() const { return options.clock->now(); }
  ControlPlane& control() const { return *options.control; }
  StateStore& store() const { return *options.store; }

  // --- The lease.

  bool take_lease(const SupervisorSettings& s) {
    std::optional<Lease> lease;
    try {
      lease = store().acquire_lease(kSupervisorLease, holder, to_duration(s.lease_ttl_s), now());
    } catch (const std::exception& e) {
      event("warn", fmt::format("supervisor: cannot take or renew the lease: {}", e.what()));
    }
    std::lock_guard lock(mutex);
    const bool was = leader;
    leader = lease.has_value();
    if (lease) {
      if (!was || lease->token != token) {
        event("info",
              fmt::format("supervisor: {} now supervises (lease token {})", holder, lease->token));
      }
      token = lease->token;
      renewed_at = now();
    } else if (was) {
      event("warn", fmt::format("supervisor: {} lost the lease; it stops acting", holder));
    }
    return leader;
  }

  // Before an action: renews the lease when a third of its TTL has passed; throws LostLease
  // when it is gone.
  void ensure_leader(const SupervisorSettings& s) {
    StoreTime last;
    {
      std::lock_guard lock(mutex);
      if (!leader) throw LostLease{};
      last = renewed_at;
    }
    if (seconds_between(last, now()) < s.lease_ttl_s / 3.0) return;
    std::optional<Lease> lease;
    try {
      lease = store().renew_lease(kSupervisorLease, holder, to_duration(s.lease_ttl_s), now());
    } catch (const std::exception& e) {
      event("warn", fmt::format("supervisor: cannot renew the lease: {}", e.what()));
    }
    std::lock_guard lock(mutex);
    if (!lease || lease->token != token) {
      leader = false;
      event("warn", fmt::format("supervisor: {} lost the lease; it stops acting", holder));
      throw LostLease{};
    }
    renewed_at = now();
  }

  // --- Observing.

  // The cluster's workload list, read once per pass; read again when it is older than
  // interval_s (a pass slowed by cancels, submits and log reads would otherwise judge a workload
  // by a list from seconds ago: an eviction readmitted since then looked "not readmitted within
  // readmit_grace_s"). A cluster that did not answer is not asked again in the same pass.
  // `any_age`: whatever this pass read (a use that a stale list cannot mislead).
  std::shared_ptr<const Listing> listing(const std::string& cluster, const SupervisorSettings& s,
                                         bool any_age = false) {
    auto usable = [&](const Listing& l) {
      return any_age || !l.ok || seconds_between(l.at, now()) < s.interval_s;
    };
    std::shared_ptr<std::mutex> reading;
    {
      std::lock_guard lock(pass_state);
      if (const auto it = listings.find(cluster); it != listings.end() && usable(*it->second)) {
        return it->second;
      }
      auto& m = list_locks[cluster];
      if (!m) m = std::make_shared<std::mutex>();
      reading = m;
    }
    std::lock_guard one_read(*reading);
    {
      std::lock_guard lock(pass_state);  // read by another workload meanwhile?
      if (const auto it = listings.find(cluster); it != listings.end() && usable(*it->second)) {
        return it->second;
      }
    }
    auto l = std::make_shared<Listing>();
    l->at = now();
    try {
      for (WorkloadInfo& w : control().list_workloads(cluster, std::nullopt)) {
        std::string name = w.name;
        l->workloads.emplace(std::move(name), std::move(w));
      }
      l->ok = true;
    } catch (const std::exception& e) {
      l->error = e.what();
    }
    std::lock_guard lock(pass_state);
    if (l->ok) {
      if (const auto it = learned_capacity.find(cluster);
          it != learned_capacity.end() && l->running() > it->second) {
        it->second = l->running();
      }
    }
    listings[cluster] = l;
    return l;
  }

  // Forgets `cluster`'s list: the next look reads it again (after a failed create there).
  void forget_listing(const std::string& cluster) {
    std::lock_guard lock(pass_state);
    listings.erase(cluster);
  }

  void due(StoreTime t) {
    std::lock_guard lock(pass_state);
    if (is_set(t) && (!is_set(next_due) || t < next_due)) next_due = t;
  }

  // Observed at the moment its cluster's list was read, not when this pass got round to it.
  // When the health loop last saw `cluster` answer (its latest probe, when that was reachable);
  // unset when it did not or cannot say.
  StoreTime answered_elsewhere(const std::string& cluster) {
    try {
      const std::optional<ProbeSnapshot> p = control().cached_probe(cluster);
      if (!p || !p->result.reachable) return StoreTime{};
      return parse_rfc3339(p->result.probed_at).value_or(StoreTime{});
    } catch (const std::exception&) {
      return StoreTime{};
    }
  }

  IncarnationObservation observe(const std::string& cluster, const std::string& name,
                                 const SupervisorSettings& s) {
    IncarnationObservation obs;
    const auto l = listing(cluster, s);
    obs.at = l->at;
    obs.reachable = l->ok;
    obs.error = l->error;
    if (!l->ok) {
      obs.answered_elsewhere = answered_elsewhere(cluster);
      return obs;
    }
    const auto it = l->workloads.find(name);
    obs.listed = it != l->workloads.end();
    if (!obs.listed) return obs;
    obs.state = it->second.state;
    if (obs.state == "FAILED") {
      try {
        obs.exit_code = control().status(cluster, name).exit_code;
      } catch (const std::exception&) {
        // No exit code: classified as an application failure (the conservative side).
      }
    }
    return obs;
  }

  // --- Incidents.

  RecoveryRecord incident_record(const ManagedWorkloadRecord& m, const Detail& d) {
    if (auto r = store().get_recovery(d.incident)) return *r;
    RecoveryRecord r;
    r.incident_id = d.incident;
    r.workload = m.name;
    r.outcome = "open";
    return r;
  }

  void close_incident(RecoveryRecord& r, const std::string& outcome) {
    r.outcome = outcome;
    store().put_recovery(r);
    std::lock_guard lock(mutex);
    ++outcomes[{r.classification, outcome}];
    if (outcome == "recovered") {
      const SvrtPhases p = svrt_phases(r);
      const std::array<std::optional<double>, 6> values = {p.detection, p.decision,  p.submit,
                                                           p.admission, p.stability, p.svrt};
      for (std::size_t i = 0; i < kPhases.size(); ++i) {
        if (values[i]) phases[kPhases[i]].observe(std::max(0.0, *values[i]));
      }
    }
  }

  // Writes `m` over the version this pass read, fenced by the lease; throws ManagedConflict
  // when it was written since (a cancel through the API wins over this pass's view) or the
  // lease has moved on.
  void save(ManagedWorkloadRecord& m, const Detail& d) {
    m.detail_json = d.dump();
    m.updated_at = now();
    LeaseFence fence{kSupervisorLease, 0};
    {
      std::lock_guard lock(mutex);
      fence.token = token;
    }
    if (!store().update_managed(m, fence)) throw ManagedConflict();
  }

  // --- The state machine of one managed workload.

  void step(ManagedWorkloadRecord& m, const SupervisorSettings& s) {
    if (m.state == ManagedState::kSubmitting) {
      // Its first submit is under way in an API request; left alone unless that server died.
      if (now() - m.updated_at < kSubmittingGrace) return;
      move_to(m, ManagedState::kStarting);
    }
    Detail d = Detail::parse(m.detail_json);
    if (m.state == ManagedState::kStarting || m.state == ManagedState::kRunning) {
      watch(m, d, s);
    }
    if (m.state == ManagedState::kRecovering) recover(m, d, s);
  }

  // The current incarnation is supposed to be live: look at it.
  void watch(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s) {
    const IncarnationObservation obs = observe(m.cluster, m.incarnation, s);
    const Classification c = classify(d.memory, obs, s, m.cluster);
    // When this workload's next verdict can change without anything new happening: a grace
    // period ending, a replacement's wait for admission reaching readmit_grace_s.
    if (c.verdict == Verdict::kPending) {
      if (is_set(d.memory.unreachable_since)) {
        due(d.memory.unreachable_since + to_duration(s.unreachable_grace_s));
      }
      if (is_set(d.memory.requeued_since)) {
        due(d.memory.requeued_since + to_duration(s.readmit_grace_s));
      }
      if (is_set(d.memory.failed_unread_since)) {
        due(d.memory.failed_unread_since + to_duration(s.unreachable_grace_s));
      }
    }
    switch (c.verdict) {
      case Verdict::kHealthy:
      case Verdict::kPending: {
        if (obs.listed && obs.state == "QUEUED" && !d.memory.was_running && !d.incident.empty() &&
            move_unadmitted(m, d, obs, s)) {
          return;
        }
        if (obs.listed && obs.state == "QUEUED" && !d.memory.was_running && d.incident.empty() &&
            move_queued(m, d, obs, s)) {
          return;
        }
        if (obs.listed && obs.state == "RUNNING") {
          move_to(m, ManagedState::kRunning);
          if (!d.incident.empty()) {
            RecoveryRecord r = incident_record(m, d);
            bool changed = false;
            if (!r.admitted) {
              r.admitted = d.memory.running_since;
              changed = true;
            }
            const double stable = seconds_between(d.memory.running_since, obs.at);
            if (stable * 1000.0 >= static_cast<double>(m.stable_after.count())) {
              // When the window was met (RUNNING since running_since, and still RUNNING at
              // every look since), not when this pass got round to it: a pass that takes long
              // (many workloads, slow clusters) is not part of the workload's recovery.
              r.recovered = d.memory.running_since + m.stable_after;
              close_incident(r, "recovered");
              event("info", fmt::format("supervisor: {} recovered as {} on {}: SVRT {}", m.name,
                                        m.incarnation, m.cluster,
                                        seconds_text(svrt_phases(r).svrt.value_or(0))));
              d.incident.clear();
            } else {
              due(d.memory.running_since + m.stable_after);
              if (changed) store().put_recovery(r);
            }
          }
        }
        save(m, d);
        return;
      }
      case Verdict::kCompleted: {
        move_to(m, ManagedState::kCompleted);
        if (!d.incident.empty()) {
          RecoveryRecord r = incident_record(m, d);
          if (!r.admitted) r.admitted = obs.at;
          r.recovered = obs.at;
          close_incident(r, "recovered");
          d.incident.clear();
        }
        save(m, d);
        event("info",
              fmt::format("supervisor: {} completed ({} on {})", m.name, m.incarnation, m.cluster));
        return;
      }
      case Verdict::kInfrastructure:
      case Verdict::kApplication:
        open_incident(m, d, c, obs.at);
        return;
    }
  }

  // A replacement still waiting QUEUED for its first admission readmit_grace_s after its submit
  // was placed on a cluster that cannot take it now (the priority policy sees queue depth, not
  // free slots; xpk cannot see quota): the same incident moves it, as it moves a preemption not
  // readmitted in time. The stuck copy is fenced (cancelled, confirmed gone) before the next
  // one is submitted elsewhere, and the move counts against max_recoveries; once those are
  // spent the replacement is left to wait where it is. True when it moved.
  bool move_unadmitted(ManagedWorkloadRecord& m, Detail& d, const IncarnationObservation& obs,
                       const SupervisorSettings& s) {
    RecoveryRecord r = incident_record(m, d);
    if (!r.submitted || r.admitted || m.attempts >= m.max_recoveries) return false;
    const double waited = seconds_between(*r.submitted, obs.at);
    if (waited < s.readmit_grace_s) {
      due(*r.submitted + to_duration(s.readmit_grace_s));
      return false;
    }
    r.cause += fmt::format("; replacement {} not admitted on {} within {}, moved", m.incarnation,
                           m.cluster, seconds_text(waited));
    if (std::find(d.full.begin(), d.full.end(), m.cluster) == d.full.end()) {
      d.full.push_back(m.cluster);
    }
    learn_capacity(m.cluster, s);
    start_replacement(m, d, r, StoreTime{});
    event("warn", fmt::format("supervisor: {}: {} not admitted on {} within {}; moving it as {}",
                              r.incident_id, d.old_name, d.old_cluster, seconds_text(waited),
                              d.replacement));
    return true;
  }

  // Late binding for a workload that has never run: QUEUED on its cluster for
  // move_queued_after_s while another cluster can admit it now (a decision without its cluster
  // whose winner has nothing queued and room for its slice) opens an incident that moves it
  // through the recovery path (the queued copy is fenced first). Checked at most once per
  // move_queued_after_s / 4 (at least interval_s) per workload. True when it moved.
  bool move_queued(ManagedWorkloadRecord& m, Detail& d, const IncarnationObservation& obs,
                   const SupervisorSettings& s) {
    if (s.move_queued_after_s <= 0 || m.attempts >= m.max_recoveries) return false;
    const double waited = seconds_between(m.created_at, obs.at);
    if (waited < s.move_queued_after_s) {
      due(m.created_at + to_duration(s.move_queued_after_s));
      return false;
    }
    {
      std::lock_guard lock(pass_state);
      auto& last = move_checked[m.name];
      const double every = std::max(s.interval_s, s.move_queued_after_s / 4);
      if (is_set(last) && seconds_between(last, obs.at) < every) return false;
      last = obs.at;
    }
    std::string better;
    try {
      const Decision decision = control().select_excluding(m.spec.accelerator_type, {m.cluster},
                                                           placement_hints({m.cluster}, s));
      for (const auto& c : decision.selection.scores) {
        if (c.rank == 1 && admits_now(c)) better = c.cluster;
      }
    } catch (const std::exception&) {
      return false;  // no other cluster: it waits where it is
    }
    if (better.empty()) return false;
    Classification c;
    c.verdict = Verdict::kInfrastructure;
    c.cause =
        fmt::format("{} QUEUED on {} for {}, never admitted, while {} can admit it now: moved",
                    m.incarnation, m.cluster, seconds_text(waited), better);
    c.violation_at = m.created_at;
    c.cluster_fault = false;
    open_incident(m, d, c, obs.at);
    return true;
  }

  // A replacement waited on `cluster` unadmitted for readmit_grace_s: the cluster is full at
  // what it runs now (its list, this pass).
  void learn_capacity(const std::string& cluster, const SupervisorSettings& s) {
    const auto l = listing(cluster, s, true);
    if (!l->ok) return;
    std::lock_guard lock(pass_state);
    learned_capacity[cluster] = l->running();
    event("info", fmt::format("supervisor: cluster {} is taken to have room for {} workloads (a "
                              "replacement waited there unadmitted while it ran that many)",
                              cluster, l->running()));
  }

  // What a decision should know beyond the probes: the placements decided and not submitted
  // yet, and the clusters of a learned capacity that their workloads (listed RUNNING or QUEUED,
  // submitted since that list, being placed) fill. Holds no lock while it lists.
  PlacementHints placement_hints(const std::vector<std::string>& excluded,
                                 const SupervisorSettings& s) {
    PlacementHints hints;
    std::map<std::string, int> capacity;
    {
      std::lock_guard lock(pass_state);
      for (const auto& [workload, cluster] : placing) ++hints.in_flight[cluster];
      capacity = learned_capacity;
    }
    for (const auto& [cluster, cap] : capacity) {
      if (std::find(excluded.begin(), excluded.end(), cluster) != excluded.end()) continue;
      const auto l = listing(cluster, s, true);
      if (!l->ok) continue;
      int since = 0;
      {
        std::lock_guard lock(pass_state);
        since = static_cast<int>(std::count_if(placed.begin(), placed.end(), [&](const auto& p) {
          return p.first == cluster && p.second >= l->at;
        }));
      }
      const auto in_flight = hints.in_flight.find(cluster);
      const int placing_there = in_flight == hints.in_flight.end() ? 0 : in_flight->second;
      const int occupied = l->occupied() + since + placing_there;
      if (occupied >= cap) {
        hints.no_room[cluster] = fmt::format(
            "{} workloads running or queued there ({} of them placed by this supervisor since "
            "its list), room for {} (learned: a replacement waited there unadmitted)",
            occupied, since + placing_there, cap);
      }
    }
    return hints;
  }

  void open_incident(ManagedWorkloadRecord& m, Detail& d, const Classification& c, StoreTime at) {
    const bool infrastructure = c.verdict == Verdict::kInfrastructure;
    if (!d.incident.empty()) {
      // The replacement failed before it was recovered: that incident ends here.
      RecoveryRecord previous = incident_record(m, d);
      close_incident(previous, "failed_again");
      d.incident.clear();
    }
    ++d.incidents;
    d.incident = fmt::format("{}-{}", m.name, d.incidents);
    d.full.clear();
    RecoveryRecord r;
    r.incident_id = d.incident;
    r.workload = m.name;
    r.cluster = m.cluster;
    r.classification = infrastructure ? kIncidentInfrastructure : kIncidentApplication;
    r.cause = c.cause;
    r.t_violation = c.violation_at;
    r.detected = at;
    r.outcome = "open";
    r.detail_json = json({{"incarnation", m.incarnation}}).dump();
    event("warn", fmt::format("supervisor: incident {} ({}): {} ({})", r.incident_id,
                              r.classification, c.cause, m.incarnation));
    // A workload-level fault (a node, a preemption) says nothing about the cluster's health: at
    // a high fault rate counting those opened every breaker and left nowhere to recover to. The
    // replacement's selection excludes the old cluster either way.
    bool feed = false;
    if (infrastructure && c.cluster_fault) {
      std::lock_guard lock(pass_state);
      feed = breaker_fed.insert(m.cluster).second;
    }
    if (feed) control().record_cluster_failure(m.cluster);
    if (!infrastructure && !m.recover_on_failure) {
      move_to(m, ManagedState::kFailed);
      d.incident.clear();
      close_incident(r, "not_recovered");
      save(m, d);
      return;
    }
    if (m.attempts >= m.max_recoveries) {
      move_to(m, ManagedState::kGaveUp);
      r.cause += fmt::format("; max_recoveries ({}) reached", m.max_recoveries);
      d.incident.clear();
      close_incident(r, "gave_up");
      save(m, d);
      event("error", fmt::format("supervisor: {} gave up: max_recoveries ({}) reached", m.name,
                                 m.max_recoveries));
      return;
    }
    // An unreachable cluster's fencing clock started with its first failed look.
    start_replacement(m, d, r, d.memory.unreachable_since);
  }

  // Starts the next attempt of incident `r`: the current incarnation is to be fenced (counted
  // from `fence_since`, unset: from the first look that cannot confirm it gone), then replaced
  // by <name>-r<attempts>. Stores `r` and the workload.
  void start_replacement(ManagedWorkloadRecord& m, Detail& d, RecoveryRecord& r,
                         StoreTime fence_since) {
    ++m.attempts;
    move_to(m, ManagedState::kRecovering);
    m.phase = RecoveryPhase::kFencing;
    d.old_name = m.incarnation;
    d.old_cluster = m.cluster;
    d.fence_since = fence_since;
    d.to_cluster.clear();
    d.selection_id = 0;
    d.replacement = fmt::format("{}-r{}", m.name, m.attempts);
    d.submit_attempts = 0;
    d.no_cluster = 0;
    d.rounds = 0;
    d.create_failed.clear();
    d.next_attempt = StoreTime{};
    d.unconfirmed_since = StoreTime{};
    r.replacement = d.replacement;
    store().put_recovery(r);
    save(m, d);
  }

  void note_fenced(const std::string& cluster, const std::string& name) {
    std::lock_guard lock(fenced_mutex);
    fenced_copies[cluster].insert(name);
  }

  // Lists each cluster that has fenced incarnations; one that answers has those on its list
  // deleted at once (the pass that fenced them may be minutes from the next). Returns how many
  // were deleted. Only the lease holder deletes.
  int sweep_fenced() {
    std::map<std::string, std::set<std::string>> copies;
    {
      std::lock_guard lock(fenced_mutex);
      copies = fenced_copies;
    }
    if (copies.empty() || !leader_now()) return 0;
    const SupervisorSettings s = current_settings();
    // The clusters at once (up to kSweepWidth): one after the other, a revived cluster waited
    // for the failing lists of the others still down, and its fenced copy was deleted up to a
    // second late.
    std::vector<std::pair<std::string, std::set<std::string>>> work(copies.begin(), copies.end());
    std::atomic<int> deleted{0};
    try {
      for_each_parallel(work.size(), kSweepWidth, [&](std::size_t i) {
        try {
          deleted += sweep_cluster(work[i].first, work[i].second, s);
        } catch (const LostLease&) {
          throw;
        } catch (const std::exception& e) {
          event("warn", fmt::format("supervisor: sweep of the fenced incarnations on {} failed: {}",
                                    work[i].first, e.what()));
        }
      });
    } catch (const LostLease&) {
      // Another replica leads now: it sweeps. Not a failure (as before the sweep went parallel).
    }
    return deleted;
  }

  // A fenced copy gone from `cluster` (deleted, or found gone).
  void forget_fenced(const std::string& cluster, const std::string& name) {
    std::lock_guard lock(fenced_mutex);
    const auto it = fenced_copies.find(cluster);
    if (it == fenced_copies.end()) return;
    it->second.erase(name);
    if (it->second.empty()) fenced_copies.erase(it);
  }

  // One cluster of a sweep: deletes its fenced copies once it answers; how many it deleted.
  int sweep_cluster(const std::string& cluster, const std::set<std::string>& names,
                    const SupervisorSettings& s) {
    int deleted = 0;
    std::map<std::string, std::string> listed;  // name -> state
    try {
      for (const WorkloadInfo& w : control().list_workloads(cluster, std::nullopt)) {
        listed.emplace(w.name, w.state);
      }
    } catch (const std::exception&) {
      return 0;  // still not answering
    }
    for (const std::string& name : names) {
      const auto it = listed.find(name);
      if (it == listed.end()) {
        forget_fenced(cluster, name);  // gone already
        continue;
      }
      ensure_leader(s);  // LostLease: for_each_parallel starts no more
      try {
        control().cancel(cluster, name);
        ++deleted;
        forget_fenced(cluster, name);
        event("warn", fmt::format("supervisor: deleted fenced incarnation {} on {} as soon as "
                                  "its cluster answered (it was {} there)",
                                  name, cluster, it->second));
      } catch (const WorkloadNotFoundError&) {
        forget_fenced(cluster, name);
      } catch (const std::exception& e) {
        event("warn", fmt::format("supervisor: fenced incarnation {} on {}: the delete failed, "
                                  "tried again in {}: {}",
                                  name, cluster, seconds_text(s.fenced_poll_s), e.what()));
      }
    }
    return deleted;
  }

  // Cancels incarnations fenced earlier, once their cluster answers.
  void cancel_fenced(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s) {
    if (d.fenced.empty()) return;
    std::vector<std::pair<std::string, std::string>> left;
    for (const auto& [cluster, name] : d.fenced) {
      if (!listing(cluster, s)->ok) {
        left.emplace_back(cluster, name);
        continue;
      }
      ensure_leader(s);
      try {
        control().cancel(cluster, name);
        event("warn", fmt::format("supervisor: cancelled fenced incarnation {} on {} (its cluster "
                                  "answers again)",
                                  name, cluster));
      } catch (const WorkloadNotFoundError&) {
      } catch (const std::exception&) {
        left.emplace_back(cluster, name);
      }
    }
    if (left.size() != d.fenced.size()) {
      d.fenced = std::move(left);
      save(m, d);
    }
  }

  void recover(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s) {
    if (m.phase == RecoveryPhase::kFencing && !fence(m, d, s)) return;
    // Bounded: every turn of this loop is a failed create, counted against max_submit_attempts.
    for (;;) {
      if (m.phase == RecoveryPhase::kConfirming && !confirm_not_created(m, d, s)) return;
      if (m.phase == RecoveryPhase::kDeciding && !decide(m, d, s)) return;
      if (m.phase != RecoveryPhase::kSubmitting) return;
      if (submit(m, d, s)) return;
      // A failed create goes back to deciding: at once without the cluster it failed on, or
      // after a back-off once no other cluster can take it.
    }
  }

  // Waits for the old incarnation to be gone; true once it is (or fenced).
  bool fence(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s) {
    ensure_leader(s);
    std::string how;
    std::string not_confirmed;  // why the cancel did not confirm it gone
    try {
      const WorkloadHandle old = control().handle_for(d.old_cluster, d.old_name);
      if (const auto l = listing(d.old_cluster, s); !l->ok) {
        // Its cluster did not answer this pass: a cancel would fail the same way, and during an
        // outage it cost one xpk call per workload on that cluster in every pass, delaying the
        // looks at every other workload.
        not_confirmed = l->error;
      } else {
        control().cancel(old.cluster, old.workload_name);
        how = "cancel confirmed";
      }
    } catch (const WorkloadNotFoundError&) {
      how = "not listed";
    } catch (const UnknownClusterError&) {
      how = "its cluster was removed from the configuration";
    } catch (const std::exception& e) {
      not_confirmed = e.what();
    }
    if (how.empty()) {
      // Not confirmed. A listing that answers without it, or with it finished, is as good.
      const auto l = listing(d.old_cluster, s);
      if (l->ok) {
        const auto it = l->workloads.find(d.old_name);
        if (it == l->workloads.end()) {
          how = "not listed";
        } else if (is_terminal_state(it->second.state)) {
          how = "status " + it->second.state;
        }
      }
      if (how.empty()) {
        if (!is_set(d.fence_since)) d.fence_since = now();
        const double waited = seconds_between(d.fence_since, now());
        if (waited < s.fencing_lease_s) {
          due(d.fence_since + to_duration(s.fencing_lease_s));
          save(m, d);
          return false;
        }
        how = fmt::format("fenced: cluster {} unreachable for {} (fencing_lease_s {}): {}",
                          d.old_cluster, seconds_text(waited), s.fencing_lease_s, not_confirmed);
        d.fenced.emplace_back(d.old_cluster, d.old_name);
        note_fenced(d.old_cluster, d.old_name);
      }
    }
    RecoveryRecord r = incident_record(m, d);
    json detail = json::parse(r.detail_json, nullptr, false);
    if (!detail.is_object()) detail = json::object();
    detail["old_gone"] = how;
    r.detail_json = detail.dump();
    store().put_recovery(r);
    m.phase = RecoveryPhase::kDeciding;
    save(m, d);
    return true;
  }

  // Ends the incident as gave_up: the replacement could not be submitted.
  void give_up_submitting(ManagedWorkloadRecord& m, Detail& d, const std::string& why) {
    RecoveryRecord r = incident_record(m, d);
    r.attempts = d.submit_attempts;
    r.cause += fmt::format("; replacement not submitted after {} attempt{}: {}", d.submit_attempts,
                           d.submit_attempts == 1 ? "" : "s", why);
    move_to(m, ManagedState::kGaveUp);
    d.incident.clear();
    d.create_failed.clear();
    close_incident(r, "gave_up");
    save(m, d);
    event("error", fmt::format("supervisor: {} gave up: {}", m.name, why));
  }

  // Every cluster that could take the replacement failed its create this round (or the only
  // ones left are those): decide again after backoff_s, doubling each round up to backoff_max_s,
  // with those clusters candidates again.
  void backoff_round(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s,
                     const std::string& why) {
    ++d.rounds;
    const double delay =
        std::min(s.backoff_max_s, s.backoff_s * std::pow(2.0, std::min(d.rounds, 30) - 1));
    d.next_attempt = now() + to_duration(delay);
    d.create_failed.clear();
    m.phase = RecoveryPhase::kDeciding;
    due(d.next_attempt);
    save(m, d);
    event("warn", fmt::format("supervisor: {}: no cluster left to try after {} failed create{} "
                              "({}); next in {}",
                              d.replacement, d.submit_attempts, d.submit_attempts == 1 ? "" : "s",
                              why, seconds_text(delay)));
  }

  // No cluster can take the replacement now (every one unreachable, excluded, full or behind an
  // open breaker). That is not a failed attempt: giving up would lose a workload to a condition
  // that passes (a cluster revived, a breaker's cool-down over). The decision is made again
  // after the same back-off, doubling, for as long as it takes; capped at unreachable_grace_s
  // (when that is below backoff_max_s): a decision is a selection over cached probes, and with
  // the cap at backoff_max_s the replacements of a chaos run waited up to that long after a
  // cluster could take them again (a kill's SVRT +30 %).
  void wait_for_cluster(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s,
                        const std::string& why) {
    ++d.no_cluster;
    const double cap = std::min(s.backoff_max_s, std::max(s.backoff_s, s.unreachable_grace_s));
    const double delay = std::min(cap, s.backoff_s * std::pow(2.0, std::min(d.no_cluster, 30) - 1));
    d.next_attempt = now() + to_duration(delay);
    due(d.next_attempt);
    save(m, d);
    event("warn", fmt::format("supervisor: {}: no cluster for {} yet (decision {}); next in {}: {}",
                              m.name, d.replacement, d.no_cluster, seconds_text(delay), why));
  }

  // Chooses the replacement's cluster, never the old one nor one whose create failed this
  // round; true when chosen.
  bool decide(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s) {
    if (is_set(d.next_attempt) && now() < d.next_attempt) {
      due(d.next_attempt);
      return false;
    }
    ensure_leader(s);
    std::vector<std::string> excluded = {d.old_cluster};
    for (const auto* list : {&d.create_failed, &d.full}) {
      for (const std::string& c : *list) {
        if (std::find(excluded.begin(), excluded.end(), c) == excluded.end()) {
          excluded.push_back(c);
        }
      }
    }
    std::string cluster;
    std::int64_t selection_id = 0;
    // Each decision counts the ones before it (in flight, or submitted since the lists it counts
    // from). It lists and selects without a lock; when another placement was decided meanwhile
    // it decides again with that one counted. Every retry follows another decision's progress,
    // and a pass decides each workload at most once, so this ends.
    try {
      for (;;) {
        std::uint64_t seen = 0;
        {
          std::lock_guard lock(pass_state);
          seen = placements;
        }
        const PlacementHints hints = placement_hints(excluded, s);
        const Decision chosen =
            control().select_excluding(m.spec.accelerator_type, excluded, hints);
        cluster = chosen.selection.selected_cluster;
        selection_id = chosen.selection.selection_id;
        std::lock_guard lock(pass_state);
        if (placements != seen) continue;
        placing[m.name] = cluster;  // until its submit returned (submit())
        ++placements;
        break;
      }
    } catch (const NoAvailableClusterError& e) {
      if (!d.create_failed.empty()) {
        backoff_round(m, d, s, e.what());
      } else {
        // The full clusters are candidates again: one may have freed a slot since.
        d.full.clear();
        wait_for_cluster(m, d, s, e.what());
      }
      return false;
    }
    d.no_cluster = 0;
    d.next_attempt = StoreTime{};
    RecoveryRecord r = incident_record(m, d);
    r.decided = now();
    r.to_cluster = cluster;
    r.replacement = d.replacement;
    store().put_recovery(r);
    d.to_cluster = cluster;
    d.selection_id = selection_id;
    m.phase = RecoveryPhase::kSubmitting;  // the intent is stored before the submit
    save(m, d);
    return true;
  }

  // A create on d.to_cluster failed (transient: xpk failed, the API server did not answer). It
  // must be confirmed not to have made the workload before the replacement goes anywhere else,
  // or there could be two: true when confirmed absent (phase deciding, the cluster excluded for
  // this round); a replacement listed there after all is adopted (phase submitting, which
  // submit() then finds listed). A cluster that does not answer is asked again every pass, and
  // after fencing_lease_s without an answer the possible copy is fenced like an old
  // incarnation (cancelled once its cluster answers).
  bool confirm_not_created(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s) {
    if (!is_set(d.unconfirmed_since)) d.unconfirmed_since = now();
    const auto l = listing(d.to_cluster, s);
    if (l->ok && l->workloads.contains(d.replacement)) {
      event("warn",
            fmt::format("supervisor: {}: its failed create on {} made it after all; adopted",
                        d.replacement, d.to_cluster));
      d.unconfirmed_since = StoreTime{};
      m.phase = RecoveryPhase::kSubmitting;
      return true;
    }
    if (!l->ok) {
      const double waited = seconds_between(d.unconfirmed_since, now());
      if (waited < s.fencing_lease_s) {
        due(d.unconfirmed_since + to_duration(s.fencing_lease_s));
        save(m, d);
        return false;
      }
      d.fenced.emplace_back(d.to_cluster, d.replacement);
      note_fenced(d.to_cluster, d.replacement);
      event("warn", fmt::format("supervisor: {}: {} has not answered for {} since a failed create; "
                                "fenced, cancelled once it answers",
                                d.replacement, d.to_cluster, seconds_text(waited)));
    }
    d.unconfirmed_since = StoreTime{};
    decide_elsewhere(m, d);
    return true;
  }

  // The replacement made nothing on d.to_cluster: decided again at once, that cluster left out.
  void decide_elsewhere(ManagedWorkloadRecord& m, Detail& d) {
    d.create_failed.push_back(d.to_cluster);
    d.to_cluster.clear();
    d.selection_id = 0;
    d.next_attempt = StoreTime{};
    m.phase = RecoveryPhase::kDeciding;
    save(m, d);
  }

  // Submits the replacement; true when it is submitted (or the workload is done with).
  bool submit(ManagedWorkloadRecord& m, Detail& d, const SupervisorSettings& s) {
    // The placement decided for it counts as in flight until this returns.
    struct Placed {
      Impl& impl;
      const std::string& name;
      ~Placed() {
        std::lock_guard lock(impl.pass_state);
        impl.placing.erase(name);
      }
    } placed_guard{*this, m.name};
    ensure_leader(s);
    // After a hand-over the previous leader may have submitted it already: adopt it then. A
    // list from earlier in this pass is enough: one submitted since makes the create fail as a
    // duplicate, which is adopted too.
    bool exists = false;
    {
      const auto l = listing(d.to_cluster, s, true);
      exists = l->ok && l->workloads.contains(d.replacement);
    }
    if (!exists) {
      WorkloadSpec spec = m.spec;
      spec.name = d.replacement;
      spec.env["FALCON_RECOVERY_COUNT"] = std::to_string(m.attempts);
      spec.env["FALCON_PREVIOUS_WORKLOAD"] = d.old_name;
      try {
        add_fence(control(), m.name, spec);
      } catch (const std::exception& e) {
        // Nothing was started, and the cluster is not at fault: this turn ends (phase still
        // submitting) and the next pass tries again.
        event("warn", fmt::format("supervisor: {}: not started: its fence could not be "
                                  "advanced: {}; tried again next pass",
                                  d.replacement, e.what()));
        return true;
      }
      std::string failure;
      bool made_nothing = false;  // xpk stopped before its create step
      // Landed or not, it is no longer in flight: a decision from now on sees it in the
      // cluster's list (submitted since the list) or not at all.
      auto landed = [&](bool ok) {
        std::lock_guard lock(pass_state);
        placing.erase(m.name);
        if (ok) placed.emplace_back(d.to_cluster, now());
      };
      try {
        // Recorded once, with the decision that chose its cluster.
        control().submit({.spec = spec, .cluster = d.to_cluster, .selection_id = d.selection_id});
        landed(true);
      } catch (const InvalidWorkloadSpecError& e) {
        landed(false);
        ++d.submit_attempts;
        give_up_submitting(m, d, e.what());
        return true;
      } catch (const WorkloadNotCreatedError& e) {
        landed(false);
        failure = e.what();
        made_nothing = true;
      } catch (const WorkloadExistsError& e) {
        // The replacement's name exists: after a hand-over the previous leader submitted it.
        // Any other failure is not, though xpk's output may say "already exists" about its
        // service account and roles on every create.
        const bool duplicate = e.workload() == d.replacement;
        landed(duplicate);  // a duplicate is there: adopted below
        if (!duplicate) failure = e.what();
      } catch (const WorkloadSubmitError& e) {
        landed(false);
        failure = e.what();
      } catch (const StateStoreError&) {
        // The store could not take the replacement's intent, so nothing was created: neither
        // the cluster's failure nor an attempt. This workload's turn ends here (the pass says
        // why); the next pass decides again from what the store holds.
        landed(false);
        throw;
      } catch (const std::exception& e) {
        landed(false);
        failure = e.what();
      }
      if (!failure.empty()) {
        // A transient failure: the cluster's breaker heard it from the submit itself (the
        // fabric feeds <cluster>/<accelerator>). Another cluster is tried at once, once this
        // one is confirmed not to have made it; back-off only when none is left.
        ++d.submit_attempts;
        RecoveryRecord r = incident_record(m, d);
        r.attempts = d.submit_attempts;
        store().put_recovery(r);
        if (d.submit_attempts >= s.max_submit_attempts) {
          give_up_submitting(m, d, failure);
          return true;
        }
        event("warn", fmt::format("supervisor: {} create {} on {} failed: {}", d.replacement,
                                  d.submit_attempts, d.to_cluster, failure));
        if (made_nothing) {
          // Proof that it made nothing there (xpk gave up before its create step, e.g. at its
          // existence check against a cluster that just died): no list to confirm it by, and no
          // fencing wait if that cluster stops answering; another cluster is chosen at once.
          decide_elsewhere(m, d);
          return false;
        }
        m.phase = RecoveryPhase::kConfirming;
        d.unconfirmed_since = now();
        forget_listing(d.to_cluster);  // its list from before the create does not confirm
        save(m, d);
        return false;
      }
    }
    const WorkloadHandle made{d.replacement, d.to_cluster, "", ""};
    try {
      record_submitted(m, d);
    } catch (const ManagedConflict&) {
      undo_if_cancelled(m.name, made);
      throw;
    }
    return true;
  }

  // The replacement `made` exists, but the record changed since this pass read it: when that
  // was a cancel, the cancel wins and the replacement is deleted (else, e.g. a new leader, the
  // record's intent names it and whoever reads it next adopts it).
  void undo_if_cancelled(const std::string& name, const WorkloadHandle& made) {
    std::optional<ManagedWorkloadRecord> now_stored;
    try {
      now_stored = store().get_managed(name);
    } catch (const std::exception& e) {
      event("warn", fmt::format("supervisor: {}: cannot read it back after submitting {} ({}); "
                                "the next pass looks again",
                                name, made.workload_name, e.what()));
      return;
    }
    if (now_stored && now_stored->state != ManagedState::kCancelled) return;
    try {
      control().cancel(made.cluster, made.workload_name);
      event("warn", fmt::format("supervisor: {} was cancelled while its replacement {} was being "
                                "submitted; deleted {} from {}",
                                name, made.workload_name, made.workload_name, made.cluster));
    } catch (const WorkloadNotFoundError&) {
    } catch (const std::exception& e) {
      event("error", fmt::format("supervisor: {} was cancelled while its replacement {} was being "
                                 "submitted, and deleting it from {} failed: {}",
                                 name, made.workload_name, made.cluster, e.what()));
    }
  }

  // The replacement was submitted (or adopted): the incident and the record say so.
  void record_submitted(ManagedWorkloadRecord& m, Detail& d) {
    RecoveryRecord r = incident_record(m, d);
    r.submitted = now();
    r.attempts = d.submit_attempts + 1;
    store().put_recovery(r);
    event("info", fmt::format("supervisor: {} submitted to {} (replacing {} on {})", d.replacement,
                              d.to_cluster, d.old_name, d.old_cluster));
    m.incarnation = d.replacement;
    m.cluster = d.to_cluster;
    move_to(m, ManagedState::kStarting);
    d.memory = IncarnationMemory{};
    d.old_name.clear();
    d.old_cluster.clear();
    d.to_cluster.clear();
    d.selection_id = 0;
    d.replacement.clear();
    d.submit_attempts = 0;
    d.no_cluster = 0;
    d.rounds = 0;
    d.create_failed.clear();
    d.next_attempt = StoreTime{};
    d.fence_since = StoreTime{};
    d.unconfirmed_since = StoreTime{};
    save(m, d);
  }

  // --- A pass.

  bool run_once() {
    std::lock_guard pass(pass_mutex);
    const SupervisorSettings s = current_settings();
    if (!s.enabled) {
      std::lock_guard lock(mutex);
      leader = false;
      return false;
    }
    if (!take_lease(s)) return false;
    {
      std::lock_guard lock(pass_state);
      listings.clear();
      list_locks.clear();
      breaker_fed.clear();
      placing.clear();
      placed.clear();
      next_due = StoreTime{};
    }
    std::vector<ManagedWorkloadRecord> all;
    try {
      all = list_all_managed(store());
    } catch (const std::exception& e) {
      event("warn", fmt::format("supervisor: cannot read the managed workloads: {}", e.what()));
      return true;
    }
    auto guarded = [&](ManagedWorkloadRecord& m, const std::function<void()>& work) {
      try {
        work();
      } catch (const LostLease&) {
        throw;
      } catch (const ManagedConflict& e) {
        event("info", fmt::format("supervisor: {}: {}", m.name, e.what()));
      } catch (const std::exception& e) {
        event("warn", fmt::format("supervisor: {}: {}", m.name, e.what()));
      }
    };
    // First the fenced incarnations whose cluster answers again: a fenced copy QUEUED on a
    // revived cluster is admitted there at once, next to its replacement, until cancelled.
    std::vector<ManagedWorkloadRecord*> fenced;
    std::vector<ManagedWorkloadRecord*> active;
    std::map<std::string, std::set<std::string>> copies;
    for (ManagedWorkloadRecord& m : all) {
      const Detail d = Detail::parse(m.detail_json);
      for (const auto& [cluster, name] : d.fenced) copies[cluster].insert(name);
      if (!d.fenced.empty()) fenced.push_back(&m);
      if (is_active(m.state)) active.push_back(&m);
    }
    {
      std::lock_guard lock(fenced_mutex);
      fenced_copies = std::move(copies);
    }
    const int width = std::max(1, options.parallel);
    bool held = for_each_parallel(fenced.size(), width, [&](std::size_t i) {
      ManagedWorkloadRecord& m = *fenced[i];
      guarded(m, [&] {
        Detail d = Detail::parse(m.detail_json);
        cancel_fenced(m, d, s);
      });
    });
    if (held) {
      held = for_each_parallel(active.size(), width, [&](std::size_t i) {
        ManagedWorkloadRecord& m = *active[i];
        guarded(m, [&] { step(m, s); });
      });
    }
    {
      std::lock_guard lock(pass_state);
      listings.clear();
      list_locks.clear();
    }
    if (!held) return false;
    std::lock_guard lock(mutex);
    return leader;
  }

  // Runs work(i) for every i below n on up to `width` threads (this one included), each taking
  // the next i; once one of them lost the lease no more are started. False when it was lost.
  static bool for_each_parallel(std::size_t n, int width,
                                const std::function<void(std::size_t)>& work) {
    std::atomic<std::size_t> next{0};
    std::atomic<bool> lost{false};
    auto run = [&] {
      while (!lost) {
        const std::size_t i = next++;
        if (i >= n) return;
        try {
          work(i);
        } catch (const LostLease&) {
          lost = true;
        }
      }
    };
    std::vector<std::thread> threads;
    const std::size_t helpers = std::min(n, static_cast<std::size_t>(width)) > 0
                                    ? std::min(n, static_cast<std::size_t>(width)) - 1
                                    : 0;
    for (std::size_t t = 0; t < helpers; ++t) threads.emplace_back(run);
    run();
    for (std::thread& t : threads) t.join();
    return !lost;
  }

  StoreTime next_due_time() {
    std::lock_guard pass(pass_mutex);
    if (!leader_now()) return StoreTime{};
    std::lock_guard lock(pass_state);
    return next_due;
  }

  bool leader_now() const {
    std::lock_guard lock(mutex);
    return leader;
  }

  void release() {
    bool was = false;
    {
      std::lock_guard lock(mutex);
      was = leader;
      leader = false;
    }
    if (!was) return;
    try {
      store().release_lease(kSupervisorLease, holder, now());
    } catch (const std::exception&) {
      // It lapses after its TTL.
    }
  }
};

Supervisor::Supervisor(SupervisorOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

Supervisor::~Supervisor() { stop(); }

void Supervisor::start() {
  std::lock_guard lock(impl_->mutex);
  if (impl_->running) return;
  impl_->running = true;
  impl_->stopping = false;
  impl_->loop = std::thread([this] {
    for (;;) {
      try {
        impl_->run_once();
      } catch (const std::exception& e) {
        impl_->event("warn", fmt::format("supervisor: pass failed: {}", e.what()));
      }
      const SupervisorSettings s = impl_->current_settings();
      double wait = std::min(s.interval_s, s.lease_ttl_s / 3.0);
      // Something falls due before that (a grace period, the fencing lease, a back-off, a
      // stability window): the next pass runs then, not up to a whole interval later. At least
      // a tenth of the interval apart, so that a due time already past cannot spin the loop.
      if (const StoreTime due = impl_->next_due_time(); is_set(due)) {
        wait = std::min(wait, std::max(s.interval_s / 10.0, seconds_between(impl_->now(), due)));
      }
      std::unique_lock guard(impl_->mutex);
      const auto deadline = impl_->options.clock->steady_now() + to_duration(wait);
      if (impl_->options.clock->wait_until(guard, impl_->wake, deadline,
                                           [this] { return impl_->stopping; })) {
        return;
      }
    }
  });
  // Fenced incarnations are deleted as soon as their cluster answers, between passes.
  impl_->sweeper = std::thread([this] {
    for (;;) {
      {
        std::unique_lock guard(impl_->mutex);
        const auto deadline =
            impl_->options.clock->steady_now() + to_duration(impl_->settings.fenced_poll_s);
        if (impl_->options.clock->wait_until(guard, impl_->wake, deadline,
                                             [this] { return impl_->stopping; })) {
          return;
        }
      }
      try {
        impl_->sweep_fenced();
      } catch (const std::exception& e) {
        impl_->event("warn",
                     fmt::format("supervisor: sweep of fenced incarnations failed: {}", e.what()));
      }
    }
  });
}

void Supervisor::stop() {
  std::thread loop, sweeper;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->running) {
      impl_->running = false;
      impl_->stopping = true;
      impl_->wake.notify_all();
      loop = std::move(impl_->loop);
      sweeper = std::move(impl_->sweeper);
    }
  }
  if (loop.joinable()) loop.join();
  if (sweeper.joinable()) sweeper.join();
  std::lock_guard pass(impl_->pass_mutex);
  impl_->release();
}

bool Supervisor::run_once() { return impl_->run_once(); }

int Supervisor::sweep_fenced() { return impl_->sweep_fenced(); }

bool Supervisor::leader() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->leader;
}

const std::string& Supervisor::holder() const { return impl_->holder; }

void Supervisor::set_settings(const SupervisorSettings& settings) {
  std::lock_guard lock(impl_->mutex);
  impl_->settings = settings;
}

void Supervisor::write_metrics(serve::PrometheusText& out) const {
  std::lock_guard lock(impl_->mutex);
  out.family(
      "falcon_supervisor_leader", "gauge",
      "Whether this replica holds the supervisor lease and heals managed workloads (0 or 1)");
  out.sample("falcon_supervisor_leader", {}, impl_->leader ? 1.0 : 0.0);
  out.family("falcon_recoveries_total", "counter",
             "Recovery incidents this replica closed, by kind and outcome");
  for (const auto& [key, n] : impl_->outcomes) {
    out.sample("falcon_recoveries_total", {{"kind", key.first}, {"outcome", key.second}},
               static_cast<double>(n));
  }
  out.family("falcon_recovery_phase_seconds", "histogram",
             "Recovered incidents' phases (detection, decision, submit, admission, stability) "
             "and their SVRT (phase=svrt)");
  for (const auto& [phase, h] : impl_->phases) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kPhaseBounds.size(); ++i) {
      cumulative += h.buckets[i];
      out.sample("falcon_recovery_phase_seconds_bucket",
                 {{"phase", phase}, {"le", fmt::format("{}", kPhaseBounds[i])}},
                 static_cast<double>(cumulative));
    }
    out.sample("falcon_recovery_phase_seconds_bucket", {{"phase", phase}, {"le", "+Inf"}},
               static_cast<double>(h.count));
    out.sample("falcon_recovery_phase_seconds_sum", {{"phase", phase}}, h.sum);
    out.sample("falcon_recovery_phase_seconds_count", {{"phase", phase}},
               static_cast<double>(h.count));
  }
}

}  // namespace falcon
