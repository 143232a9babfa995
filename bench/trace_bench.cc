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
// decisions), submits and deletes through fleet-xpk processes. Its clocks, wall and monotonic,
// are the fleet's simulated clock: breaker cool-downs, signal windows and probe latencies are
// simulated time, so a run depends on the trace alone.
//
// Falcon's policies (priority, priority-fit, score, least-wait, random): every --tick simulated
// seconds the jobs that have arrived and are not placed are offered, high priority first, then
// by arrival (falcon holds them: late binding): a decision (`select_cluster`), then
// `submit_workload` to the chosen cluster. A job that finds no cluster, or whose submit fails,
// waits for the next tick (a type that found none is not asked again in the same tick).
// `priority-fit` is the spec's order among the candidates that can fit the slice now; `random`
// a uniformly random eligible candidate of the priority decision (seeded).
//
// MultiKueue's dispatchers, as its manager drives the workers (the same xpk creates and
// deletes on the same workers): `allatonce` creates a copy of each job on every worker that
// offers its type as it arrives; `incremental` on the first 3 workers in configuration order,
// 3 more every 5 minutes until one admits it. Each worker's Kueue orders its queue by priority
// then age (the fleet does). The first copy to be admitted (QuotaReserved) wins and every other
// copy is deleted; a create or delete that fails is tried again the next tick.
//
// Measured per policy:
//   wait            the job's start (running on the cluster that won it) - arrival: held by
//                   falcon, queued on the cluster and the cluster's admission delay; mean, p95
//                   and max, overall and per priority class
//   makespan        the last job's end - the first arrival
//   frag_jobs       jobs that waited on fragmentation: held because a candidate was ruled out
//                   as fragmented, or queued on a cluster that had the chips free but no block
//                   large enough
//   unplaced        jobs never started when the run stops (--max-hours after the last arrival)
//   created, deleted  workload objects created on clusters and deleted by the dispatcher, and
//                   per started job
//   open_submits    submits to a cluster whose breaker was open (refusing calls) at that moment
//                   (none by construction for falcon's policies, which skip open breakers)
//   submit_failures creates that failed (the flaky and flapping clusters)
// One JSON object on stdout; --chart=FILE writes an SVG bar chart of mean and p95 waits.
//
//   trace_bench --fleet-bin=DIR --trace=FILE [--tick=60] [--policies=P,...] [--chart=FILE]
//               [--jobs=N] [--max-hours=24]
//   trace_bench --merge=a.json,b.json [--chart=FILE]   # outputs of runs made one policy each
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
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
#include "fleet/fleet_config.h"
#include "fleet/fleet_service.h"

#include "bench_support.h"

using falcon::bench::ScratchDir;
using nlohmann::json;

