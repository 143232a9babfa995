#include "fleet/simulator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "common/names.h"
#include "common/rfc3339.h"
#include "common/xpk_accelerators.h"
#include "fleet/manager.h"

namespace falcon::fleet {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kGenerateBatch = 50'000;

int priority_rank(const std::string& priority) {
  if (priority == "very-high") return 4;
  if (priority == "high") return 3;
  if (priority == "medium") return 2;
  if (priority == "low") return 1;
  return 0;
}

struct RunPlan {
  std::int64_t duration_ns = 600 * kSecond;
  Outcome outcome = Outcome::kSucceed;
  int exit_code = 1;
  int steps = 100;
  int lines_per_step = 1;
  std::optional<int> total_lines;
  int omit_index_every = 0;
  bool pregenerate = false;
  std::int64_t checkpoint_ns = 0;  // simulated time between checkpoints; 0: each step's end
  std::vector<std::string> warnings;
};

std::optional<long long> parse_int(const std::string& text, long long min, long long max) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used != text.size() || v < min || v > max) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

RunPlan make_plan(const RunDefaults& defaults, const LogSettings& logs,
                  const std::map<std::string, std::string>& env) {
  RunPlan plan;
  plan.duration_ns = static_cast<std::int64_t>(std::llround(defaults.duration_s * 1e9));
  plan.outcome = defaults.outcome;
  plan.exit_code = defaults.exit_code;
  plan.steps = defaults.steps;
  plan.lines_per_step = defaults.log_lines_per_step;
  plan.omit_index_every = logs.omit_completion_index_every;
  const auto bad = [&](const std::string& key, const std::string& value) {
    plan.warnings.push_back(fmt::format("{}={}: ignored (not a valid value)", key, value));
  };
  std::optional<Outcome> outcome;
  std::optional<long long> exit_code;
  for (const auto& [key, value] : env) {
    if (key == "FLEET_DURATION_S") {
      try {
        std::size_t used = 0;
        const double d = std::stod(value, &used);
        if (used != value.size() || !std::isfinite(d) || d < 0 || d > 1e9) throw 0;
        plan.duration_ns = static_cast<std::int64_t>(std::llround(d * 1e9));
      } catch (...) {
        bad(key, value);
      }
    } else if (key == "FLEET_OUTCOME") {
      outcome = parse_outcome(value);
      if (!outcome) bad(key, value);
    } else if (key == "FLEET_EXIT_CODE") {
      exit_code = parse_int(value, 0, 255);
      if (!exit_code) bad(key, value);
    } else if (key == "FLEET_STEPS") {
      if (auto v = parse_int(value, 0, 10'000'000)) {
        plan.steps = static_cast<int>(*v);
      } else {
        bad(key, value);
      }
    } else if (key == "FLEET_LOG_LINES_PER_STEP") {
      if (auto v = parse_int(value, 1, 1000)) {
        plan.lines_per_step = static_cast<int>(*v);
      } else {
        bad(key, value);
      }
    } else if (key == "FLEET_LOG_LINES") {
      if (auto v = parse_int(value, 0, 100'000'000)) {
        plan.total_lines = static_cast<int>(*v);
      } else {
        bad(key, value);
      }
    } else if (key == "FLEET_OMIT_INDEX_EVERY") {
      if (auto v = parse_int(value, 0, 1'000'000)) {
        plan.omit_index_every = static_cast<int>(*v);
      } else {
        bad(key, value);
      }
    } else if (key == "FLEET_CHECKPOINT_S") {
      if (auto v = parse_int(value, 1, 1'000'000'000)) {
        plan.checkpoint_ns = *v * kSecond;
      } else {
        bad(key, value);
      }
    } else if (key == "FLEET_PREGENERATE_LOGS") {
      plan.pregenerate = value == "1" || value == "true" || value == "yes";
    }
  }
  if (outcome) plan.outcome = *outcome;
  if (exit_code) {
    if (*exit_code != 0) {
      plan.exit_code = static_cast<int>(*exit_code);
      if (!outcome) plan.outcome = Outcome::kFail;
    } else if (!outcome) {
      plan.outcome = Outcome::kSucceed;
    }
  }
  return plan;
}

// A GKE node name: gke-<cluster>-np-<slice>-<8 hex>-<4 chars>.
std::string node_name(const std::string& cluster_id, int slice, std::uint64_t pool_seed,
                      std::uint64_t node_seed) {
  return fmt::format("gke-{}-np-{}-{:08x}-{}", cluster_id.substr(0, 20), slice,
                     static_cast<std::uint32_t>(pool_seed >> 32),
                     make_pod_name("", 0, 0, node_seed ^ 0x5bd1e995).substr(15, 4));
}

struct Condition {
  const char* type;
  std::string message;
  std::int64_t time_ns;
  bool status = true;
  const char* reason = "";
};

}  // namespace

std::string format_k8s_time(std::int64_t time_ns) {
  return tools::format_rfc3339(time_ns, 0);  // 2026-06-01T10:00:00Z
}

namespace {

// A Kubernetes-shaped UID derived from a workload's seed (the preemptor named in an eviction).
std::string derived_uid(std::uint64_t seed) {
  return fmt::format("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                     static_cast<std::uint32_t>(mix64(seed + 1)), mix64(seed + 2) & 0xFFFF,
                     mix64(seed + 3) & 0xFFF, mix64(seed + 4) & 0xFFF,
                     mix64(seed + 5) & 0xFFFFFFFFFFFFull);
}

}  // namespace

struct FleetSimulator::Workload {
  struct Pod {
    explicit Pod(const PodIdentity& identity) : writer(identity) {}
    PodLogWriter writer;
    PodScript script;
    std::size_t emitted = 0;
    bool terminated = false;
  };

  CreateRequest request;
  std::string capacity_key;  // the device type as the cluster's capacity names it
  DeviceClass device_class = DeviceClass::kTpu;
  int workers = 1;  // per slice
  int vms = 1;      // pods in the whole workload
  RunPlan plan;
  std::uint64_t seed = 0;
  std::uint64_t sequence = 0;
  std::int64_t created_ns = 0;
  std::int64_t reserved_ns = -1;
  std::int64_t started_ns = -1;
  std::int64_t finished_ns = -1;
  std::int64_t run_ns = 0;  // plan.duration_ns on the fleet's clock (SimClock::span_ns)
  bool failed = false;
  std::vector<Pod> pods;
  std::size_t lines_written = 0;
  // Slice-shaped capacity (FleetCluster::topology): the GKE accelerator label whose blocks it
  // takes, the chips of one slice, and where its slices were placed while it runs.
  std::string topology_label;
  int slice_chips = 0;
  struct Placement {
    int block = 0;
    int offset = 0;
    int chips = 0;
  };
  std::vector<Placement> placed;
  // Faults.
  int evictions = 0;
  std::int64_t evicted_ns = -1;    // the last eviction
  std::int64_t readmit_at_ns = 0;  // 0: may be admitted; kNever: held; else not before then
  std::string evict_message;
  int failed_slice = 0;  // the slice whose job failed first (JobSet's message)
  // Checkpoints (FleetSimulator::set_fence_reader): the end of each step written, the steps
  // looked at so far, and the checks its fence refused.
  std::vector<std::int64_t> checkpoints_ns;
  int steps_checked = 0;
  int fence_refusals = 0;  // 0 or 1: a refused check ends its writes
  int platform_exit = 0;   // 137/143: a worker killed by the platform (fail_node)
  bool lost = false;       // ended with its cluster's nodes (kill_cluster, KillMode::kFail)

  bool queued() const { return reserved_ns < 0; }
  bool running() const { return reserved_ns >= 0 && finished_ns < 0; }
  bool finished() const { return finished_ns >= 0; }
  std::int64_t end_ns() const { return started_ns + run_ns; }
  const char* state() const {
    if (queued()) return "QUEUED";
    if (running()) return "RUNNING";
    return failed ? "FAILED" : "COMPLETED";
  }
  int exit_code() const {
    if (platform_exit != 0) return platform_exit;
    if (lost) return 137;
    return plan.outcome == Outcome::kFail ? plan.exit_code : 0;
  }
};

struct FleetSimulator::Cluster {
  FleetCluster spec;
  std::vector<std::unique_ptr<Workload>> workloads;  // creation order
  std::uint64_t kubectl_calls = 0;
  std::uint64_t kubectl_failures = 0;
  std::mt19937_64 flaky_rng;
  std::set<std::string> kubeconfigs;
  std::string endpoint_ip;
  bool down = false;        // killed with KillMode::kFail: no nodes, no admission
  int failing_creates = 0;  // the next creates that fail (fail_next_creates)

  // label -> block -> chip in use, from the running workloads' placements.
  std::map<std::string, std::vector<std::vector<char>>> occupancy() const {
    std::map<std::string, std::vector<std::vector<char>>> out;
    for (const auto& [label, blocks] : spec.topology) {
      auto& o = out[label];
      for (int size : blocks) o.emplace_back(static_cast<std::size_t>(size), 0);
    }
    for (const auto& w : workloads) {
      if (!w->running() || w->topology_label.empty()) continue;
      auto& o = out[w->topology_label];
      for (const auto& p : w->placed) {
        if (p.block >= static_cast<int>(o.size())) continue;
        for (int i = p.offset; i < p.offset + p.chips; ++i) o[p.block][i] = 1;
      }
    }
    return out;
  }

