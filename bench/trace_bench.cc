// The selection policies on a workload trace (issue 15, issue 29, docs/selection.md "The trace
// benchmark"): the same jobs, arriving at the same simulated instants, are placed on a fresh
// local fleet of heterogeneous clusters once per policy, and the waits compared.
//
// The fleet (in this process, manual clock: time moves only when the benchmark advances it):
// 9 clusters with slice-shaped TPU v4 capacity (blocks of chips, fleet_config.h `topology`),
// different sizes and block shapes, slot priorities 1 to 3, one flaky cluster (15% of its
// kubectl calls fail), one flapping cluster (down 15 min of every hour) and one slow to start
// what it admits (60 s). The layer runs as falcon does: a ClusterFabric with probe.backend kube
// (each decision probes every candidate's Workload list and ClusterQueue over HTTPS, with
// credentials warmed by fleet-gcloud), the state store (SQLite: probe history, breakers,
// decisions, nominations), submits and deletes through fleet-xpk processes. Its clocks, wall and
// monotonic, are the fleet's simulated clock: breaker cool-downs, signal windows and probe
// latencies are simulated time, so a run depends on the trace alone.
//
// Three kinds of policy:
//
//   falcon, directly (priority, priority-fit, score, least-wait, random): a job is offered as
//     it arrives, and the jobs falcon holds (late binding: no cluster can take them now, or
//     their create failed) again every --retry simulated seconds, high priority first, then by
//     arrival: a decision (`select_cluster`), then `submit_workload` to the chosen cluster
//     through fleet-xpk (a type that found no cluster is not asked again at the same instant).
//     `priority-fit` is the spec's order among the candidates that can fit the slice now;
//     `random` a uniformly random eligible candidate of the priority decision (seeded).
//   MultiKueue's dispatchers (allatonce, incremental): the fleet runs a MultiKueue manager
//     (tools/fleet/manager.h: a fleet cluster `manager` with the 9 clusters as workers, in the
//     order above) with that dispatcher; each job becomes a manager Workload at its arrival
//     instant, and the manager does the rest in simulated time: AllAtOnce a copy on every
//     worker at once, Incremental 3 workers more every 5 minutes in configuration order; the
//     first copy to get quota on its worker wins, the others are deleted, Finished mirrored
//     and the winning copy deleted.
//   falcon as MultiKueue's external dispatcher (dispatch): the same manager with the dispatcher
//     name falcon.dev/dispatcher, and falcon's Dispatcher (src/serve/dispatcher.h, the defaults
//     of repos.yaml `dispatch:`: width 1, hold_until_room, retry_s 5, renominate_after_s 300)
//     over an in-process ManagerApi on that manager. Its decisions are least-wait's, the same
//     select_cluster path and probes as the direct `least-wait`, with the dispatcher's hints
//     (workers not Active left out, nominations not admitted yet counted as queued). It is
//     driven without its threads: at each arrival instant, and every --retry seconds, the
//     manager's Workloads are listed into it (when they changed) and it makes a pass; passes
//     repeat at the same instant while they nominate (its watch would bring the admissions
//     in milliseconds).
//
// Measured per policy:
//   wait            the job's end - arrival - duration: held by falcon or on the manager,
//                   queued on the cluster, the cluster's start delay and, with preemption, the
//                   run it lost (since its last checkpoint, every 600 s) and its wait to start
//                   again; without preemption, its start - arrival. Mean, p95 and max, overall
//                   and per priority class
//   preemptions     with --worker-preemption: workloads the workers' Kueue evicted (losing
//                   copies' included) and the chip-hours of run they lost
//   makespan        the last job's end - the first arrival
//   unplaced        jobs never started when the run stops (--max-hours after the last arrival)
//   created, deleted  remote workload objects created on the clusters and deleted there, and
//                   per admitted job: falcon's direct creates (it deletes nothing: a finished
//                   workload stays on its cluster), or the manager's counters (its deletes
//                   include the winning copy once its job finished, as Kueue does)
//   frag_jobs       jobs that waited on fragmentation: held because a candidate was ruled out
//                   as fragmented, or a copy queued on a cluster that had the chips free but no
//                   block large enough (seen at every --tick)
//   submit_failures creates that failed (direct: the flaky and flapping clusters; the
//                   manager's creates go to the simulator directly and do not fail)
// One JSON object on stdout; --chart=FILE writes an SVG bar chart of mean and p95 waits.
//
//   trace_bench --fleet-bin=DIR --trace=FILE [--tick=60] [--retry=5] [--policies=P,...]
//               [--chart=FILE] [--jobs=N] [--max-hours=24] [--worker-preemption]
//               [--preempt-after=S] [--no-keep-room]
//   trace_bench --merge=a.json,b.json [--chart=FILE]   # outputs of runs made one policy each
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/circuit_breaker.h"
#include "falcon/clock.h"
#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "falcon/scoring.h"
#include "falcon/state_store.h"
#include "fleet/device_types.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_service.h"
#include "fleet/manager.h"
#include "kube/manager_api.h"
#include "kube/multikueue.h"
#include "serve/dispatcher.h"
#include "util/time_format.h"

#include "bench_support.h"

using falcon::bench::ScratchDir;
using nlohmann::json;