namespace {

struct Options {
  std::string fleet_bin;
  std::string trace;
  int tick_s = 60;
  std::vector<std::string> policies = {"priority",   "priority-fit", "score",
                                       "least-wait", "allatonce",    "incremental"};
  std::string chart;
  std::vector<std::string> merge;  // --merge: earlier outputs to combine (no run)
  int jobs = 0;                    // 0: all of the trace
  double max_hours = 24;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "trace_bench: " << problem << "\n"
            << "usage: trace_bench --fleet-bin=DIR --trace=FILE [--tick=60] "
               "[--policies=priority,priority-fit,score,least-wait,random,allatonce,incremental] "
               "[--chart=FILE.svg] [--jobs=N] "
               "[--max-hours=24]\n";
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
      } else if (flag == "--chart") {
        o.chart = value;
      } else if (flag == "--merge") {
        std::stringstream ss(value);
        for (std::string f; std::getline(ss, f, ',');) o.merge.push_back(f);
      } else if (flag == "--jobs") {
        o.jobs = std::stoi(value);
      } else if (flag == "--max-hours") {
        o.max_hours = std::stod(value);
      } else if (flag == "--policies") {
        o.policies.clear();
        std::stringstream ss(value);
        for (std::string p; std::getline(ss, p, ',');) {
          static const std::set<std::string> kKnown = {"priority",   "priority-fit", "score",
                                                       "least-wait", "random",       "allatonce",
                                                       "incremental"};
          if (!kKnown.contains(p)) {
            usage("unknown policy '" + p + "'");
          }
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
  if (o.tick_s < 1 || o.policies.empty() || o.jobs < 0 || o.max_hours <= 0) {
    usage("--tick, --max-hours must be positive and --policies not empty");
  }
  return o;
}

// The clusters: name, blocks of chips (tpu-v4-podslice), slot priority, behaviour.
struct ClusterShape {
  std::string name;
  std::vector<int> blocks;
  int priority;
  std::string behaviour;  // the fleet file's behaviour map, or empty
};

const std::vector<ClusterShape>& shapes() {
  static const std::vector<ClusterShape> kShapes = {
      {"tpu-east-1", {128, 128}, 1, ""},
      {"tpu-east-frag", {64, 64, 32, 32, 32}, 1, ""},
      {"tpu-flaky", {128, 64}, 1, "{flaky: {probability: 0.15, seed: 7}}"},
      {"tpu-flap", {128, 128}, 1, "{flap: {period_s: 3600, down_s: 900, offset_s: 1800}}"},
      {"tpu-west-big", {256}, 2, ""},
      {"tpu-west-small", {32, 32, 32, 32}, 2, ""},
      {"tpu-central", {128, 32, 32}, 2, "{admission_delay_s: 60}"},
      {"tpu-south", {64, 64}, 3, ""},
      {"tpu-tiny", {16, 16, 16, 16}, 3, ""},
  };
  return kShapes;
}

const std::vector<std::pair<std::string, int>>& types() {
  static const std::vector<std::pair<std::string, int>> kTypes = {
      {"v4-8", 4}, {"v4-16", 8}, {"v4-32", 16}, {"v4-64", 32}, {"v4-128", 64}};
  return kTypes;
}

std::string fleet_yaml() {
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
    if (!c.behaviour.empty()) y << "    behaviour: " << c.behaviour << "\n";
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
  // least-wait's fit rule keeps; the MultiKueue dispatchers select nothing.
  const std::string configured = policy == "priority-fit"                      ? "least-wait"
                                 : policy == "score" || policy == "least-wait" ? policy
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
  std::map<std::string, Copy> copies;  // cluster -> its copy (one unless a MultiKueue baseline)
  std::string cluster;                 // the copy that runs it; empty while held or undecided
  std::int64_t first_offer_s = -1;     // incremental: when its first round was nominated
  bool frag = false;

  const Copy* won() const {
    const auto it = copies.find(cluster);
    return cluster.empty() || it == copies.end() ? nullptr : &it->second;
  }
};

int priority_rank(const std::string& p) { return p == "high" ? 0 : p == "medium" ? 1 : 2; }

// The clusters that offer `chips`-chip slices, in configuration order.
std::vector<std::string> offering(int chips) {
  std::vector<std::string> out;
  for (const auto& c : shapes()) {
    if (*std::max_element(c.blocks.begin(), c.blocks.end()) >= chips) out.push_back(c.name);
  }
  return out;
}

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

// {"n", "mean_wait_s", "p95_wait_s", "max_wait_s"} of `waits`.
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
        jobs_(std::move(jobs)),
        fleet_(falcon::fleet::parse_fleet_config(fleet_yaml(), "trace.yaml"), fleet_options()) {
    fleet_.start();
    const std::string repos = (dir_.path() / "repos.yaml").string();
    std::ofstream(repos) << repos_yaml(policy_, dir_.path(), o.fleet_bin, fleet_.url());
    deps_.clock = std::make_shared<FleetTime>(fleet_.clock());
    fabric_ = std::make_unique<falcon::ClusterFabric>(repos, deps_);
    for (const auto& w : fabric_->warm_up()) {
      if (!w.ok) throw std::runtime_error("warm-up of " + w.cluster + ": " + w.error.value_or(""));
    }
    for (auto& j : jobs_) by_name_[j.name] = &j;
  }
  ~PolicyRun() { fleet_.stop(); }

  json run() {
    const std::int64_t t0 = fleet_.clock().now_ns();
    const auto sim_s = [&]() { return (fleet_.clock().now_ns() - t0) / 1'000'000'000; };
    const std::int64_t last_arrival = jobs_.empty() ? 0 : jobs_.back().arrival_s;
    const std::int64_t stop_s = last_arrival + static_cast<std::int64_t>(o_.max_hours * 3600);
    const bool multikueue = policy_ == "allatonce" || policy_ == "incremental";
    const auto wall0 = std::chrono::steady_clock::now();
    std::size_t next_arrival = 0;
    for (;;) {
      const std::int64_t now_s = sim_s();
      while (next_arrival < jobs_.size() && jobs_[next_arrival].arrival_s <= now_s) {
        waiting_.push_back(&jobs_[next_arrival++]);
      }
      if (multikueue) {
        nominate(now_s);
      } else {
        place();
      }
      observe();
      if (multikueue) settle();
      const bool all_done =
          next_arrival == jobs_.size() && waiting_.empty() &&
          std::all_of(jobs_.begin(), jobs_.end(),
                      [](const Job& j) { return j.won() && j.won()->finished_ns >= 0; }) &&
          doomed_.empty();
      if (all_done || now_s >= stop_s) break;
      fleet_.clock().advance(std::chrono::seconds(o_.tick_s));
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

  falcon::WorkloadSpec spec_of(const Job& job) const {
    falcon::WorkloadSpec spec;
    spec.name = job.name;
    spec.docker_image = "gcr.io/trace-bench/trainer:1";
    spec.command = {"python3", "train.py"};
    spec.accelerator_type = "tpu-" + job.accelerator;
    spec.priority = job.priority;
    spec.env = {{"FLEET_DURATION_S", std::to_string(job.duration_s)}, {"FLEET_LOG_LINES", "1"}};
    return spec;
  }

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

  // Falcon: the held jobs, high priority first, then by arrival, each decided and submitted.
  void place() {
    std::stable_sort(waiting_.begin(), waiting_.end(), [](const Job* a, const Job* b) {
      return priority_rank(a->priority) < priority_rank(b->priority);
    });
    std::set<std::string> none_for;  // types that found no cluster this tick
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
        for (const auto& c : e.scores()) {
          if (c.skip_reason.find("fragmented") != std::string::npos) job->frag = true;
        }
        still.push_back(job);
        continue;
      }
      count_open_breaker(chosen, job->accelerator);
      if (create(*job, chosen)) {
        job->cluster = chosen;
        ++placed_on_[chosen];
      } else {
        still.push_back(job);
      }
    }
    waiting_ = std::move(still);
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
      // The spec's order (priority, then queue depth, then file order) among those that fit.
      return (*std::min_element(eligible.begin(), eligible.end(),
                                [](auto* a, auto* b) {
                                  const int qa = a->signals.queue_depth.value_or(0);
                                  const int qb = b->signals.queue_depth.value_or(0);
                                  return std::tie(a->priority, qa) < std::tie(b->priority, qb);
                                }))
          ->cluster;
    }
    return s.selected_cluster;
  }

  // Was the chosen cluster's breaker refusing calls at this moment?
  void count_open_breaker(const std::string& cluster, const std::string& accelerator) {
    const auto store = fabric_->state_store();
    const auto settings = fabric_->config()->selection.breaker;
    const auto now = deps_.clock->now();
    for (const auto& key :
         {falcon::breaker_key(cluster), falcon::breaker_key(cluster, accelerator)}) {
      if (const auto b = store->get_breaker(key)) {
        if (b->state == falcon::kBreakerOpen &&
            !falcon::breaker_admission(*b, settings, now).allowed) {
          ++open_submits_;
          return;
        }
      }
    }
  }

  // MultiKueue: each undecided job's copies on the workers its dispatcher nominates now.
  void nominate(std::int64_t now_s) {
    for (Job* job : waiting_) {
      if (job->first_offer_s < 0) job->first_offer_s = now_s;
      std::vector<std::string> workers = offering(job->chips);
      if (policy_ == "incremental") {
        const std::int64_t rounds = 1 + (now_s - job->first_offer_s) / kIncrementalRound_s;
        workers.resize(std::min<std::size_t>(workers.size(),
                                             static_cast<std::size_t>(rounds * kIncrementalStep)));
      }
      for (const std::string& w : workers) {
        if (!job->copies.contains(w)) create(*job, w);
      }
    }
  }

  // MultiKueue: a job whose copy was admitted is won by the earliest such copy; the others are
  // deleted (now or, when a delete fails, at the next tick).
  void settle() {
    std::vector<Job*> still;
    for (Job* job : waiting_) {
      // Copies admitted at the same instant: the first in configuration order (the manager
      // sees them in no particular order; this one is neutral to the clusters' speeds).
      std::string winner;
      std::int64_t first = -1;
      for (const std::string& cluster : offering(job->chips)) {
        const auto it = job->copies.find(cluster);
        if (it == job->copies.end()) continue;
        const Copy& copy = it->second;
        if (copy.reserved_ns >= 0 && (first < 0 || copy.reserved_ns < first)) {
          first = copy.reserved_ns;
          winner = cluster;
        }
      }
      if (winner.empty()) {
        still.push_back(job);
        continue;
      }
      job->cluster = winner;
      ++placed_on_[winner];
      for (const auto& [cluster, copy] : job->copies) {
        if (cluster != winner) doomed_.emplace_back(job, cluster);
      }
    }
    waiting_ = std::move(still);
    std::vector<std::pair<Job*, std::string>> left;
    for (auto& [job, cluster] : doomed_) {
      try {
        fabric_->cancel_workload(fabric_->handle_for(cluster, job->name));
        job->copies.erase(cluster);
        ++deleted_;
      } catch (const falcon::WorkloadNotFoundError&) {
        job->copies.erase(cluster);
      } catch (const std::exception&) {
        ++delete_failures_;
        left.emplace_back(job, cluster);
      }
    }
    doomed_ = std::move(left);
  }

  // Admissions, starts and ends as the fleet records them; jobs held back by fragmentation.
  void observe() {
    auto& sim = fleet_.simulator();
    const json state = sim.state();
    for (const json& c : state.at("clusters")) {
      const std::string cluster = c.at("name").get<std::string>();
      for (const json& w : c.at("workloads")) {
        const auto it = by_name_.find(w.at("name").get<std::string>());
        if (it == by_name_.end()) continue;
        const auto copy = it->second->copies.find(cluster);
        if (copy == it->second->copies.end()) continue;
        Copy& k = copy->second;
        k.reserved_ns = w.at("reserved_ns").get<std::int64_t>();
        k.started_ns = w.at("started_ns").get<std::int64_t>();
        k.finished_ns = w.at("finished_ns").get<std::int64_t>();
        k.failed = w.at("failed").get<bool>();
      }
    }
    // Jobs queued on a cluster that has their chips free, but in no block large enough.
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
    for (auto& job : jobs_) {
      for (const auto& [cluster, copy] : job.copies) {
        if (copy.reserved_ns >= 0) continue;
        const auto r = room.find(cluster);
        if (r != room.end() && r->second.first >= job.chips && r->second.second < job.chips) {
          job.frag = true;
        }
      }
    }
  }

  json summary(std::int64_t t0, double wall_s) const {
    std::vector<double> waits;
    std::map<std::string, std::vector<double>> by_class;
    int unplaced = 0, failed = 0, frag = 0, started = 0;
    std::int64_t makespan_end = t0;
    for (const Job& j : jobs_) {
      if (j.frag) ++frag;
      const Copy* c = j.won();
      if (c && c->failed) ++failed;
      if (!c || c->started_ns < 0) {
        ++unplaced;
        continue;
      }
      ++started;
      const double wait =
          static_cast<double>(c->started_ns - t0) / 1e9 - static_cast<double>(j.arrival_s);
      waits.push_back(wait);
      by_class[j.priority].push_back(wait);
      makespan_end = std::max(makespan_end, c->finished_ns >= 0 ? c->finished_ns : c->started_ns);
    }
    json classes = json::object();
    for (const auto& [name, w] : by_class) classes[name] = wait_stats(w);
    json out = wait_stats(waits);
    const double per = started > 0 ? 1.0 / started : 0.0;
    out.update(
        {{"policy", policy_},
         {"jobs", jobs_.size()},
         {"by_priority", classes},
         {"makespan_s", static_cast<double>(makespan_end - t0) / 1e9 -
                            static_cast<double>(jobs_.empty() ? 0 : jobs_.front().arrival_s)},
         {"frag_jobs", frag},
         {"unplaced", unplaced},
         {"failed", failed},
         {"created", created_},
         {"deleted", deleted_},
         {"created_per_started", created_ * per},
         {"deleted_per_started", deleted_ * per},
         {"delete_failures", delete_failures_},
         {"open_submits", open_submits_},
         {"submits", submits_},
         {"submit_failures", submit_failures_},
         {"selections", selections_},
         {"no_cluster", no_cluster_},
         {"placed_on", placed_on_},
         {"wall_s", wall_s}});
    return out;
  }

  static constexpr std::int64_t kIncrementalRound_s = 300;  // MultiKueue: 5 minutes a round
  static constexpr std::int64_t kIncrementalStep = 3;       // ... and 3 workers each

  const Options& o_;
  std::string policy_;
  std::vector<Job> jobs_;
  ScratchDir dir_;
  falcon::fleet::FleetService fleet_;
  falcon::FabricDependencies deps_;
  std::unique_ptr<falcon::ClusterFabric> fabric_;
  std::map<std::string, Job*> by_name_;
  std::vector<Job*> waiting_;                         // arrived, not won by any cluster
  std::vector<std::pair<Job*, std::string>> doomed_;  // losing copies not deleted yet
  std::mt19937_64 random_{20261201};
  int selections_ = 0, no_cluster_ = 0, submits_ = 0, submit_failures_ = 0, open_submits_ = 0;
  int created_ = 0, deleted_ = 0, delete_failures_ = 0;
  std::map<std::string, int> placed_on_;
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