  std::optional<std::string> capacity_key(const std::string& device_type) const {
    if (spec.capacity.count(device_type)) return device_type;
    const std::string alt =
        device_type.rfind("tpu-", 0) == 0 ? device_type.substr(4) : "tpu-" + device_type;
    if (spec.capacity.count(alt)) return alt;
    return std::nullopt;
  }

  Workload* find(const std::string& name, const std::string* ns) {
    for (auto& w : workloads) {
      if (w->request.workload == name && (!ns || w->request.namespace_ == *ns)) return w.get();
    }
    return nullptr;
  }
};

namespace {

using Entries = std::vector<LogRun>;

// Appends `line` to the run of its pod and stream at the end of `out`, or starts one.
void append_line(Entries& out, const PodLogWriter& writer, LogLine line) {
  const auto& shared = writer.shared(line.is_stderr);
  if (out.empty() || out.back().shared != shared) out.push_back(LogRun{shared, {}});
  out.back().lines.push_back(TextLine{line.time_ns, std::move(line.text)});
}

}  // namespace

FleetSimulator::FleetSimulator(FleetConfig config, std::shared_ptr<SimClock> clock,
                               std::shared_ptr<LogSink> sink)
    : config_(std::move(config)), clock_(std::move(clock)), sink_(std::move(sink)) {
  if (!clock_) throw std::invalid_argument("FleetSimulator needs a clock");
  if (!sink_) sink_ = std::make_shared<NullLogSink>();
  start_ns_ = clock_->now_ns();
  for (const auto& spec : config_.clusters) {
    auto c = std::make_unique<Cluster>();
    c->spec = spec;
    c->flaky_rng.seed(spec.behaviour.flaky.seed);
    const std::uint64_t h = hash_string(spec.project + "/" + spec.cluster_id);
    c->endpoint_ip = fmt::format("34.{}.{}.{}", 64 + h % 64, (h >> 8) % 256, 2 + (h >> 16) % 250);
    clusters_.push_back(std::move(c));
  }
  // Initial workloads, in file order, as if created one after the other just now.
  for (const auto& spec : config_.clusters) {
    for (const auto& initial : spec.workloads) {
      for (int i = 1; i <= initial.count; ++i) {
        CreateRequest req;
        req.workload = initial.count > 1 ? fmt::format("{}-{}", initial.name, i) : initial.name;
        req.device_type = initial.device_type;
        req.tpu_type_flag = classify_device(initial.device_type, false) == DeviceClass::kTpu;
        req.num_slices = initial.num_slices;
        req.priority = initial.priority;
        req.namespace_ = initial.namespace_;
        req.env = initial.env;
        req.command = "python3 train.py";
        req.docker_image = "gcr.io/" + spec.project + "/trainer:latest";
        std::unique_lock lock(mu_);
        Entries out;
        // Not a kubectl call: unreachable and flaky clusters still start with their workloads.
        const CreateResult result =
            create_locked(cluster_locked(spec.name), req, false, clock_->now_ns(), out);
        lock.unlock();
        flush(std::move(out));
        if (result != CreateResult::kCreated) {
          throw std::invalid_argument(fmt::format(
              "initial workload {} on cluster {} could not be created", req.workload, spec.name));
        }
      }
    }
  }
  if (config_.manager) manager_ = std::make_unique<MultiKueueManager>(*this, *config_.manager);
}

FleetSimulator::~FleetSimulator() = default;

FleetSimulator::Cluster& FleetSimulator::cluster_locked(const std::string& name) {
  for (auto& c : clusters_) {
    if (c->spec.name == name) return *c;
  }
  throw std::out_of_range("no cluster named '" + name + "' in the fleet");
}

const FleetSimulator::Cluster& FleetSimulator::cluster_locked(const std::string& name) const {
  for (const auto& c : clusters_) {
    if (c->spec.name == name) return *c;
  }
  throw std::out_of_range("no cluster named '" + name + "' in the fleet");
}

bool FleetSimulator::kueue_installed(const std::string& name) const {
  std::lock_guard lock(mu_);
  return cluster_locked(name).spec.behaviour.kueue;
}

void FleetSimulator::set_kueue(const std::string& name, bool installed) {
  std::lock_guard lock(mu_);
  cluster_locked(name).spec.behaviour.kueue = installed;
}

void FleetSimulator::set_cluster_queues_readable(const std::string& name, bool readable) {
  std::lock_guard lock(mu_);
  cluster_locked(name).spec.behaviour.cluster_queues_readable = readable;
}

ClusterBehaviour FleetSimulator::behaviour(const std::string& name) const {
  std::lock_guard lock(mu_);
  return cluster_locked(name).spec.behaviour;
}

namespace {

std::string known_cluster_message(const std::string& name) {
  return "no cluster named '" + name + "' in the fleet";
}

}  // namespace

namespace {

// kubectl's words for a resource type the API does not serve (no Kueue CRDs), as xpk shows
// them (reference/xpk.md §1.1).
KubectlFailure no_workloads_resource() {
  return KubectlFailure{"error: the server doesn't have a resource type \"workloads\"\n", 1};
}

}  // namespace

const FleetCluster& FleetSimulator::cluster(const std::string& name) const {
  for (const auto& c : config_.clusters) {
    if (c.name == name) return c;
  }
  throw std::out_of_range("no cluster named '" + name + "' in the fleet");
}

std::optional<std::string> FleetSimulator::resolve(const std::string& project,
                                                   const std::string& zone,
                                                   const std::string& cluster_id) const {
  std::vector<const FleetCluster*> matches;
  for (const auto& c : config_.clusters) {
    if (c.project == project && c.cluster_id == cluster_id) matches.push_back(&c);
  }
  if (matches.empty()) return std::nullopt;
  for (const FleetCluster* c : matches) {
    if (c->zone == zone || c->location == zone || tools::region_of(c->zone) == zone) return c->name;
  }
  return matches.front()->name;
}

bool FleetSimulator::down_locked(const Cluster& c, std::int64_t now) const {
  const ClusterBehaviour& b = c.spec.behaviour;
  if (b.unreachable) return true;
  const FlapSpec& f = b.flap;
  if (f.period_s <= 0) return false;
  const std::int64_t period = clock_->span_ns(f.period_s * kSecond);
  const std::int64_t down = clock_->span_ns(f.down_s * kSecond);
  if (period <= 0) return false;
  const std::int64_t t = now - start_ns_ + clock_->span_ns(f.offset_s * kSecond);
  return ((t % period) + period) % period < down;
}

std::optional<KubectlFailure> FleetSimulator::kubectl_fate_locked(Cluster& c) {
  ++c.kubectl_calls;
  const ClusterBehaviour& b = c.spec.behaviour;
  std::optional<KubectlFailure> failure;
  if (down_locked(c, clock_->now_ns())) {
    failure = KubectlFailure{
        fmt::format("Unable to connect to the server: dial tcp {}:443: i/o timeout\n",
                    c.endpoint_ip),
        1};
  } else if (b.flaky.every > 0 &&
             c.kubectl_calls % static_cast<std::uint64_t>(b.flaky.every) == 0) {
    failure =
        KubectlFailure{"Unable to connect to the server: net/http: TLS handshake timeout\n", 1};
  } else if (b.flaky.probability > 0) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (u(c.flaky_rng) < b.flaky.probability) {
      failure =
          KubectlFailure{"Unable to connect to the server: net/http: TLS handshake timeout\n", 1};
    }
  }
  if (failure) ++c.kubectl_failures;
  return failure;
}

namespace {

template <typename W>
void emit_pod_lines(W& w, typename W::Pod& pod, std::int64_t until_ns, bool all, Entries& out) {
  const std::size_t count = pod.script.line_count();
  while (pod.emitted < count) {
    LogLine line = pod.script.line(pod.emitted);
    if (!all && line.time_ns > until_ns) break;
    append_line(out, pod.writer, std::move(line));
    ++pod.emitted;
    ++w.lines_written;
  }
}

// Stops the pods at `t`: each running pod's last lines are its SIGTERM lines, at t - 1 and t
// (later only when the pod already wrote a line that late), so none lies after `t`.
template <typename W>
void terminate_pods(W& w, std::int64_t t, Entries& out) {
  for (auto& pod : w.pods) {
    emit_pod_lines(w, pod, t - 2, false, out);
    const std::size_t count = pod.script.line_count();
    if (pod.emitted < count && t >= pod.script.start_ns) {
      std::int64_t at = t - 1;
      if (pod.emitted > 0) at = std::max(at, pod.script.line(pod.emitted - 1).time_ns + 1);
      for (int which = 0; which < 2; ++which) {
        append_line(out, pod.writer, PodScript::termination_line(at, which));
        ++w.lines_written;
      }
    }
    pod.emitted = count;
    pod.terminated = true;
  }
}

// Kueue's Finished message: JobSet's words for the run's end.
template <typename W>
std::string finish_message(const W& w) {
  if (!w.failed) return "jobset completed successfully";
  return fmt::format(
      "jobset failed due to reaching max number of restarts (first failed job: "
      "{}-slice-job-{})",
      w.request.workload, w.failed_slice);
}

template <typename W>
void set_scripts(W& w, std::int64_t start_ns) {
  for (std::size_t i = 0; i < w.pods.size(); ++i) {
    auto& pod = w.pods[i];
    const PodIdentity& id = pod.writer.pod();
    PodScript& s = pod.script;
    s.start_ns = start_ns;
    s.end_ns = start_ns + w.run_ns;
    s.failing = w.plan.outcome == Outcome::kFail && id.slice == 0 && id.worker == 0;
    s.exit_code = w.plan.outcome == Outcome::kFail ? (s.failing ? w.plan.exit_code : 143) : 0;
    if (w.plan.total_lines) {
      s.steps = steps_for_total_lines(*w.plan.total_lines, s.failing);
      s.lines_per_step = 1;
    } else {
      s.steps = w.plan.steps;
      s.lines_per_step = w.plan.lines_per_step;
    }
    s.seed = mix64(w.seed + i + 1);
  }
}

}  // namespace