namespace {

const std::set<std::string>& known_policies() {
  static const std::set<std::string> kKnown = {"priority",    "priority-fit", "score",
                                               "least-wait",  "random",       "allatonce",
                                               "incremental", "dispatch"};
  return kKnown;
}

bool is_manager_policy(const std::string& p) {
  return p == "allatonce" || p == "incremental" || p == "dispatch";
}

struct Options {
  std::string fleet_bin;
  std::string trace;
  int tick_s = 60;  // observation (fragmentation, the end) every tick
  int retry_s = 5;  // falcon's held work decided again this often (dispatch.retry_s's default)
  std::vector<std::string> policies = {"priority",  "priority-fit", "score",   "least-wait",
                                       "allatonce", "incremental",  "dispatch"};
  std::string chart;
  std::vector<std::string> merge;  // --merge: earlier outputs to combine (no run)
  int jobs = 0;                    // 0: all of the trace
  double max_hours = 24;
  // --worker-preemption: every worker's ClusterQueue has withinClusterQueue: LowerPriority.
  bool worker_preemption = false;
  // --preempt-after=S: dispatch.preempt_after_s of the `dispatch` policy (high priority only).
  std::optional<double> preempt_after_s;
  // --no-keep-room: dispatch.keep_room false for the `dispatch` policy.
  bool keep_room = true;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "trace_bench: " << problem << "\n"
            << "usage: trace_bench --fleet-bin=DIR --trace=FILE [--tick=60] [--retry=5] "
               "[--policies=priority,priority-fit,score,least-wait,random,allatonce,"
               "incremental,dispatch] [--chart=FILE.svg] [--jobs=N] [--max-hours=24] "
               "[--worker-preemption] [--preempt-after=S] [--no-keep-room]\n"
               "       trace_bench --merge=A.json,B.json [--chart=FILE.svg]\n";
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    try {
      if (flag == "--fleet-bin") {
        o.fleet_bin = std::filesystem::absolute(value).string();
      } else if (flag == "--trace") {
        o.trace = value;
      } else if (flag == "--tick") {
        o.tick_s = std::stoi(value);
      } else if (flag == "--retry") {
        o.retry_s = std::stoi(value);
      } else if (flag == "--chart") {
        o.chart = value;
      } else if (flag == "--merge") {
        std::stringstream ss(value);
        for (std::string f; std::getline(ss, f, ',');) o.merge.push_back(f);
      } else if (flag == "--jobs") {
        o.jobs = std::stoi(value);
      } else if (flag == "--max-hours") {
        o.max_hours = std::stod(value);
      } else if (flag == "--worker-preemption" && eq == std::string::npos) {
        o.worker_preemption = true;
      } else if (flag == "--no-keep-room" && eq == std::string::npos) {
        o.keep_room = false;
      } else if (flag == "--preempt-after") {
        o.preempt_after_s = std::stod(value);
        if (*o.preempt_after_s < 0) usage("--preempt-after must be 0 or more seconds");
      } else if (flag == "--policies") {
        o.policies.clear();
        std::stringstream ss(value);
        for (std::string p; std::getline(ss, p, ',');) {
          if (!known_policies().contains(p)) usage("unknown policy '" + p + "'");
          o.policies.push_back(p);
        }
      } else {
        usage("unknown argument '" + arg + "'");
      }
    } catch (const std::logic_error&) {
      usage("bad value in '" + arg + "'");
    }
  }
  if (!o.merge.empty()) return o;
  if (o.fleet_bin.empty() || o.trace.empty()) usage("--fleet-bin and --trace are required");
  if (o.tick_s < 1 || o.retry_s < 1 || o.policies.empty() || o.jobs < 0 || o.max_hours <= 0) {
    usage("--tick, --retry, --max-hours must be positive and --policies not empty");
  }
  return o;
}

// The clusters: name, blocks of chips (tpu-v4-podslice), slot priority, behaviour, start delay.
struct ClusterShape {
  std::string name;
  std::vector<int> blocks;
  int priority;
  std::string behaviour;  // the fleet file's behaviour map, or empty
  int admission_delay_s;  // the behaviour's admission_delay_s (from admission to running)
};

const std::vector<ClusterShape>& shapes() {
  static const std::vector<ClusterShape> kShapes = {
      {"tpu-east-1", {128, 128}, 1, "", 0},
      {"tpu-east-frag", {64, 64, 32, 32, 32}, 1, "", 0},
      {"tpu-flaky", {128, 64}, 1, "{flaky: {probability: 0.15, seed: 7}}", 0},
      {"tpu-flap", {128, 128}, 1, "{flap: {period_s: 3600, down_s: 900, offset_s: 1800}}", 0},
      {"tpu-west-big", {256}, 2, "", 0},
      {"tpu-west-small", {32, 32, 32, 32}, 2, "", 0},
      {"tpu-central", {128, 32, 32}, 2, "{admission_delay_s: 60}", 60},
      {"tpu-south", {64, 64}, 3, "", 0},
      {"tpu-tiny", {16, 16, 16, 16}, 3, "", 0},
  };
  return kShapes;
}

int admission_delay_s(const std::string& cluster) {
  for (const auto& c : shapes()) {
    if (c.name == cluster) return c.admission_delay_s;
  }
  return 0;
}

const std::vector<std::pair<std::string, int>>& types() {
  static const std::vector<std::pair<std::string, int>> kTypes = {
      {"v4-8", 4}, {"v4-16", 8}, {"v4-32", 16}, {"v4-64", 32}, {"v4-128", 64}};
  return kTypes;
}

constexpr const char* kManagerCluster = "manager";
constexpr const char* kExternalDispatcher = "falcon.dev/dispatcher";
constexpr const char* kNamespace = "default";
// Every job checkpoints this often: a preempted one resumes from its last checkpoint.
constexpr int kCheckpointS = 600;

// `dispatcher`: the manager's (Kueue's multiKueue.dispatcherName), or empty for no manager;
// `preemption`: the workers' ClusterQueues preempt lower priorities.
std::string fleet_yaml(const std::string& dispatcher, bool preemption) {
  std::ostringstream y;
  y << "time_scale: 0\ndefaults: {duration_s: 600, steps: 1}\nclusters:\n";
  for (const auto& c : shapes()) {
    const int largest = *std::max_element(c.blocks.begin(), c.blocks.end());
    y << "  " << c.name << ":\n    project: trace-bench\n    zone: us-central2-b\n"
      << "    cluster_id: " << c.name << "\n    capacity: {";
    bool first = true;
    for (const auto& [type, chips] : types()) {
      if (chips > largest) continue;
      y << (first ? "" : ", ") << type << ": 1000";
      first = false;
    }
    y << "}\n    topology: {tpu-v4-podslice: [";
    for (std::size_t i = 0; i < c.blocks.size(); ++i) y << (i ? ", " : "") << c.blocks[i];
    y << "]}\n";
    std::string behaviour = c.behaviour;
    if (preemption) {
      behaviour = behaviour.empty() ? "{preemption: LowerPriority}"
                                    : "{preemption: LowerPriority, " + behaviour.substr(1);
    }
    if (!behaviour.empty()) y << "    behaviour: " << behaviour << "\n";
  }
  if (!dispatcher.empty()) {
    y << "  " << kManagerCluster << ":\n    project: trace-bench\n    zone: us-central2-b\n"
      << "    cluster_id: " << kManagerCluster << "\n    capacity: {}\n";
    y << "manager:\n  cluster: " << kManagerCluster << "\n  dispatcher: " << dispatcher
      << "\n  workers: [";
    for (std::size_t i = 0; i < shapes().size(); ++i) y << (i ? ", " : "") << shapes()[i].name;
    y << "]\n";
  }
  return y.str();
}