namespace {

// First fit: each slice of `w` in the first free run of its chips within one block. Marks
// `blocks` and records the placement; false (nothing marked) when a slice does not fit.
template <typename W>
bool place_slices(W& w, std::vector<std::vector<char>>& blocks) {
  auto trial = blocks;
  decltype(w.placed) placed;
  const int slices = w.device_class == DeviceClass::kGpu ? 1 : std::max(1, w.request.num_slices);
  for (int s = 0; s < slices; ++s) {
    bool done = false;
    for (std::size_t b = 0; b < trial.size() && !done; ++b) {
      int run = 0;
      for (std::size_t i = 0; i < trial[b].size(); ++i) {
        run = trial[b][i] ? 0 : run + 1;
        if (run == w.slice_chips) {
          const int start = static_cast<int>(i) + 1 - run;
          for (int k = start; k <= static_cast<int>(i); ++k) trial[b][k] = 1;
          placed.push_back({static_cast<int>(b), start, run});
          done = true;
          break;
        }
      }
    }
    if (!done) return false;
  }
  blocks = std::move(trial);
  w.placed = std::move(placed);
  return true;
}

}  // namespace
void FleetSimulator::kill_cluster(const std::string& name, KillMode mode) {
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  Cluster* c = &fault_cluster_locked(name);
  c->spec.behaviour.unreachable = true;
  if (mode == KillMode::kFail) {
    c->down = true;
    for (auto& w : c->workloads) {
      if (!w->running()) continue;
      // The nodes are gone: no last lines, the JobSet fails (xpk's --max-restarts 0).
      for (auto& pod : w->pods) {
        emit_pod_lines(*w, pod, now, false, out);
        pod.emitted = pod.script.line_count();
        pod.terminated = true;
      }
      if (w->started_ns > now) w->started_ns = now;
      w->finished_ns = now;
      w->failed = true;
      w->lost = true;
    }
  }
  lock.unlock();
  flush(std::move(out));
}

void FleetSimulator::revive_cluster(const std::string& name) {
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  Cluster* c = &fault_cluster_locked(name);
  c->spec.behaviour.unreachable = false;
  c->down = false;
  Entries more = advance_locked(now);  // admission resumes
  out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  lock.unlock();
  flush(std::move(out));
}

FleetSimulator::Cluster& FleetSimulator::fault_cluster_locked(const std::string& name) {
  for (auto& cp : clusters_) {
    if (cp->spec.name == name) return *cp;
  }
  throw FaultError(404, known_cluster_message(name));
}

FleetSimulator::Workload& FleetSimulator::running_workload_locked(Cluster& c,
                                                                  const std::string& name,
                                                                  const char* fault) {
  Workload* w = c.find(name, nullptr);
  if (!w) {
    throw FaultError(404, fmt::format("no workload named '{}' on cluster '{}'", name, c.spec.name));
  }
  if (!w->running()) {
    throw FaultError(400, fmt::format("{}: workload '{}' on cluster '{}' is {}, not RUNNING", fault,
                                      name, c.spec.name, w->state()));
  }
  return *w;
}

FaultResult FleetSimulator::evict(const EvictRequest& request) {
  if (!(request.readmit_after_s >= 0) || request.readmit_after_s > 1e9) {
    throw FaultError(400, "readmit_after_s must be a number of seconds between 0 and 1e9");
  }
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  Cluster* c = &fault_cluster_locked(request.cluster);
  Workload& w = running_workload_locked(*c, request.workload, "evict");
  evict_locked(
      *c, w, now, request.preemptor_uid.empty() ? derived_uid(w.seed) : request.preemptor_uid,
      request.readmit
          ? std::max<std::int64_t>(1, now + clock_->span_ns(static_cast<std::int64_t>(
                                                std::llround(request.readmit_after_s * 1e9))))
          : kNever,
      out);
  FaultResult result{w.request.workload, w.state(), {}};
  Entries more = advance_locked(now);  // its slot goes to the next queued workload
  out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  result.state = w.state();
  lock.unlock();
  flush(std::move(out));
  return result;
}

std::int64_t FleetSimulator::checkpointed_ns(const Workload& w, std::int64_t t) const {
  if (w.plan.checkpoint_ns <= 0 || w.started_ns < 0 || t <= w.started_ns) return 0;
  const std::int64_t step_ns = std::max<std::int64_t>(1, clock_->span_ns(w.plan.checkpoint_ns));
  return std::min((w.run_ns - 1) / step_ns, (t - w.started_ns) / step_ns) * step_ns;
}

std::int64_t FleetSimulator::evict_locked(Cluster& c, Workload& w, std::int64_t t,
                                          const std::string& preemptor_uid,
                                          std::int64_t readmit_at_ns, Entries& out) {
  checkpoint_locked(w, t);    // the checkpoints written up to the eviction
  terminate_pods(w, t, out);  // Kueue suspends the JobSet: the pods get SIGTERM
  w.evict_message = fmt::format(
      "Preempted to accommodate a workload (UID: {}, JobUID: UNKNOWN) due to prioritization in "
      "the ClusterQueue; preemptor path: /cluster-queue; preemptee path: /cluster-queue",
      preemptor_uid);
  // A job that checkpoints every FLEET_CHECKPOINT_S resumes from its last one: what is left of
  // its run is what the next start runs. Without, it starts over.
  const std::int64_t kept = checkpointed_ns(w, t);
  const std::int64_t lost =
      w.started_ns >= 0 ? std::max<std::int64_t>(0, t - w.started_ns) - kept : 0;
  if (kept > 0) {
    w.run_ns -= kept;
    w.steps_checked = 0;  // checkpoints count again from the next start
  }
  ++w.evictions;
  w.evicted_ns = t;
  w.reserved_ns = -1;
  w.started_ns = -1;
  w.placed.clear();
  w.readmit_at_ns = readmit_at_ns;
  // The JobSet's jobs are recreated on readmission: new pods (new names).
  w.seed = mix64(w.seed + 0x9e3779b97f4a7c15ull);
  make_pods(c, w);
  return lost;
}

bool FleetSimulator::preempt_for_locked(
    Cluster& c, Workload& w, std::map<std::string, int>& in_use,
    std::map<std::string, std::vector<std::vector<char>>>& blocks, std::int64_t t, Entries& out) {
  // Candidates: running workloads of lower priority holding what `w` needs (its slots, or
  // chips of its topology label), in Kueue's order: lowest priority first, then the most
  // recently started (the least work lost).
  const int rank = priority_rank(w.request.priority);
  std::vector<Workload*> candidates;
  for (auto& v : c.workloads) {
    if (!v->running() || priority_rank(v->request.priority) >= rank) continue;
    const bool slot = v->capacity_key == w.capacity_key;
    const bool chips = !w.topology_label.empty() && v->topology_label == w.topology_label;
    if (slot || chips) candidates.push_back(v.get());
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Workload* a, const Workload* b) {
    const int pa = priority_rank(a->request.priority);
    const int pb = priority_rank(b->request.priority);
    if (pa != pb) return pa < pb;
    return a->reserved_ns > b->reserved_ns;
  });
  // Whether `w` fits once `victims` are gone; on a fit, the trial blocks it was placed in.
  std::vector<std::vector<char>> placed_in;
  const auto fits_without = [&](const std::vector<Workload*>& victims) {
    int slots = in_use[w.capacity_key];
    for (const Workload* v : victims) slots -= v->capacity_key == w.capacity_key ? 1 : 0;
    if (slots >= c.spec.capacity.at(w.capacity_key)) return false;
    if (w.topology_label.empty()) return true;
    auto trial = blocks[w.topology_label];
    for (const Workload* v : victims) {
      if (v->topology_label != w.topology_label) continue;
      for (const auto& p : v->placed) {
        for (int i = p.offset; i < p.offset + p.chips; ++i) trial[p.block][i] = 0;
      }
    }
    if (!place_slices(w, trial)) return false;
    placed_in = std::move(trial);
    return true;
  };
  std::vector<Workload*> victims;
  bool fits = false;
  for (Workload* v : candidates) {
    victims.push_back(v);
    if ((fits = fits_without(victims))) break;
  }
  if (!fits) return false;
  // As few as make room: each victim, the last chosen first, is spared when `w` fits without it.
  for (std::size_t i = victims.size(); i-- > 0;) {
    std::vector<Workload*> fewer = victims;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
    if (fits_without(fewer)) victims = std::move(fewer);
  }
  fits_without(victims);  // `w.placed` and `placed_in` for the set kept
  const std::string uid = derived_uid(w.seed);
  // A victim holds w's slots or chips of w's label (placed_in has them freed already).
  for (Workload* v : victims) {
    if (v->capacity_key == w.capacity_key) --in_use[w.capacity_key];
    int chips = 0;
    for (const auto& p : v->placed) chips += p.chips;
    const std::int64_t lost_ns = evict_locked(c, *v, t, uid, 0, out);
    ++preempted_;
    preempted_lost_chip_s_ += static_cast<double>(chips) * static_cast<double>(lost_ns) / 1e9;
  }
  if (!w.topology_label.empty()) blocks[w.topology_label] = std::move(placed_in);
  return true;
}