std::string repos_yaml(const std::string& policy, const std::filesystem::path& dir,
                       const std::string& bin, const std::string& url) {
  std::ostringstream y;
  y << "clusters:\n";
  for (const auto& c : shapes()) {
    const int largest = *std::max_element(c.blocks.begin(), c.blocks.end());
    y << "  " << c.name << ":\n    project: trace-bench\n    zone: us-central2-b\n"
      << "    cluster_id: " << c.name << "\n    accelerator_types:\n";
    for (const auto& [type, chips] : types()) {
      if (chips > largest) continue;
      y << "      - {type: tpu-" << type << ", device_class: tpu, priority: " << c.priority
        << "}\n";
    }
    y << "    max_queue_depth: 4\n    probe_timeout_s: 30\n";
  }
  y << "probe: {backend: kube}\n";
  // random chooses among the priority decision's eligible candidates, priority-fit among those
  // least-wait's fit rule keeps, dispatch decides as least-wait; MultiKueue's own dispatchers
  // select nothing.
  const std::string configured = policy == "priority-fit" || policy == "dispatch" ? "least-wait"
                                 : policy == "score" || policy == "least-wait"    ? policy
                                                                                  : "priority";
  y << "selection:\n  policy: " << configured << "\n"
    << "  breaker: {failures: 3, cooldown_s: 300, cooldown_max_s: 1800}\n";
  y << "xpk:\n  binary: " << bin << "/fleet-xpk\n  gcloud_binary: " << bin
    << "/fleet-gcloud\n  state_dir: " << (dir / "state").string()
    << "\n  command_timeout_s: 60\n  env: {FALCON_FLEET_URL: \"" << url << "\"}\n";
  return y.str();
}

// The fabric's clock: the fleet's simulated wall time; real monotonic time for timeouts.
class FleetTime final : public falcon::Clock {
 public:
  explicit FleetTime(falcon::fleet::SimClock& sim) : sim_(sim) {}
  std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds(sim_.now_ns())));
  }
  // Simulated too: a probe's measured latency (the score's latency term) is then 0, not what
  // the machine happened to take. Deadlines within one call never expire (time stands still
  // while it runs); the processes it runs keep their own real timeouts.
  std::chrono::steady_clock::time_point steady_now() const override {
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::nanoseconds(sim_.now_ns())));
  }
  void sleep_for(std::chrono::nanoseconds d) const override { std::this_thread::sleep_for(d); }

 private:
  falcon::fleet::SimClock& sim_;
};

// The dispatcher's view of the fleet's manager (kube/manager_api.h), in this process: the
// manager's own objects parsed as the real client parses what the manager's API server sends.
// Not watched: the benchmark lists into the dispatcher when the manager changed.
class InProcessManager final : public falcon::kube::ManagerApi {
 public:
  explicit InProcessManager(falcon::fleet::MultiKueueManager& manager) : m_(manager) {}

  std::string server() const override { return std::string("in-process://") + m_.spec().cluster; }

  falcon::kube::WorkloadList list_workloads() override {
    falcon::kube::WorkloadList list;
    for (const json& o : m_.workloads("")) {
      list.items.push_back(falcon::kube::parse_manager_workload(o));
    }
    list.resource_version = std::to_string(m_.resource_version());
    return list;
  }

  void watch_workloads(const std::string&,
                       const std::function<bool(const falcon::kube::ManagerEvent&)>&,
                       const std::function<bool()>&) override {
    throw std::logic_error("trace_bench lists the manager's Workloads; it does not watch them");
  }

  falcon::kube::MultiKueueWiring wiring() override {
    const auto list = [](const std::vector<json>& items) { return json{{"items", items}}; };
    return falcon::kube::parse_multikueue_wiring(
        list(m_.admission_checks()), list(m_.multikueue_configs()), list(m_.multikueue_clusters()));
  }

  void nominate(const falcon::kube::ManagerWorkload& w, const std::vector<std::string>& clusters,
                const std::string&) override {
    json patch = {{"status", {{"nominatedClusterNames", clusters}}}};
    if (!w.resource_version.empty()) patch["metadata"] = {{"resourceVersion", w.resource_version}};
    try {
      m_.patch_workload_status(w.namespace_, w.name, "application/merge-patch+json", patch.dump());
    } catch (const falcon::fleet::ManagerError& e) {
      throw falcon::kube::KubeError(e.code(), e.reason(), e.what());
    }
    ++patches_;
  }

  std::optional<std::string> kueue_dispatcher() override { return m_.spec().dispatcher; }

  std::int64_t patches() const { return patches_; }

 private:
  falcon::fleet::MultiKueueManager& m_;
  std::int64_t patches_ = 0;
};

// One copy of a job on one cluster, as the fleet shows it.
struct Copy {
  std::int64_t reserved_ns = -1;  // admitted (QuotaReserved)
  std::int64_t started_ns = -1;   // running
  std::int64_t finished_ns = -1;
  bool failed = false;
};