FaultResult FleetSimulator::fail_node(const NodeFailRequest& request) {
  if (request.exit_code != 137 && request.exit_code != 143) {
    throw FaultError(400, fmt::format("exit_code must be 137 (SIGKILL) or 143 (SIGTERM), not {}",
                                      request.exit_code));
  }
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  Cluster* c = &fault_cluster_locked(request.cluster);
  Workload* w = nullptr;
  std::vector<std::size_t> victims;
  if (!request.node.empty()) {
    for (auto& wp : c->workloads) {
      for (std::size_t i = 0; i < wp->pods.size(); ++i) {
        if (wp->pods[i].writer.pod().node_name == request.node) {
          w = wp.get();
          victims.push_back(i);
        }
      }
      if (w) break;
    }
    if (!w) {
      throw FaultError(
          404, fmt::format("no pod on node '{}' in cluster '{}'", request.node, c->spec.name));
    }
    if (!w->running()) {
      throw FaultError(400, fmt::format("fail_node: workload '{}' on node '{}' is {}, not RUNNING",
                                        w->request.workload, request.node, w->state()));
    }
  } else {
    if (request.workload.empty()) {
      throw FaultError(400, "fail_node needs a 'node' or a 'workload' (with slice and worker)");
    }
    w = &running_workload_locked(*c, request.workload, "fail_node");
    for (std::size_t i = 0; i < w->pods.size(); ++i) {
      const PodIdentity& id = w->pods[i].writer.pod();
      if (id.slice == request.slice && id.worker == request.worker) victims.push_back(i);
    }
    if (victims.empty()) {
      throw FaultError(404, fmt::format("workload '{}' has no worker {} in slice {}",
                                        request.workload, request.worker, request.slice));
    }
  }
  if (w->started_ns > now) {
    throw FaultError(400, fmt::format("fail_node: the pods of '{}' have not started yet (admitted "
                                      "at {})",
                                      w->request.workload, format_k8s_time(w->started_ns)));
  }
  FaultResult result;
  result.workload = w->request.workload;
  // The platform kills the worker: its script's `EXIT_CODE=$?` line reports the signal.
  for (std::size_t i : victims) {
    auto& pod = w->pods[i];
    emit_pod_lines(*w, pod, now - 2, false, out);
    if (pod.emitted < pod.script.line_count()) {
      std::int64_t at = now - 1;
      if (pod.emitted > 0) at = std::max(at, pod.script.line(pod.emitted - 1).time_ns + 1);
      append_line(out, pod.writer, PodScript::termination_line(at, 0));
      LogLine exit = PodScript::termination_line(at, 1);
      exit.text = fmt::format("EXIT_CODE={}", request.exit_code);
      append_line(out, pod.writer, std::move(exit));
      w->lines_written += 2;
    }
    pod.emitted = pod.script.line_count();
    pod.terminated = true;
    result.pods.push_back(pod.writer.pod().pod_name);
  }
  // JobSet fails (no restarts left) and stops the other workers: SIGTERM.
  terminate_pods(*w, now, out);
  w->failed_slice = w->pods[victims.front()].writer.pod().slice;
  w->platform_exit = request.exit_code;
  w->finished_ns = now;
  w->failed = true;
  result.state = w->state();
  Entries more = advance_locked(now);
  out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  lock.unlock();
  flush(std::move(out));
  return result;
}

int FleetSimulator::fail_next_creates(const std::string& name, int count) {
  if (count < 0 || count > 1'000'000) {
    throw FaultError(400, "count must be between 0 and 1000000");
  }
  std::lock_guard lock(mu_);
  fault_cluster_locked(name).failing_creates = count;
  return count;
}

void FleetSimulator::flush(std::vector<LogRun> runs) {
  for (auto& run : runs) {
    entries_written_ += run.lines.size();
    sink_->write_lines(*run.shared, std::move(run.lines));
  }
}

std::vector<LogRun> FleetSimulator::run_clusters_locked(std::int64_t now) {
  Entries out;
  for (auto& cp : clusters_) {
    Cluster& c = *cp;
    const auto admit = [&](std::int64_t t) {
      // A readmission time reached is used up even while the nodes are gone (the workload then
      // waits with the others for the revive): the event loop below takes the earliest one
      // again and again until it is.
      for (auto& w : c.workloads) {
        if (w->queued() && w->readmit_at_ns > 0 && w->readmit_at_ns <= t) w->readmit_at_ns = 0;
      }
      if (c.down) return;
      std::map<std::string, int> in_use;
      auto blocks = c.occupancy();
      std::vector<Workload*> queued;
      for (auto& w : c.workloads) {
        if (w->running()) ++in_use[w->capacity_key];
        if (w->queued() && w->readmit_at_ns == 0) queued.push_back(w.get());
      }
      std::stable_sort(queued.begin(), queued.end(), [](const Workload* a, const Workload* b) {
        const int pa = priority_rank(a->request.priority);
        const int pb = priority_rank(b->request.priority);
        if (pa != pb) return pa > pb;
        return a->sequence < b->sequence;
      });
      for (Workload* w : queued) {
        const bool room =
            in_use[w->capacity_key] < c.spec.capacity.at(w->capacity_key) &&
            (w->topology_label.empty() || place_slices(*w, blocks[w->topology_label]));
        if (!room && !(c.spec.behaviour.preempt_lower_priority &&
                       preempt_for_locked(c, *w, in_use, blocks, t, out))) {
          continue;
        }
        ++in_use[w->capacity_key];
        w->reserved_ns = t;
        w->started_ns = t + clock_->span_ns(c.spec.behaviour.admission_delay_s * kSecond);
        if (!w->plan.pregenerate) set_scripts(*w, w->started_ns);
      }
    };
    // Events in time order up to now (runs ending, evicted workloads becoming admissible),
    // each followed by an admission pass at its instant; then one at now.
    for (;;) {
      Workload* next = nullptr;
      std::int64_t readmit = kNever;  // the next evicted workload's readmission time
      for (auto& w : c.workloads) {
        if (w->running() && (!next || w->end_ns() < next->end_ns())) next = w.get();
        if (w->queued() && w->readmit_at_ns > 0) readmit = std::min(readmit, w->readmit_at_ns);
      }
      if (readmit <= now && (!next || readmit < next->end_ns())) {
        admit(readmit);
        continue;
      }
      if (!next || next->end_ns() > now) break;
      const std::int64_t end = next->end_ns();
      for (auto& pod : next->pods) emit_pod_lines(*next, pod, end, true, out);
      checkpoint_locked(*next, end);
      next->finished_ns = end;
      next->failed = next->plan.outcome == Outcome::kFail;
      admit(end);
    }
    admit(now);
    for (auto& w : c.workloads) {
      if (!w->running()) continue;
      for (auto& pod : w->pods) emit_pod_lines(*w, pod, now, false, out);
      checkpoint_locked(*w, now);
    }
    std::erase_if(c.workloads, [&](const std::unique_ptr<Workload>& w) {
      return w->finished() &&
             w->finished_ns + clock_->span_ns(w->request.ttl_seconds_after_finished * kSecond) <=
                 now;
    });
  }
  return out;
}

void FleetSimulator::set_fence_reader(FenceReader reader) {
  std::lock_guard lock(mu_);
  fence_reader_ = std::move(reader);
}

void FleetSimulator::checkpoint_locked(Workload& w, std::int64_t now) {
  if (w.started_ns < 0 || w.started_ns > now || w.run_ns <= 0) return;
  // Checkpoints reached by now: every FLEET_CHECKPOINT_S, else at each step's end; none at the
  // run's end.
  const std::int64_t step_ns =
      std::max<std::int64_t>(1, w.plan.checkpoint_ns > 0 ? clock_->span_ns(w.plan.checkpoint_ns)
                                                         : w.run_ns / std::max(1, w.plan.steps));
  const std::int64_t last = (w.run_ns - 1) / step_ns;
  const int reached = static_cast<int>(
      std::min<std::int64_t>({last, (now - w.started_ns) / step_ns, std::int64_t{1} << 30}));
  if (reached <= w.steps_checked) return;
  std::optional<std::int64_t> own;
  std::string uri;
  if (fence_reader_) {
    const auto u = w.request.env.find("FALCON_FENCE_URI");
    const auto e = w.request.env.find("FALCON_FENCE_EPOCH");
    if (u != w.request.env.end() && e != w.request.env.end()) {
      uri = u->second;
      try {
        own = std::stoll(e->second);
      } catch (const std::exception&) {
        own = 0;  // unreadable: every check fails, as falcon fence check's would
      }
    }
  }
  for (int k = w.steps_checked + 1; k <= reached; ++k) {
    if (w.fence_refusals > 0) break;
    if (own) {
      // The epoch now stands for the epoch at the step's end: the simulation moves in ticks.
      const std::optional<std::int64_t> stored = fence_reader_(uri);
      if (!stored || *stored != *own) {
        ++w.fence_refusals;
        break;  // a real job exits here; this one writes nothing more
      }
    }
    w.checkpoints_ns.push_back(w.started_ns + k * step_ns);
  }
  w.steps_checked = reached;
}

void FleetSimulator::advance() {
  std::unique_lock lock(mu_);
  Entries out = advance_locked(clock_->now_ns());
  lock.unlock();
  flush(std::move(out));
}

ListResult FleetSimulator::list(const std::string& cluster_name) {
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  Cluster& c = cluster_locked(cluster_name);
  ListResult result;
  result.failure = kubectl_fate_locked(c);
  if (!result.failure && !c.spec.behaviour.kueue) result.failure = no_workloads_resource();
  if (!result.failure) {
    const TableStyle style = config_.xpk.table_style;
    for (const auto& wp : c.workloads) {
      const Workload& w = *wp;
      WorkloadRow row;
      row.name = w.request.workload;
      row.namespace_ = w.request.namespace_;
      row.created = format_k8s_time(w.created_ns);
      row.priority = w.request.priority;
      row.state = w.state();
      const bool counted = w.device_class != DeviceClass::kCpu || style == TableStyle::kV17;
      row.vms_needed = counted ? w.vms : 0;
      if (!w.queued()) row.vms_running = counted ? w.vms : 0;
      if (w.finished() && !w.failed) row.vms_done = counted ? w.vms : 0;
      // Kueue's conditions, in the order Kueue keeps them.
      std::vector<Condition> conditions;
      const std::string flavors = fmt::format(
          "couldn't assign flavors to pod set slice-job: insufficient unused "
          "quota for {} in flavor {}, {} more needed",
          accelerator_resource(w.device_class), w.capacity_key,
          std::max(1, w.vms * std::max(1, chips_per_vm(w.capacity_key, w.device_class))));
      const bool evicted = w.evictions > 0;
      if (w.queued()) {
        conditions.push_back(
            {"QuotaReserved", flavors, evicted ? w.evicted_ns : w.created_ns, false, "Pending"});
        if (evicted) {
          // Kueue's eviction by preemption: quota released, Evicted and Preempted set at
          // once, Requeued once the pods have stopped.
          conditions.push_back({"Admitted", "The workload has no reservation", w.evicted_ns, false,
                                "NoReservation"});
          conditions.push_back({"Evicted", w.evict_message, w.evicted_ns, true, "Preempted"});
          conditions.push_back(
              {"Preempted", w.evict_message, w.evicted_ns, true, "InClusterQueue"});
          conditions.push_back(
              {"Requeued", w.evict_message, w.evicted_ns + kSecond, true, "Preempted"});
        }
      } else {
        conditions.push_back({"QuotaReserved", "Quota reserved in ClusterQueue cluster-queue",
                              w.reserved_ns, true, "QuotaReserved"});
        if (w.started_ns <= now) {
          conditions.push_back(
              {"Admitted", "The workload is admitted", w.started_ns, true, "Admitted"});
        }
        if (evicted) {
          const std::string previously = "Previously: " + w.evict_message;
          conditions.push_back({"Evicted", previously, w.reserved_ns, false, "QuotaReserved"});
          conditions.push_back({"Preempted", previously, w.reserved_ns, false, "QuotaReserved"});
          conditions.push_back({"Requeued", w.evict_message,
                                std::min(w.evicted_ns + kSecond, w.reserved_ns), true,
                                "Preempted"});
        }
        if (w.finished()) {
          conditions.push_back({"Finished", finish_message(w), w.finished_ns, true,
                                w.failed ? "Failed" : "Succeeded"});
        }
      }
      for (const auto& cond : conditions) {
        row.conditions.push_back(
            {cond.type, cond.status, cond.reason, cond.message, format_k8s_time(cond.time_ns)});
      }
      const Condition* shown = &conditions.back();  // v1.7: conditions[-1]
      if (style == TableStyle::kV19) {
        // v1.9+: the greatest lastTransitionTime (whole seconds); max() keeps the first.
        shown = &conditions.front();
        for (const auto& cond : conditions) {
          if (cond.time_ns / kSecond > shown->time_ns / kSecond) shown = &cond;
        }
      }
      row.status = shown->type;
      if (style == TableStyle::kV19 && *row.status != "Admitted" && *row.status != "Evicted" &&
          *row.status != "QuotaReserved" && *row.status != "Finished") {
        row.status = "Unknown";  // v1.9+ names only these four
      }
      row.message = shown->message;
      row.status_time = format_k8s_time(shown->time_ns);
      result.rows.push_back(std::move(row));
    }
    std::sort(result.rows.begin(), result.rows.end(),
              [](const WorkloadRow& a, const WorkloadRow& b) {
                return std::tie(a.namespace_, a.name) < std::tie(b.namespace_, b.name);
              });
  }
  lock.unlock();
  flush(std::move(out));
  return result;
}

CreateOutcome FleetSimulator::create(const std::string& cluster_name, const CreateRequest& request,
                                     bool overwrite) {
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  Cluster& c = cluster_locked(cluster_name);
  CreateOutcome outcome;
  outcome.failure = kubectl_fate_locked(c);
  if (!outcome.failure && c.failing_creates > 0) {
    // A transient API-server failure during `kubectl apply` (fail_next_creates).
    --c.failing_creates;
    ++c.kubectl_failures;
    outcome.failure =
        KubectlFailure{"Unable to connect to the server: net/http: TLS handshake timeout\n", 1};
  }
  if (!outcome.failure) outcome.result = create_locked(c, request, overwrite, now, out);
  lock.unlock();
  flush(std::move(out));
  return outcome;
}

void FleetSimulator::make_pods(const Cluster& c, Workload& w) {
  w.pods.clear();
  const std::string container = container_name(w.device_class, w.request.docker_name);
  const int slices = w.device_class == DeviceClass::kGpu ? 1 : w.request.num_slices;
  const int workers = w.device_class == DeviceClass::kGpu ? w.request.num_nodes : w.workers;
  int index = 0;
  for (int s = 0; s < slices; ++s) {
    for (int k = 0; k < workers; ++k, ++index) {
      const std::uint64_t pod_seed = mix64(w.seed + static_cast<std::uint64_t>(index) + 1);
      PodIdentity id;
      id.project = c.spec.project;
      id.location = c.spec.location;
      id.cluster_name = c.spec.cluster_id;
      id.namespace_name = w.request.namespace_;
      id.workload = w.request.workload;
      id.pod_name = make_pod_name(w.request.workload, s, k, pod_seed);
      id.container_name = container;
      id.node_name = node_name(c.spec.cluster_id, s, mix64(w.seed + 7 * s), pod_seed);
      id.slice = s;
      id.worker = k;
      id.omit_completion_index =
          w.plan.omit_index_every > 0 && (index + 1) % w.plan.omit_index_every == 0;
      w.pods.emplace_back(id);
    }
  }
}

CreateResult FleetSimulator::create_locked(Cluster& c, const CreateRequest& request, bool overwrite,
                                           std::int64_t now, std::vector<LogRun>& out) {
  Workload* existing = c.find(request.workload, &request.namespace_);
  const std::optional<std::string> key = c.capacity_key(request.device_type);
  if (existing && !overwrite) return CreateResult::kAlreadyExists;
  if (!key) return CreateResult::kNoCapacityForDevice;
  CreateResult result = CreateResult::kCreated;
  if (existing) {
    if (existing->running()) terminate_pods(*existing, now, out);
    std::erase_if(c.workloads, [&](const auto& w) { return w.get() == existing; });
    result = CreateResult::kReplaced;
  }
  auto w = std::make_unique<Workload>();
  w->request = request;
  w->request.num_slices = std::max(1, request.num_slices);
  w->request.num_nodes = std::max(1, request.num_nodes);
  w->capacity_key = *key;
  w->device_class = classify_device(request.device_type, request.tpu_type_flag);
  w->workers = workers_per_slice(request.device_type, w->device_class, config_.workers_per_slice);
  w->vms = w->device_class == DeviceClass::kGpu ? w->request.num_nodes
                                                : w->workers * w->request.num_slices;
  w->plan = make_plan(config_.defaults, config_.logs, request.env);
  w->run_ns = clock_->span_ns(w->plan.duration_ns);
  if (const auto canonical = tools::xpk_name_for(request.device_type)) {
    if (const tools::XpkSystem* t = tools::find_xpk_system(*canonical);
        t && c.spec.topology.count(t->gke_accelerator)) {
      w->topology_label = t->gke_accelerator;
      w->slice_chips = w->device_class == DeviceClass::kGpu ? t->chips_per_vm * w->request.num_nodes
                                                            : t->chips_per_vm * t->vms_per_slice;
    }
  }
  w->sequence = next_sequence_++;
  w->seed = hash_string(fmt::format("{}/{}/{}/{}", c.spec.project, c.spec.cluster_id,
                                    request.namespace_, request.workload),
                        w->sequence);
  w->created_ns = now;
  make_pods(c, *w);
  if (w->plan.pregenerate) {
    set_scripts(*w, now + clock_->span_ns(c.spec.behaviour.admission_delay_s * kSecond));
    for (auto& pod : w->pods) emit_pod_lines(*w, pod, 0, true, out);
  }
  c.workloads.push_back(std::move(w));
  Entries more = advance_locked(now);  // admits it at once when a slot is free
  out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  return result;
}