struct Job {
  std::string name;
  std::int64_t arrival_s = 0;
  std::string accelerator;
  int duration_s = 0;
  std::string priority;
  int chips = 0;
  // Run state.
  std::map<std::string, Copy> copies;  // cluster -> its copy as last seen
  std::string cluster;                 // the copy that runs it; empty while held or undecided
  bool frag = false;
  // Through the manager: its Workload's record (manager state), once it has one.
  std::int64_t created_ns = -1;
  std::int64_t first_nominated_ns = -1;
  std::int64_t started_ns = -1;  // the winning copy's start on its worker
  std::int64_t finished_ns = -1;
  bool failed = false;

  const Copy* won() const {
    const auto it = copies.find(cluster);
    return cluster.empty() || it == copies.end() ? nullptr : &it->second;
  }
};

int priority_rank(const std::string& p) { return p == "high" ? 0 : p == "medium" ? 1 : 2; }

std::vector<Job> read_trace(const std::string& path, int limit) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the trace " + path);
  const json j = json::parse(in);
  std::vector<Job> jobs;
  std::map<std::string, int> chips(types().begin(), types().end());
  for (const json& e : j.at("jobs")) {
    Job job;
    job.name = e.at("name").get<std::string>();
    job.arrival_s = e.at("arrival_s").get<std::int64_t>();
    job.accelerator = e.at("accelerator").get<std::string>();
    job.duration_s = e.at("duration_s").get<int>();
    job.priority = e.at("priority").get<std::string>();
    if (!chips.count(job.accelerator)) {
      throw std::runtime_error(path + ": job " + job.name + " has an accelerator outside " +
                               "v4-8..v4-128: " + job.accelerator);
    }
    if (job.priority != "low" && job.priority != "medium" && job.priority != "high") {
      throw std::runtime_error(path + ": job " + job.name + " has a priority other than low, " +
                               "medium or high: " + job.priority);
    }
    job.chips = chips[job.accelerator];
    jobs.push_back(job);
    if (limit > 0 && static_cast<int>(jobs.size()) == limit) break;
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const Job& a, const Job& b) { return a.arrival_s < b.arrival_s; });
  return jobs;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p * (static_cast<double>(v.size()) - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = static_cast<std::size_t>(std::ceil(rank));
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

// {"n", "mean_wait_s", "p50_wait_s", "p95_wait_s", "max_wait_s"} of `waits`.
json wait_stats(const std::vector<double>& waits) {
  double mean = 0;
  for (double w : waits) mean += w;
  mean = waits.empty() ? 0 : mean / static_cast<double>(waits.size());
  return {{"n", waits.size()},
          {"mean_wait_s", mean},
          {"p50_wait_s", percentile(waits, 0.5)},
          {"p95_wait_s", percentile(waits, 0.95)},
          {"max_wait_s", waits.empty() ? 0 : *std::max_element(waits.begin(), waits.end())}};
}

// One policy over the trace on a fresh fleet.
class PolicyRun {
 public:
  PolicyRun(const Options& o, std::string policy, std::vector<Job> jobs)
      : o_(o),
        policy_(std::move(policy)),
        managed_(is_manager_policy(policy_)),
        jobs_(std::move(jobs)),
        fleet_(falcon::fleet::parse_fleet_config(
                   fleet_yaml(manager_dispatcher(policy_), o.worker_preemption), "trace.yaml"),
               fleet_options()) {
    fleet_.start();
    const std::string repos = (dir_.path() / "repos.yaml").string();
    std::ofstream(repos) << repos_yaml(policy_, dir_.path(), o.fleet_bin, fleet_.url());
    deps_.clock = std::make_shared<FleetTime>(fleet_.clock());
    fabric_ = std::make_unique<falcon::ClusterFabric>(repos, deps_);
    for (const auto& w : fabric_->warm_up()) {
      if (!w.ok) throw std::runtime_error("warm-up of " + w.cluster + ": " + w.error.value_or(""));
    }
    for (auto& j : jobs_) by_name_[j.name] = &j;
    if (managed_) {
      manager_ = fleet_.simulator().manager();
      if (manager_ == nullptr) throw std::runtime_error("the fleet has no MultiKueue manager");
    }
    if (policy_ == "dispatch") {
      api_ = std::make_shared<InProcessManager>(*manager_);
      falcon::DispatcherOptions d;
      d.settings.dispatcher_name = kExternalDispatcher;
      d.settings.retry_s = o.retry_s;
      d.settings.preempt_after_s = o.preempt_after_s;
      d.settings.keep_room = o.keep_room;
      d.manager = api_;
      d.store = fabric_->state_store();
      d.clock = deps_.clock;
      d.decide = [this](const std::string& accelerator, const falcon::PlacementHints& hints) {
        return decide(accelerator, hints);
      };
      d.registry_clusters = [this] {
        std::vector<std::string> names;
        for (const auto& c : fabric_->list_clusters()) names.push_back(c.name);
        return names;
      };
      d.on_event = [this](const std::string&, const std::string& message) {
        ++dispatcher_events_;
        last_dispatcher_event_ = message;
      };
      dispatcher_ = std::make_unique<falcon::Dispatcher>(std::move(d));
    }
  }
  ~PolicyRun() {
    dispatcher_.reset();
    fleet_.stop();
  }

  json run() {
    const std::int64_t t0 = fleet_.clock().now_ns();
    const auto sim_s = [&]() { return (fleet_.clock().now_ns() - t0) / 1'000'000'000; };
    const std::int64_t last_arrival = jobs_.empty() ? 0 : jobs_.back().arrival_s;
    const std::int64_t stop_s = last_arrival + static_cast<std::int64_t>(o_.max_hours * 3600);
    const bool dispatch = policy_ == "dispatch";
    const auto wall0 = std::chrono::steady_clock::now();
    std::size_t next_arrival = 0;
    std::int64_t next_tick = 0;
    std::int64_t next_wiring = 0;
    for (;;) {
      const std::int64_t now_s = sim_s();
      bool arrived = false;
      while (next_arrival < jobs_.size() && jobs_[next_arrival].arrival_s <= now_s) {
        Job& job = jobs_[next_arrival++];
        if (managed_) {
          create_manager_workload(job);
        } else {
          waiting_.push_back(&job);
        }
        arrived = true;
      }
      // Falcon's held work is decided again on the retry grid; a new job at once.
      const bool retry = now_s % o_.retry_s == 0;
      if (!managed_ && (arrived || retry) && !waiting_.empty()) place();
      if (dispatch && (arrived || retry)) {
        if (now_s >= next_wiring) {  // as the dispatcher's loop does, every 30 s
          dispatcher_->refresh_wiring();
          next_wiring = now_s + 30;
        }
        dispatch_passes();
      }
      bool done = false;
      if (now_s >= next_tick) {
        observe();
        while (next_tick <= now_s) next_tick += o_.tick_s;
        done = next_arrival == jobs_.size() &&
               std::all_of(jobs_.begin(), jobs_.end(), [&](const Job& j) {
                 return managed_ ? j.finished_ns >= 0 : j.won() && j.won()->finished_ns >= 0;
               });
      }
      if (done || now_s >= stop_s) break;
      // The next instant anything is owed: an arrival, a tick, falcon's retry of held work.
      std::int64_t next = next_tick;
      if (next_arrival < jobs_.size()) next = std::min(next, jobs_[next_arrival].arrival_s);
      const bool held = managed_ ? dispatch && dispatcher_waits() : !waiting_.empty();
      if (held) next = std::min(next, (now_s / o_.retry_s + 1) * o_.retry_s);
      fleet_.clock().advance(std::chrono::seconds(next - now_s));
      fleet_.simulator().advance();
    }
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return summary(t0, wall_s);
  }

 private:
  static falcon::fleet::FleetServiceOptions fleet_options() {
    falcon::fleet::FleetServiceOptions fo;
    fo.time_scale = 0;
    fo.require_auth = false;
    return fo;
  }

  // The manager's dispatcher for `policy`; empty: no manager.
  static std::string manager_dispatcher(const std::string& policy) {
    if (policy == "allatonce") return std::string(falcon::fleet::kDispatcherAllAtOnce);
    if (policy == "incremental") return std::string(falcon::fleet::kDispatcherIncremental);
    if (policy == "dispatch") return kExternalDispatcher;
    return "";
  }

  falcon::WorkloadSpec spec_of(const Job& job) const {
    falcon::WorkloadSpec spec;
    spec.name = job.name;
    spec.docker_image = "gcr.io/trace-bench/trainer:1";
    spec.command = {"python3", "train.py"};
    spec.accelerator_type = "tpu-" + job.accelerator;
    spec.priority = job.priority;
    spec.env = {{"FLEET_DURATION_S", std::to_string(job.duration_s)},
                {"FLEET_LOG_LINES", "1"},
                {"FLEET_CHECKPOINT_S", std::to_string(kCheckpointS)}};
    return spec;
  }

  // --- falcon, directly.

  // Creates `job`'s copy on `cluster`; false when the create failed.
  bool create(Job& job, const std::string& cluster) {
    ++submits_;
    try {
      fabric_->submit_workload(cluster, spec_of(job));
    } catch (const std::exception&) {
      ++submit_failures_;
      return false;
    }
    ++created_;
    job.copies[cluster];
    return true;
  }

  // The held jobs, high priority first, then by arrival, each decided and submitted.
  void place() {
    std::stable_sort(waiting_.begin(), waiting_.end(), [](const Job* a, const Job* b) {
      return priority_rank(a->priority) < priority_rank(b->priority);
    });
    std::set<std::string> none_for;  // types that found no cluster at this instant
    std::vector<Job*> still;
    for (Job* job : waiting_) {
      if (none_for.count(job->accelerator)) {
        still.push_back(job);
        continue;
      }
      std::string chosen;
      ++selections_;
      try {
        chosen = choose(*job);
      } catch (const falcon::NoAvailableClusterError& e) {
        ++no_cluster_;
        none_for.insert(job->accelerator);
        if (fragmented(e)) job->frag = true;
        still.push_back(job);
        continue;
      }
      if (create(*job, chosen)) {
        job->cluster = chosen;
      } else {
        still.push_back(job);
      }
    }
    waiting_ = std::move(still);
  }

  static bool fragmented(const falcon::NoAvailableClusterError& e) {
    return std::any_of(e.scores().begin(), e.scores().end(), [](const auto& c) {
      return c.skip_reason.find("fragmented") != std::string::npos;
    });
  }

  std::string choose(const Job& job) {
    const falcon::ClusterSelection s = fabric_->select_cluster("tpu-" + job.accelerator);
    std::vector<const falcon::CandidateScore*> eligible;
    for (const auto& c : s.scores) {
      if (c.eligible) eligible.push_back(&c);
    }
    if (policy_ == "random" && !eligible.empty()) {
      return eligible[random_() % eligible.size()]->cluster;
    }
    if (policy_ == "priority-fit" && !eligible.empty()) {
      // The priority policy's order (priority, then queue depth, then running, then file
      // order) among those that fit.
      return (*std::min_element(eligible.begin(), eligible.end(),
                                [](auto* a, auto* b) {
                                  const int qa = a->signals.queue_depth.value_or(0);
                                  const int qb = b->signals.queue_depth.value_or(0);
                                  const int ra = a->signals.running.value_or(0);
                                  const int rb = b->signals.running.value_or(0);
                                  return std::tie(a->priority, qa, ra) <
                                         std::tie(b->priority, qb, rb);
                                }))
          ->cluster;
    }
    return s.selected_cluster;
  }

  // --- Through the manager.

  // The job as a user submits it to the manager: a Workload of its type (label), priority
  // class and one slice's pods, running for its duration (the fleet's FLEET_* env).
  void create_manager_workload(Job& job) {
    const int pods =
        falcon::fleet::workers_per_slice(job.accelerator, falcon::tools::DeviceClass::kTpu,
                                         fleet_.simulator().config().workers_per_slice);
    const json env =
        json::array({{{"name", "FLEET_DURATION_S"}, {"value", std::to_string(job.duration_s)}},
                     {{"name", "FLEET_LOG_LINES"}, {"value", "1"}},
                     {{"name", "FLEET_CHECKPOINT_S"}, {"value", std::to_string(kCheckpointS)}}});
    const json container = {{"name", "jax-tpu"},
                            {"image", "gcr.io/trace-bench/trainer:1"},
                            {"command", json::array({"python3", "train.py"})},
                            {"env", env}};
    const json object = {
        {"apiVersion", "kueue.x-k8s.io/v1beta2"},
        {"kind", "Workload"},
        {"metadata",
         {{"name", job.name}, {"labels", {{falcon::kube::kAcceleratorLabel, job.accelerator}}}}},
        {"spec",
         {{"queueName", "user-queue"},
          {"priorityClassName", job.priority},
          {"podSets", json::array({{{"name", "main"},
                                    {"count", pods},
                                    {"template",
                                     {{"spec", {{"containers", json::array({container})}}}}}}})}}}};
    manager_->create_workload(kNamespace, object);
  }

  // The dispatcher's decision: least-wait's select_cluster, as the direct `least-wait` makes
  // it (every candidate probed now, the probe recorded in the history and fed to its breaker;
  // open breakers skipped), with the dispatcher's hints as `falcon serve`'s control plane
  // applies them (select_excluding): a left-out cluster is a candidate that cannot win, a
  // nomination not admitted yet one more queued workload of its cluster.
  falcon::Decision decide(const std::string& accelerator, const falcon::PlacementHints& hints) {
    ++selections_;
    falcon::ClusterFabric::SelectOptions how;
    how.probe = [this, &hints](const falcon::ClusterConfig& c) {
      if (const auto it = hints.left_out.find(c.name); it != hints.left_out.end()) {
        falcon::ClusterProbeResult r;
        r.cluster = c.name;
        r.reachable = false;
        r.error = "left out: " + it->second;
        r.probed_at = falcon::format_iso8601(deps_.clock->now());
        return r;
      }
      falcon::ClusterProbeResult r = fabric_->get_cluster_status(c.name);
      if (const auto it = hints.in_flight.find(c.name);
          r.reachable && it != hints.in_flight.end() && it->second > 0) {
        r.queue_depth = r.queue_depth.value_or(0) + it->second;
      }
      return r;
    };
    falcon::Decision d;
    try {
      d.selection = fabric_->select_cluster(accelerator, how);
    } catch (const falcon::NoAvailableClusterError& e) {
      ++no_cluster_;
      if (fragmented(e)) frag_types_.insert(accelerator);
      throw;
    }
    for (const auto& s : d.selection.scores) {
      if (!s.eligible) d.skipped.emplace(s.cluster, s.skip_reason);
    }
    return d;
  }

  // The dispatcher at this instant: the manager's Workloads listed into it when they changed,
  // then a pass; again while a pass nominates (the admissions it caused are what its watch
  // would bring before its next pass).
  void dispatch_passes() {
    const auto real0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kMaxPassesAtOnce; ++i) {
      const std::uint64_t version = manager_->resource_version();
      if (version != listed_version_) {
        dispatcher_->apply_list(api_->list_workloads());
        listed_version_ = version;
      }
      const std::int64_t before = api_->patches();
      frag_types_.clear();
      dispatcher_->pass();
      ++passes_;
      // A Workload held by a decision that ruled a candidate out as fragmented.
      if (!frag_types_.empty()) {
        for (const auto& [key, why] : dispatcher_->status().held) {
          if (why.rfind("no worker has room", 0) == 0) continue;  // not decided itself
          const auto job = by_name_.find(key.substr(key.find('/') + 1));
          if (job != by_name_.end() && frag_types_.count(job->second->accelerator)) {
            job->second->frag = true;
          }
        }
      }
      if (api_->patches() == before) break;
    }
    dispatch_real_s_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - real0).count();
  }

  // Whether the dispatcher has Workloads waiting for it or nominations not admitted yet.
  bool dispatcher_waits() const {
    const falcon::DispatchStatus s = dispatcher_->status();
    return s.waiting > 0 || s.nominated > 0;
  }

  // --- Observation (every tick).

  // Admissions, starts and ends as the fleet records them; jobs held back by fragmentation;
  // through the manager, its Workloads' records and counters.
  void observe() {
    auto& sim = fleet_.simulator();
    const json state = sim.state();
    preemptions_ = state.at("preemptions");
    std::vector<std::pair<Job*, std::string>> queued;  // copies seen, not admitted
    for (const json& c : state.at("clusters")) {
      const std::string cluster = c.at("name").get<std::string>();
      for (const json& w : c.at("workloads")) {
        const auto it = by_name_.find(w.at("name").get<std::string>());
        if (it == by_name_.end()) continue;
        Job& job = *it->second;
        // Direct: the copies falcon created; through the manager: every copy it made.
        if (!managed_ && !job.copies.contains(cluster)) continue;
        Copy& k = job.copies[cluster];
        k.reserved_ns = w.at("reserved_ns").get<std::int64_t>();
        k.started_ns = w.at("started_ns").get<std::int64_t>();
        k.finished_ns = w.at("finished_ns").get<std::int64_t>();
        k.failed = w.at("failed").get<bool>();
        if (k.reserved_ns < 0) queued.emplace_back(&job, cluster);
      }
    }
    if (managed_) {
      const json& m = state.at("manager");
      remote_created_ = m.at("remote_created").get<std::int64_t>();
      remote_deleted_ = m.at("remote_deleted").get<std::int64_t>();
      for (const json& w : m.at("workloads")) {
        const auto it = by_name_.find(w.at("name").get<std::string>());
        if (it == by_name_.end()) continue;
        Job& job = *it->second;
        job.created_ns = w.at("created_ns").get<std::int64_t>();
        job.first_nominated_ns = w.at("first_nominated_ns").get<std::int64_t>();
        if (w.at("cluster").is_null()) continue;
        job.cluster = w.at("cluster").get<std::string>();
        // The winner's start: as seen on its worker, else its reservation plus that worker's
        // start delay (a run that ended between two ticks is deleted by then).
        const std::int64_t reserved = w.at("winner_reserved_ns").get<std::int64_t>();
        const auto seen = job.copies.find(job.cluster);
        if (seen != job.copies.end() && seen->second.started_ns >= 0 &&
            seen->second.reserved_ns == reserved) {
          job.started_ns = seen->second.started_ns;
        } else if (job.started_ns < 0) {
          job.started_ns =
              reserved + static_cast<std::int64_t>(admission_delay_s(job.cluster)) * 1'000'000'000;
        }
        job.finished_ns = w.at("winner_finished_ns").get<std::int64_t>();
        job.failed = w.at("outcome") == "Failed";
      }
    }
    if (queued.empty()) return;
    // Copies queued on a cluster that has their chips free, but in no block large enough.
    std::map<std::string, std::pair<double, double>> room;  // cluster -> (free, largest run)
    for (const auto& shape : shapes()) {
      const auto view = sim.cluster_queue(shape.name);
      if (view.failure) continue;
      double free = 0, largest = 0;
      for (const json& f : view.object["status"]["flavorsUsage"]) {
        if (f["name"] != "tpu-v4-podslice") continue;
        free -= std::stod(f["resources"][0]["total"].get<std::string>());
      }
      for (const json& f : view.object["spec"]["resourceGroups"][0]["flavors"]) {
        if (f["name"] != "tpu-v4-podslice") continue;
        free += std::stod(f["resources"][0]["nominalQuota"].get<std::string>());
      }
      const json blocks = json::parse(
          view.object["metadata"]["annotations"]["falcon.dev/free-blocks"].get<std::string>());
      for (const json& b : blocks["tpu-v4-podslice"]) largest = std::max(largest, b.get<double>());
      room[shape.name] = {free, largest};
    }
    for (const auto& [job, cluster] : queued) {
      const auto r = room.find(cluster);
      if (r != room.end() && r->second.first >= job->chips && r->second.second < job->chips) {
        job->frag = true;
      }
    }
  }

  json summary(std::int64_t t0, double wall_s) const {
    std::vector<double> waits;
    std::map<std::string, std::vector<double>> by_class;
    std::vector<double> to_nomination;
    int unplaced = 0, failed = 0, frag = 0, admitted = 0;
    std::map<std::string, int> placed_on;
    std::int64_t makespan_end = t0;
    for (const Job& j : jobs_) {
      if (j.frag) ++frag;
      if (managed_ && j.first_nominated_ns >= 0 && j.created_ns >= 0) {
        to_nomination.push_back(static_cast<double>(j.first_nominated_ns - j.created_ns) / 1e9);
      }
      std::int64_t started = -1, finished = -1;
      bool job_failed = false;
      if (managed_) {
        started = j.started_ns;
        finished = j.finished_ns;
        job_failed = j.failed;
      } else if (const Copy* c = j.won()) {
        started = c->started_ns;
        finished = c->finished_ns;
        job_failed = c->failed;
      }
      if (!j.cluster.empty()) {
        ++admitted;
        ++placed_on[j.cluster];
      }
      if (job_failed) ++failed;
      if (started < 0) {
        ++unplaced;
        continue;
      }
      // The time it made no progress: its end - arrival - duration, so that run a preemption
      // threw away counts; one not finished by the end: its start - arrival.
      const double wait = finished >= 0 ? static_cast<double>(finished - t0) / 1e9 -
                                              static_cast<double>(j.arrival_s) - j.duration_s
                                        : static_cast<double>(started - t0) / 1e9 -
                                              static_cast<double>(j.arrival_s);
      waits.push_back(wait);
      by_class[j.priority].push_back(wait);
      makespan_end = std::max(makespan_end, finished >= 0 ? finished : started);
    }
    json classes = json::object();
    for (const auto& [name, w] : by_class) classes[name] = wait_stats(w);
    json out = wait_stats(waits);
    const std::int64_t created = managed_ ? remote_created_ : created_;
    const std::int64_t deleted = managed_ ? remote_deleted_ : 0;
    const double per = admitted > 0 ? 1.0 / admitted : 0.0;
    out.update(
        {{"policy", policy_},
         {"path", policy_ == "dispatch" ? "falcon's Dispatcher through the manager"
                  : managed_            ? "MultiKueue manager"
                                        : "falcon directly (fleet-xpk)"},
         {"jobs", jobs_.size()},
         {"by_priority", classes},
         {"makespan_s", static_cast<double>(makespan_end - t0) / 1e9 -
                            static_cast<double>(jobs_.empty() ? 0 : jobs_.front().arrival_s)},
         {"frag_jobs", frag},
         {"unplaced", unplaced},
         {"admitted", admitted},
         {"failed", failed},
         {"created", created},
         {"deleted", deleted},
         {"created_per_admitted", static_cast<double>(created) * per},
         {"deleted_per_admitted", static_cast<double>(deleted) * per},
         {"placed_on", placed_on},
         {"retry_s", o_.retry_s},
         {"worker_preemption", o_.worker_preemption},
         {"preemptions",
          {{"evicted", preemptions_.value("evicted", 0)},
           {"lost_chip_h", preemptions_.value("lost_chip_s", 0.0) / 3600}}},
         {"wall_s", wall_s}});
    if (!managed_ || policy_ == "dispatch") {
      out.update({{"selections", selections_}, {"no_cluster", no_cluster_}});
    }
    if (!managed_) {
      out.update({{"submits", submits_}, {"submit_failures", submit_failures_}});
    }
    if (managed_) {
      out["manager_dispatcher"] = manager_->spec().dispatcher;
      out["to_nomination"] = wait_stats(to_nomination);
    }
    if (policy_ == "dispatch") {
      const falcon::DispatchStatus s = dispatcher_->status();
      out["dispatcher"] = {
          {"nominations", s.nominations},
          {"renominations", s.renominations},
          {"preemptions", s.preemptions},
          {"preemptions_unconfirmed", s.preemptions_unconfirmed},
          {"preempt_after_s", o_.preempt_after_s ? json(*o_.preempt_after_s) : json(nullptr)},
          {"preempt_confirm_s", falcon::DispatchSettings{}.preempt_confirm_s},  // the default
          {"keep_room", o_.keep_room},
          {"admitted", s.admitted},
          {"conflicts", s.conflicts},
          {"failures", s.failures},
          {"held_at_end", s.waiting},
          {"problem", s.problem ? json(*s.problem) : json(nullptr)},
          {"events", dispatcher_events_},
          {"last_event", last_dispatcher_event_},
          {"passes", passes_},
          {"real_s_in_passes", dispatch_real_s_}};
    }
    return out;
  }

  static constexpr int kMaxPassesAtOnce = 64;

  const Options& o_;
  std::string policy_;
  bool managed_;  // through the fleet's MultiKueue manager
  std::vector<Job> jobs_;
  ScratchDir dir_;
  falcon::fleet::FleetService fleet_;
  falcon::FabricDependencies deps_;
  std::unique_ptr<falcon::ClusterFabric> fabric_;
  std::map<std::string, Job*> by_name_;
  std::mt19937_64 random_{20261201};
  int selections_ = 0, no_cluster_ = 0;
  // Direct.
  std::vector<Job*> waiting_;          // arrived, not placed
  json preemptions_ = json::object();  // the fleet's: {evicted, lost_chip_s}
  int submits_ = 0, submit_failures_ = 0;
  std::int64_t created_ = 0;
  // Through the manager.
  falcon::fleet::MultiKueueManager* manager_ = nullptr;
  std::int64_t remote_created_ = 0, remote_deleted_ = 0;
  // The dispatcher.
  std::shared_ptr<InProcessManager> api_;
  std::unique_ptr<falcon::Dispatcher> dispatcher_;
  std::uint64_t listed_version_ = 0;
  std::set<std::string> frag_types_;  // types a failed decision of this pass found fragmented
  std::int64_t passes_ = 0;
  double dispatch_real_s_ = 0;
  int dispatcher_events_ = 0;
  std::string last_dispatcher_event_;
};