ExistsOutcome FleetSimulator::exists(const std::string& cluster_name, const std::string& workload,
                                     const std::string& namespace_) {
  std::unique_lock lock(mu_);
  Entries out = advance_locked(clock_->now_ns());
  Cluster& c = cluster_locked(cluster_name);
  ExistsOutcome outcome;
  if (down_locked(c, clock_->now_ns())) {
    outcome.failure = KubectlFailure{
        fmt::format("Unable to connect to the server: dial tcp {}:443: i/o timeout\n",
                    c.endpoint_ip),
        1};
  } else if (!c.spec.behaviour.kueue) {
    outcome.failure = no_workloads_resource();
  } else {
    outcome.exists = c.find(workload, &namespace_) != nullptr;
  }
  lock.unlock();
  flush(std::move(out));
  return outcome;
}

bool FleetSimulator::offers(const std::string& cluster_name, const std::string& device_type) const {
  std::lock_guard lock(mu_);
  for (const auto& c : clusters_) {
    if (c->spec.name == cluster_name) return c->capacity_key(device_type).has_value();
  }
  return false;
}

DeleteOutcome FleetSimulator::remove(const std::string& cluster_name, const std::string& workload) {
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  Cluster& c = cluster_locked(cluster_name);
  DeleteOutcome outcome;
  outcome.failure = kubectl_fate_locked(c);
  if (!outcome.failure) {
    if (Workload* w = c.find(workload, nullptr)) {
      remove_locked(c, w, now, out);
      outcome.deleted = true;
    }
  }
  lock.unlock();
  flush(std::move(out));
  return outcome;
}