json run_policy(const Options& o, const std::string& policy, std::vector<Job> jobs) {
  PolicyRun run(o, policy, std::move(jobs));
  return run.run();
}

// Grouped bars: mean and p95 queue wait (minutes) per policy.
std::string chart_svg(const json& runs, const std::string& title) {
  const int w = 640, h = 360, left = 60, bottom = 60, top = 50;
  double max_v = 1;
  for (const json& r : runs) max_v = std::max(max_v, r["p95_wait_s"].get<double>() / 60);
  const double scale = (h - top - bottom) / (max_v * 1.1);
  std::ostringstream s;
  s << fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"{}\" y=\"24\" font-size=\"15\">{}</text>\n",
      w, h, left, title);
  const int base = h - bottom;
  s << fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, base,
                   w - 20, base);
  s << fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, top,
                   left, base);
  for (int i = 0; i <= 4; ++i) {
    const double v = max_v * 1.1 * i / 4;
    const double y = base - v * scale;
    s << fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.0f}</text><line x1=\"{}\" "
        "y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
        left - 6, y + 4, v, left, y, w - 20, y);
  }
  s << fmt::format(
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\">wait to start (min)</text>\n",
      (top + base) / 2, (top + base) / 2);
  const double group = static_cast<double>(w - 20 - left) / std::max<std::size_t>(1, runs.size());
  int i = 0;
  for (const json& r : runs) {
    const double x = left + group * i + group * 0.15;
    const double bw = group * 0.33;
    const double mean = r["mean_wait_s"].get<double>() / 60;
    const double p95 = r["p95_wait_s"].get<double>() / 60;
    s << fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#4e79a7\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.0f}</text>\n",
        x, base - mean * scale, bw, mean * scale, x + bw / 2, base - mean * scale - 4, mean);
    s << fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#f28e2b\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.0f}</text>\n",
        x + bw, base - p95 * scale, bw, p95 * scale, x + bw * 1.5, base - p95 * scale - 4, p95);
    s << fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x + bw,
                     base + 18, r["policy"].get<std::string>());
    ++i;
  }
  s << fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"#4e79a7\"/><text x=\"{}\" "
      "y=\"{}\">mean</text><rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" "
      "fill=\"#f28e2b\"/><text x=\"{}\" y=\"{}\">p95</text>\n",
      left, h - 24, left + 16, h - 14, left + 70, h - 24, left + 86, h - 14);
  s << "</svg>\n";
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  if (!o.merge.empty()) {
    // Runs made by separate processes (one policy each), combined into one output and chart.
    json all = json::array();
    json first;
    for (const std::string& f : o.merge) {
      std::ifstream in(f);
      const json j = json::parse(in, nullptr, false);
      if (!j.is_object() || !j.contains("runs")) {
        std::cerr << "trace_bench: " << f << " is not trace_bench output\n";
        return 1;
      }
      if (first.is_null()) first = j;
      for (const json& r : j["runs"]) all.push_back(r);
    }
    if (!o.chart.empty()) {
      std::ofstream(o.chart) << chart_svg(
          all, fmt::format("Wait on {} ({} jobs, 9 clusters)",
                           std::filesystem::path(first.value("trace", "the trace")).stem().string(),
                           all.empty() ? 0 : all[0]["jobs"].get<int>()));
    }
    first["runs"] = all;
    std::cout << first.dump() << "\n";
    return 0;
  }
  try {
    const std::vector<Job> jobs = read_trace(o.trace, o.jobs);
    json runs = json::array();
    for (const std::string& policy : o.policies) {
      std::cerr << "trace_bench: policy " << policy << " over " << jobs.size() << " jobs\n";
      json r = run_policy(o, policy, jobs);
      std::cerr << "trace_bench: " << r.dump() << "\n";
      runs.push_back(std::move(r));
    }
    if (!o.chart.empty()) {
      std::ofstream(o.chart) << chart_svg(
          runs, fmt::format("Wait on {} ({} jobs, 9 clusters)",
                            std::filesystem::path(o.trace).stem().string(), jobs.size()));
    }
    std::cout << json{{"trace", o.trace}, {"tick_s", o.tick_s}, {"runs", runs}}.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "trace_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