void FleetSimulator::remove_locked(Cluster& c, Workload* w, std::int64_t now, Entries& out) {
  if (w->running()) terminate_pods(*w, now, out);
  std::erase_if(c.workloads, [&](const auto& p) { return p.get() == w; });
  Entries more = advance_locked(now);  // the freed slot admits the next workload
  out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

// --- The MultiKueue manager's access to the clusters (manager.h).

class FleetSimulator::Access final : public WorkerAccess {
 public:
  Access(FleetSimulator& sim, std::int64_t now, Entries& out) : sim_(sim), now_(now), out_(out) {}

  std::int64_t now() const override { return now_; }

  std::optional<std::string> unreachable(const std::string& cluster) const override {
    const Cluster& c = sim_.cluster_locked(cluster);
    if (c.down || sim_.down_locked(c, now_)) {
      return fmt::format("dial tcp {}:443: i/o timeout", c.endpoint_ip);
    }
    if (!c.spec.behaviour.kueue) {
      return std::string("no matches for kind \"Workload\" in version \"kueue.x-k8s.io/v1beta2\"");
    }
    return std::nullopt;
  }

  std::int64_t next_reachability_change_ns(const std::string& cluster) const override {
    const Cluster& c = sim_.cluster_locked(cluster);
    const FlapSpec& f = c.spec.behaviour.flap;
    if (c.spec.behaviour.unreachable || f.period_s <= 0) return kNeverNs;
    const std::int64_t period = sim_.clock_->span_ns(f.period_s * kSecond);
    const std::int64_t down = sim_.clock_->span_ns(f.down_s * kSecond);
    if (period <= 0) return kNeverNs;
    const std::int64_t t = now_ - sim_.start_ns_ + sim_.clock_->span_ns(f.offset_s * kSecond);
    const std::int64_t phase = ((t % period) + period) % period;
    return now_ + (phase < down ? down - phase : period - phase);
  }

  std::int64_t span_ns(std::int64_t simulated_ns) const override {
    return sim_.clock_->span_ns(simulated_ns);
  }

  std::optional<Copy> find(const std::string& cluster, const std::string& name,
                           const std::string& namespace_) const override {
    Cluster& c = sim_.cluster_locked(cluster);
    const Workload* w = c.find(name, &namespace_);
    if (!w) return std::nullopt;
    Copy copy;
    copy.sequence = w->sequence;
    copy.reserved_ns = w->reserved_ns;
    copy.finished_ns = w->finished_ns;
    copy.failed = w->failed;
    if (w->finished()) copy.finish_message = finish_message(*w);
    copy.evictions = w->evictions;
    copy.evict_message = w->evict_message;
    const std::int64_t full = sim_.clock_->span_ns(w->plan.duration_ns);
    copy.remaining_s = full > 0 ? static_cast<double>(w->plan.duration_ns) / 1e9 *
                                      static_cast<double>(w->run_ns) / static_cast<double>(full)
                                : 0;
    return copy;
  }

  CreateResult create(const std::string& cluster, const CreateRequest& request,
                      std::uint64_t& sequence) override {
    Cluster& c = sim_.cluster_locked(cluster);
    const CreateResult result = sim_.create_locked(c, request, false, now_, out_);
    if (result == CreateResult::kCreated) {
      sequence = c.find(request.workload, &request.namespace_)->sequence;
    }
    return result;
  }

  bool remove(const std::string& cluster, const std::string& name, const std::string& namespace_,
              std::uint64_t sequence) override {
    Cluster& c = sim_.cluster_locked(cluster);
    Workload* w = c.find(name, &namespace_);
    if (!w || w->sequence != sequence) return false;
    sim_.remove_locked(c, w, now_, out_);
    return true;
  }

 private:
  FleetSimulator& sim_;
  std::int64_t now_;
  Entries& out_;
};

std::int64_t FleetSimulator::next_cluster_event_locked() const {
  std::int64_t next = kNever;
  for (const auto& c : clusters_) {
    for (const auto& w : c->workloads) {
      if (w->running()) next = std::min(next, w->end_ns());
      if (w->queued() && w->readmit_at_ns > 0 && w->readmit_at_ns != kNever) {
        next = std::min(next, w->readmit_at_ns);
      }
    }
  }
  return next;
}

std::vector<LogRun> FleetSimulator::advance_locked(std::int64_t now) {
  if (!manager_ || stepping_) return run_clusters_locked(now);
  Entries out;
  stepping_ = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{stepping_};
  // While the manager has work, the clusters run from event to event and the manager acts at
  // each (a copy admitted at t is settled at t, before a later event can admit another).
  for (;;) {
    std::int64_t t = now;
    if (manager_->busy()) {
      const std::int64_t last = manager_->last_step_ns_;
      Access probe(*this, last, out);
      t = std::min({now, next_cluster_event_locked(), manager_->next_event_ns(probe)});
      if (t <= last) t = now;
    }
    Entries more = run_clusters_locked(t);
    out.insert(out.end(), std::make_move_iterator(more.begin()),
               std::make_move_iterator(more.end()));
    Access access(*this, t, out);
    manager_->step(access);
    if (t >= now) break;
  }
  return out;
}

void FleetSimulator::with_workers(const std::function<void(WorkerAccess&)>& fn) {
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  std::exception_ptr error;
  {
    stepping_ = true;
    struct Done {
      bool& flag;
      ~Done() { flag = false; }
    } done{stepping_};
    Access access(*this, now, out);
    try {
      fn(access);
    } catch (...) {
      error = std::current_exception();
    }
    if (manager_) manager_->step(access);
  }
  lock.unlock();
  flush(std::move(out));
  if (error) std::rethrow_exception(error);
}

std::optional<std::string> FleetSimulator::unreachable_message(const std::string& cluster) const {
  std::lock_guard lock(mu_);
  const Cluster& c = cluster_locked(cluster);
  if (!down_locked(c, clock_->now_ns())) return std::nullopt;
  return fmt::format("Unable to connect to the server: dial tcp {}:443: i/o timeout",
                     c.endpoint_ip);
}

// --- Kueue's ClusterQueue (slice-shaped capacity, issue 15).

FleetSimulator::ClusterQueueView FleetSimulator::cluster_queue(const std::string& cluster_name) {
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  Cluster& c = cluster_locked(cluster_name);
  ClusterQueueView view;
  if (down_locked(c, now)) {
    view.failure = KubectlFailure{
        fmt::format("Unable to connect to the server: dial tcp {}:443: i/o timeout\n",
                    c.endpoint_ip),
        1};
  } else if (!c.spec.behaviour.kueue) {
    view.failure = no_workloads_resource();
  } else if (!c.spec.behaviour.cluster_queues_readable) {
    view.forbidden = true;
  } else {
    using nlohmann::json;
    json flavors = json::array();
    json usage = json::array();
    json covered = json::array();
    const auto add = [&](const std::string& flavor, const std::string& resource, long long quota,
                         long long used) {
      flavors.push_back({{"name", flavor},
                         {"resources", json::array({{{"name", resource},
                                                     {"nominalQuota", std::to_string(quota)}}})}});
      usage.push_back({{"name", flavor},
                       {"resources", json::array({{{"name", resource},
                                                   {"total", std::to_string(used)},
                                                   {"borrowed", "0"}}})}});
      if (std::find(covered.begin(), covered.end(), resource) == covered.end()) {
        covered.push_back(resource);
      }
    };
    // Device types without topology: xpk's flavor "1x<type>", one slice per workload slot.
    for (const auto& [type, slots] : c.spec.capacity) {
      const auto canonical = tools::xpk_name_for(type);
      const tools::XpkSystem* t = canonical ? tools::find_xpk_system(*canonical) : nullptr;
      if (!t || t->device_class == DeviceClass::kCpu || c.spec.topology.count(t->gke_accelerator)) {
        continue;
      }
      const long long chips = static_cast<long long>(t->chips_per_vm) * t->vms_per_slice;
      long long used = 0;
      for (const auto& w : c.workloads) {
        if (w->running() && w->capacity_key == type) {
          used += w->device_class == DeviceClass::kGpu
                      ? static_cast<long long>(t->chips_per_vm) * w->request.num_nodes
                      : chips * w->request.num_slices;
        }
      }
      add("1x" + *canonical, accelerator_resource(t->device_class), chips * slots, used);
    }
    // Topology blocks: one flavor per GKE accelerator label, the free runs of each block and
    // the blocks' sizes.
    json free_blocks = json::object();
    json block_sizes = json::object();
    const auto occupancy = c.occupancy();
    for (const auto& [label, blocks] : c.spec.topology) {
      long long quota = 0;
      long long used = 0;
      json runs = json::array();
      const auto& o = occupancy.at(label);
      json sizes = json::array();
      for (std::size_t b = 0; b < o.size(); ++b) {
        quota += static_cast<long long>(o[b].size());
        sizes.push_back(o[b].size());
        int run = 0;
        for (std::size_t i = 0; i <= o[b].size(); ++i) {
          if (i < o[b].size() && !o[b][i]) {
            ++run;
            continue;
          }
          if (i < o[b].size()) ++used;
          if (run > 0) runs.push_back(run);
          run = 0;
        }
      }
      const bool gpu = label.rfind("nvidia-", 0) == 0;
      add(label, gpu ? "nvidia.com/gpu" : "google.com/tpu", quota, used);
      free_blocks[label] = runs;
      block_sizes[label] = sizes;
    }
    json metadata = {{"name", "cluster-queue"},
                     {"uid", fmt::format("{:016x}", hash_string(c.spec.name + "/cluster-queue"))},
                     {"resourceVersion", "1"},
                     {"creationTimestamp", format_k8s_time(start_ns_)}};
    if (!free_blocks.empty()) {
      metadata["annotations"] = {{"falcon.dev/free-blocks", free_blocks.dump()},
                                 {"falcon.dev/blocks", block_sizes.dump()}};
    }
    int pending = 0;
    int admitted = 0;
    for (const auto& w : c.workloads) {
      if (w->queued()) ++pending;
      if (w->running()) ++admitted;
    }
    view.object = {{"apiVersion", "kueue.x-k8s.io/v1beta1"},
                   {"kind", "ClusterQueue"},
                   {"metadata", metadata},
                   {"spec",
                    {{"namespaceSelector", json::object()},
                     {"queueingStrategy", "BestEffortFIFO"},
                     {"preemption",
                      {{"reclaimWithinCohort", "Never"},
                       {"withinClusterQueue",
                        c.spec.behaviour.preempt_lower_priority ? "LowerPriority" : "Never"}}},
                     {"resourceGroups",
                      json::array({{{"coveredResources", covered}, {"flavors", flavors}}})}}},
                   {"status",
                    {{"flavorsReservation", usage},
                     {"flavorsUsage", usage},
                     {"pendingWorkloads", pending},
                     {"reservingWorkloads", admitted},
                     {"admittedWorkloads", admitted}}}};
  }
  lock.unlock();
  flush(std::move(out));
  return view;
}

void FleetSimulator::record_kubeconfig(const std::string& cluster_name,
                                       const std::string& kubeconfig) {
  std::lock_guard lock(mu_);
  cluster_locked(cluster_name).kubeconfigs.insert(kubeconfig);
}

GenerateResult FleetSimulator::generate_logs(const GenerateRequest& request) {
  if (request.ranks.empty()) throw std::invalid_argument("logs:generate needs at least one rank");
  std::vector<PodIdentity> pods;
  std::int64_t start = 0;
  std::optional<std::int64_t> generated_before;  // without start_ns: the lines end at now
  {
    std::unique_lock lock(mu_);
    const std::int64_t now = clock_->now_ns();
    Entries out = advance_locked(now);
    Cluster* c = nullptr;
    for (auto& cp : clusters_) {
      if (cp->spec.name == request.cluster) c = cp.get();
    }
    if (!c) {
      throw std::invalid_argument("no cluster named '" + request.cluster + "' in the fleet");
    }
    start = request.start_ns.value_or(now);
    generated_before = request.start_ns ? std::nullopt : std::optional<std::int64_t>(now);
    Workload* w = c->find(request.workload, &request.namespace_);
    for (int rank : request.ranks) {
      const PodIdentity* existing = nullptr;
      if (w) {
        for (const auto& pod : w->pods) {
          if (pod.writer.pod().slice == request.slice && pod.writer.pod().worker == rank) {
            existing = &pod.writer.pod();
          }
        }
      }
      if (existing) {
        pods.push_back(*existing);
      } else {
        PodIdentity id;
        id.project = c->spec.project;
        id.location = c->spec.location;
        id.cluster_name = c->spec.cluster_id;
        id.namespace_name = request.namespace_;
        id.workload = request.workload;
        const std::uint64_t seed =
            hash_string(fmt::format("{}/{}/{}", request.workload, request.slice, rank));
        id.pod_name = make_pod_name(request.workload, request.slice, rank, seed);
        id.node_name = node_name(c->spec.cluster_id, request.slice, seed, seed);
        id.slice = request.slice;
        id.worker = rank;
        pods.push_back(std::move(id));
      }
      pods.back().omit_completion_index = request.omit_completion_index;
    }
    lock.unlock();
    flush(std::move(out));
  }
  GenerateResult result;
  const std::size_t lines = request.lines_per_rank;
  const std::int64_t interval = std::max<std::int64_t>(1, request.interval_ns);
  for (const PodIdentity& id : pods) {
    result.pod_names.push_back(id.pod_name);
    const PodLogWriter writer(id);
    PodScript script;
    script.start_ns = start;
    script.steps =
        steps_for_total_lines(static_cast<int>(std::min<std::size_t>(lines, 1u << 30)), false);
    script.lines_per_step = 1;
    // Steps land at 5%..98% of the run; stretch the run so they are `interval` apart.
    script.end_ns = start + static_cast<std::int64_t>(static_cast<double>(interval) *
                                                      std::max(1, script.steps) / 0.93);
    script.seed = hash_string(id.pod_name);
    const std::size_t count = std::min(lines, script.line_count());
    if (generated_before && count > 0) {
      const std::int64_t late = script.line(count - 1).time_ns - *generated_before;
      script.start_ns -= late;  // every line moves by the same amount
      script.end_ns -= late;
    }
    std::vector<TextLine> batch;
    batch.reserve(std::min(count, kGenerateBatch));
    for (std::size_t i = 0; i < count; ++i) {
      LogLine line = script.line(i);
      batch.push_back(TextLine{line.time_ns, std::move(line.text)});
      if (batch.size() >= kGenerateBatch || i + 1 == count) {
        result.written += batch.size();
        entries_written_ += batch.size();
        sink_->write_lines(*writer.shared(false), std::move(batch));
        batch = std::vector<TextLine>();
        batch.reserve(std::min(count - i - 1, kGenerateBatch));
      }
    }
  }
  return result;
}

std::size_t FleetSimulator::log_entries_written() const { return entries_written_; }

nlohmann::json FleetSimulator::state() {
  std::unique_lock lock(mu_);
  const std::int64_t now = clock_->now_ns();
  Entries out = advance_locked(now);
  nlohmann::json j;
  j["now"] = tools::format_rfc3339_nanos(now);
  j["now_ns"] = now;
  j["time_scale"] = clock_->scale();
  j["xpk"] = {{"version", config_.xpk.version},
              {"table_style", to_string(config_.xpk.table_style)},
              {"supports_namespace", config_.xpk.supports_namespace}};
  nlohmann::json clusters = nlohmann::json::array();
  for (const auto& cp : clusters_) {
    const Cluster& c = *cp;
    nlohmann::json cj;
    cj["name"] = c.spec.name;
    cj["project"] = c.spec.project;
    cj["zone"] = c.spec.zone;
    cj["cluster_id"] = c.spec.cluster_id;
    cj["location"] = c.spec.location;
    cj["capacity"] = c.spec.capacity;
    cj["unreachable"] = c.spec.behaviour.unreachable;
    cj["down"] = c.down;
    cj["failing_creates"] = c.failing_creates;
    cj["kueue"] = c.spec.behaviour.kueue;
    cj["cluster_queues_readable"] = c.spec.behaviour.cluster_queues_readable;
    cj["kubectl_calls"] = c.kubectl_calls;
    cj["kubectl_failures"] = c.kubectl_failures;
    cj["kubeconfigs"] = c.kubeconfigs;
    int queued = 0;
    int running = 0;
    nlohmann::json workloads = nlohmann::json::array();
    for (const auto& wp : c.workloads) {
      const Workload& w = *wp;
      queued += w.queued();
      running += w.running();
      nlohmann::json wj;
      wj["name"] = w.request.workload;
      wj["namespace"] = w.request.namespace_;
      wj["device_type"] = w.request.device_type;
      wj["tpu_type_flag"] = w.request.tpu_type_flag;
      wj["device_class"] = to_string(w.device_class);
      wj["num_slices"] = w.request.num_slices;
      wj["num_nodes"] = w.request.num_nodes;
      wj["priority"] = w.request.priority;
      wj["command"] = w.request.command;
      wj["docker_image"] = w.request.docker_image;
      wj["docker_name"] = w.request.docker_name;
      wj["env"] = w.request.env;
      wj["ttl_seconds_after_finished"] = w.request.ttl_seconds_after_finished;
      wj["state"] = w.state();
      wj["sequence"] = w.sequence;
      wj["seed"] = w.seed;
      wj["created"] = tools::format_rfc3339_nanos(w.created_ns);
      wj["created_ns"] = w.created_ns;
      wj["reserved_ns"] = w.reserved_ns;
      wj["started_ns"] = w.started_ns;
      wj["finished_ns"] = w.finished_ns;
      wj["failed"] = w.failed;
      wj["duration_s"] = static_cast<double>(w.plan.duration_ns) / 1e9;
      wj["outcome"] = to_string(w.plan.outcome);
      wj["exit_code"] = w.finished() ? nlohmann::json(w.exit_code()) : nlohmann::json(nullptr);
      wj["env_warnings"] = w.plan.warnings;
      wj["log_lines_written"] = w.lines_written;
      wj["evictions"] = w.evictions;
      wj["evicted_ns"] = w.evicted_ns;
      wj["readmit_at_ns"] =
          w.readmit_at_ns == kNever ? nlohmann::json(nullptr) : nlohmann::json(w.readmit_at_ns);
      wj["held"] = w.readmit_at_ns == kNever;
      wj["evict_message"] = w.evict_message;
      wj["failed_slice"] = w.failed_slice;
      wj["platform_exit"] = w.platform_exit;
      wj["checkpoints_ns"] = w.checkpoints_ns;
      wj["steps_checked"] = w.steps_checked;
      wj["run_ns"] = w.run_ns;  // less than the duration once resumed from a checkpoint
      wj["fence_refusals"] = w.fence_refusals;
      wj["lost"] = w.lost;
      nlohmann::json pods = nlohmann::json::array();
      for (const auto& pod : w.pods) {
        const PodIdentity& id = pod.writer.pod();
        pods.push_back({{"name", id.pod_name},
                        {"slice", id.slice},
                        {"worker", id.worker},
                        {"container", id.container_name},
                        {"node", id.node_name},
                        {"omit_completion_index", id.omit_completion_index},
                        {"lines_emitted", pod.emitted},
                        {"lines_planned", pod.script.line_count()},
                        {"terminated", pod.terminated}});
      }
      wj["pods"] = std::move(pods);
      workloads.push_back(std::move(wj));
    }
    cj["queued"] = queued;
    cj["running"] = running;
    cj["workloads"] = std::move(workloads);
    clusters.push_back(std::move(cj));
  }
  j["clusters"] = std::move(clusters);
  if (manager_) j["manager"] = manager_->state_json();
  j["preemptions"] = {{"evicted", preempted_}, {"lost_chip_s", preempted_lost_chip_s_}};
  lock.unlock();
  flush(std::move(out));
  j["log_entries_written"] = log_entries_written();
  return j;
}

void FleetSimulator::restore(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("clusters") || !state["clusters"].is_array()) {
    throw std::invalid_argument("fleet state: expected an object with a clusters list");
  }
  std::lock_guard lock(mu_);
  try {
    for (const auto& cj : state["clusters"]) {
      const std::string name = cj.at("name").get<std::string>();
      Cluster* c = nullptr;
      for (auto& cp : clusters_) {
        if (cp->spec.name == name) c = cp.get();
      }
      if (!c) continue;  // a cluster no longer in the fleet file
      c->workloads.clear();
      c->kubectl_calls = cj.value("kubectl_calls", std::uint64_t{0});
      c->kubectl_failures = cj.value("kubectl_failures", std::uint64_t{0});
      c->spec.behaviour.unreachable = cj.value("unreachable", c->spec.behaviour.unreachable);
      c->down = cj.value("down", false);
      c->failing_creates = cj.value("failing_creates", 0);
      for (const auto& wj : cj.at("workloads")) {
        auto w = std::make_unique<Workload>();
        CreateRequest& r = w->request;
        r.workload = wj.at("name").get<std::string>();
        r.namespace_ = wj.at("namespace").get<std::string>();
        r.device_type = wj.at("device_type").get<std::string>();
        r.tpu_type_flag = wj.at("tpu_type_flag").get<bool>();
        r.num_slices = wj.at("num_slices").get<int>();
        r.num_nodes = wj.at("num_nodes").get<int>();
        r.priority = wj.at("priority").get<std::string>();
        r.command = wj.at("command").get<std::string>();
        r.docker_image = wj.at("docker_image").get<std::string>();
        r.docker_name = wj.at("docker_name").get<std::string>();
        r.env = wj.at("env").get<std::map<std::string, std::string>>();
        r.ttl_seconds_after_finished = wj.at("ttl_seconds_after_finished").get<std::int64_t>();
        const auto key = c->capacity_key(r.device_type);
        if (!key) continue;  // the cluster no longer offers the device type
        w->capacity_key = *key;
        w->device_class = classify_device(r.device_type, r.tpu_type_flag);
        w->workers = workers_per_slice(r.device_type, w->device_class, config_.workers_per_slice);
        w->vms = w->device_class == DeviceClass::kGpu ? r.num_nodes : w->workers * r.num_slices;
        w->plan = make_plan(config_.defaults, config_.logs, r.env);
        w->run_ns = clock_->span_ns(w->plan.duration_ns);
        w->sequence = wj.at("sequence").get<std::uint64_t>();
        w->seed = wj.at("seed").get<std::uint64_t>();
        w->created_ns = wj.at("created_ns").get<std::int64_t>();
        w->reserved_ns = wj.at("reserved_ns").get<std::int64_t>();
        w->started_ns = wj.at("started_ns").get<std::int64_t>();
        w->finished_ns = wj.at("finished_ns").get<std::int64_t>();
        w->failed = wj.at("failed").get<bool>();
        w->evictions = wj.value("evictions", 0);
        w->evicted_ns = wj.value("evicted_ns", std::int64_t{-1});
        w->readmit_at_ns = wj.value("held", false) ? kNever
                           : wj.contains("readmit_at_ns") && wj["readmit_at_ns"].is_number()
                               ? wj["readmit_at_ns"].get<std::int64_t>()
                               : 0;
        w->evict_message = wj.value("evict_message", std::string());
        w->failed_slice = wj.value("failed_slice", 0);
        w->platform_exit = wj.value("platform_exit", 0);
        // Checkpoints written before the save are not written again.
        w->checkpoints_ns = wj.value("checkpoints_ns", std::vector<std::int64_t>{});
        w->fence_refusals = wj.value("fence_refusals", 0);
        w->steps_checked = wj.value("steps_checked",
                                    static_cast<int>(w->checkpoints_ns.size()) + w->fence_refusals);
        w->run_ns = wj.value("run_ns", w->run_ns);
        w->lost = wj.value("lost", false);
        next_sequence_ = std::max(next_sequence_, w->sequence + 1);
        for (const auto& pj : wj.at("pods")) {
          PodIdentity id;
          id.project = c->spec.project;
          id.location = c->spec.location;
          id.cluster_name = c->spec.cluster_id;
          id.namespace_name = r.namespace_;
          id.workload = r.workload;
          id.pod_name = pj.at("name").get<std::string>();
          id.container_name = pj.at("container").get<std::string>();
          id.slice = pj.at("slice").get<int>();
          id.worker = pj.at("worker").get<int>();
          id.omit_completion_index = pj.at("omit_completion_index").get<bool>();
          id.node_name = pj.value(
              "node", node_name(c->spec.cluster_id, id.slice, mix64(w->seed + 7 * id.slice),
                                mix64(w->seed + w->pods.size() + 1)));
          Workload::Pod pod(id);
          pod.emitted = pj.at("lines_emitted").get<std::size_t>();
          pod.terminated = pj.at("terminated").get<bool>();
          w->pods.push_back(std::move(pod));
        }
        if (w->reserved_ns >= 0) {
          set_scripts(*w, w->plan.pregenerate ? w->created_ns : w->started_ns);
        }
        c->workloads.push_back(std::move(w));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("fleet state: ") + e.what());
  }
}

}  // namespace falcon::fleet
