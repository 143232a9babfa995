// The selection policies on a workload trace (issue 15, docs/selection.md "The trace
// benchmark"): the same jobs, arriving at the same simulated instants, are placed on a fresh
// local fleet of heterogeneous clusters once per policy, and the queue waits compared.
//
// The fleet (in this process, manual clock: time moves only when the benchmark advances it):
// 9 clusters with slice-shaped TPU v4 capacity (blocks of chips, fleet_config.h `topology`),
// different sizes and block shapes, slot priorities 1 to 3, one flaky cluster (15% of its
// kubectl calls fail), one flapping cluster (down 15 min of every hour) and one slow to admit.
// The layer runs as falcon does: a ClusterFabric with probe.backend kube (each decision probes
// every candidate's Workload list and ClusterQueue over HTTPS, with credentials warmed by
// fleet-gcloud), the state store (SQLite: probe history, breakers, decisions), submits through
// fleet-xpk processes. Its clock is the fleet's simulated clock, so breaker cool-downs and
// signal windows are simulated time.
//
// Each policy run: every --tick simulated seconds, the jobs that have arrived and are not
// placed yet are offered in arrival order: a decision (`select_cluster`), then `submit_workload`
// to the chosen cluster. A job that finds no cluster, or whose submit fails, waits for the next
// tick (a type that found none is not asked again in the same tick). Policies: priority, score,
// least-wait (falcon's, from repos.yaml) and random (a uniformly random eligible candidate of
// the priority decision, seeded). Measured per policy:
//   wait            admission on the cluster (Kueue's QuotaReserved, from the fleet) - arrival:
//                   held by the federation plus queued on the cluster; mean and p95
//   makespan        the last job's end - the first arrival
//   frag_jobs       jobs that waited on fragmentation: held because a candidate was ruled out
//                   as fragmented, or queued on a cluster that had the chips free but no block
//                   large enough
//   unplaced        jobs not admitted when the run stops (--max-hours after the last arrival)
//   open_submits    submits to a cluster whose breaker was open (refusing calls) at that moment
//   submit_failures submits that failed (the flaky and flapping clusters)
// One JSON object on stdout; --chart=FILE writes an SVG bar chart of mean and p95 waits.
//
//   trace_bench --fleet-bin=DIR --trace=bench/traces/trace-v1.json [--tick=60]
//               [--policies=priority,score,least-wait,random] [--chart=FILE] [--jobs=N]
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
  std::vector<std::string> policies = {"priority", "score", "least-wait", "random"};
  std::string chart;
  std::vector<std::string> merge;  // --merge: earlier outputs to combine (no run)
  int jobs = 0;                    // 0: all of the trace
  double max_hours = 24;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "trace_bench: " << problem << "\n"
            << "usage: trace_bench --fleet-bin=DIR --trace=FILE [--tick=60] "
               "[--policies=priority,score,least-wait,random] [--chart=FILE.svg] [--jobs=N] "
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
          if (p != "priority" && p != "score" && p != "least-wait" && p != "random") {
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
  y << "selection:\n  policy: " << (policy == "random" ? "priority" : policy) << "\n"
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
  std::chrono::steady_clock::time_point steady_now() const override {
    return std::chrono::steady_clock::now();
  }
  void sleep_for(std::chrono::nanoseconds d) const override { std::this_thread::sleep_for(d); }

 private:
  falcon::fleet::SimClock& sim_;
};

struct Job {
  std::string name;
  std::int64_t arrival_s = 0;
  std::string accelerator;
  int duration_s = 0;
  std::string priority;
  int chips = 0;
  // Run state.
  std::string cluster;            // where it was submitted; empty while held
  std::int64_t reserved_ns = -1;  // admitted on the cluster
  std::int64_t finished_ns = -1;
  bool failed = false;
  bool frag = false;
};

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

json run_policy(const Options& o, const std::string& policy, std::vector<Job> jobs) {
  ScratchDir dir;
  falcon::fleet::FleetServiceOptions fo;
  fo.time_scale = 0;
  fo.require_auth = false;
  falcon::fleet::FleetService fleet(falcon::fleet::parse_fleet_config(fleet_yaml(), "trace.yaml"),
                                    fo);
  fleet.start();
  const std::string repos = (dir.path() / "repos.yaml").string();
  std::ofstream(repos) << repos_yaml(policy, dir.path(), o.fleet_bin, fleet.url());
  falcon::FabricDependencies deps;
  deps.clock = std::make_shared<FleetTime>(fleet.clock());
  falcon::ClusterFabric fabric(repos, deps);
  for (const auto& w : fabric.warm_up()) {
    if (!w.ok) throw std::runtime_error("warm-up of " + w.cluster + ": " + w.error.value_or(""));
  }
  auto store = fabric.state_store();
  const auto breaker_settings = fabric.config()->selection.breaker;
  auto& sim = fleet.simulator();
  std::mt19937_64 random(20261201);

  const std::int64_t t0 = fleet.clock().now_ns();
  const auto sim_s = [&]() { return (fleet.clock().now_ns() - t0) / 1'000'000'000; };
  const std::int64_t last_arrival = jobs.empty() ? 0 : jobs.back().arrival_s;
  const std::int64_t stop_s = last_arrival + static_cast<std::int64_t>(o.max_hours * 3600);
  int selections = 0, no_cluster = 0, submits = 0, submit_failures = 0, open_submits = 0;
  std::map<std::string, int> placed_on;
  std::map<std::string, Job*> by_name;
  for (auto& j : jobs) by_name[j.name] = &j;
  const auto wall0 = std::chrono::steady_clock::now();

  // Admissions and ends as the fleet records them.
  const auto observe = [&]() {
    const json state = sim.state();
    for (const json& c : state.at("clusters")) {
      for (const json& w : c.at("workloads")) {
        const auto it = by_name.find(w.at("name").get<std::string>());
        if (it == by_name.end()) continue;
        Job& job = *it->second;
        if (w.at("reserved_ns").get<std::int64_t>() >= 0) {
          job.reserved_ns = w.at("reserved_ns").get<std::int64_t>();
        }
        if (w.at("finished_ns").get<std::int64_t>() >= 0) {
          job.finished_ns = w.at("finished_ns").get<std::int64_t>();
          job.failed = w.at("failed").get<bool>();
        }
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
    for (auto& job : jobs) {
      if (job.cluster.empty() || job.reserved_ns >= 0) continue;
      const auto r = room.find(job.cluster);
      if (r != room.end() && r->second.first >= job.chips && r->second.second < job.chips) {
        job.frag = true;
      }
    }
  };

  std::size_t next_arrival = 0;
  std::vector<Job*> held;
  for (;;) {
    const std::int64_t now_s = sim_s();
    while (next_arrival < jobs.size() && jobs[next_arrival].arrival_s <= now_s) {
      held.push_back(&jobs[next_arrival++]);
    }
    std::set<std::string> none_for;  // types that found no cluster this tick
    std::vector<Job*> still;
    for (Job* job : held) {
      if (none_for.count(job->accelerator)) {
        still.push_back(job);
        continue;
      }
      std::string chosen;
      ++selections;
      try {
        const falcon::ClusterSelection s = fabric.select_cluster("tpu-" + job->accelerator);
        chosen = s.selected_cluster;
        if (policy == "random") {
          std::vector<std::string> eligible;
          for (const auto& c : s.scores) {
            if (c.eligible) eligible.push_back(c.cluster);
          }
          if (!eligible.empty()) chosen = eligible[random() % eligible.size()];
        }
      } catch (const falcon::NoAvailableClusterError& e) {
        ++no_cluster;
        none_for.insert(job->accelerator);
        for (const auto& c : e.scores()) {
          if (c.skip_reason.find("fragmented") != std::string::npos) job->frag = true;
        }
        still.push_back(job);
        continue;
      }
      // Was the chosen cluster's breaker refusing calls at this moment?
      const auto now = deps.clock->now();
      for (const auto& key :
           {falcon::breaker_key(chosen), falcon::breaker_key(chosen, job->accelerator)}) {
        if (const auto b = store->get_breaker(key)) {
          if (b->state == falcon::kBreakerOpen &&
              !falcon::breaker_admission(*b, breaker_settings, now).allowed) {
            ++open_submits;
            break;
          }
        }
      }
      falcon::WorkloadSpec spec;
      spec.name = job->name;
      spec.docker_image = "gcr.io/trace-bench/trainer:1";
      spec.command = {"python3", "train.py"};
      spec.accelerator_type = "tpu-" + job->accelerator;
      spec.priority = job->priority;
      spec.env = {{"FLEET_DURATION_S", std::to_string(job->duration_s)}, {"FLEET_LOG_LINES", "1"}};
      ++submits;
      try {
        fabric.submit_workload(chosen, spec);
        job->cluster = chosen;
        ++placed_on[chosen];
      } catch (const std::exception&) {
        ++submit_failures;
        still.push_back(job);
      }
    }
    held = std::move(still);
    observe();
    const bool all_done =
        next_arrival == jobs.size() && held.empty() &&
        std::all_of(jobs.begin(), jobs.end(), [](const Job& j) { return j.finished_ns >= 0; });
    if (all_done || now_s >= stop_s) break;
    fleet.clock().advance(std::chrono::seconds(o.tick_s));
    sim.advance();
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  std::vector<double> waits;
  int unplaced = 0, failed = 0, frag = 0;
  std::int64_t makespan_end = t0;
  for (const Job& j : jobs) {
    if (j.frag) ++frag;
    if (j.failed) ++failed;
    if (j.reserved_ns < 0) {
      ++unplaced;
      continue;
    }
    waits.push_back(static_cast<double>(j.reserved_ns - t0) / 1e9 -
                    static_cast<double>(j.arrival_s));
    makespan_end = std::max(makespan_end, j.finished_ns >= 0 ? j.finished_ns : j.reserved_ns);
  }
  double mean = 0;
  for (double w : waits) mean += w;
  mean = waits.empty() ? 0 : mean / static_cast<double>(waits.size());
  fleet.stop();
  return {{"policy", policy},
          {"jobs", jobs.size()},
          {"mean_wait_s", mean},
          {"p50_wait_s", percentile(waits, 0.5)},
          {"p95_wait_s", percentile(waits, 0.95)},
          {"max_wait_s", waits.empty() ? 0 : *std::max_element(waits.begin(), waits.end())},
          {"makespan_s", static_cast<double>(makespan_end - t0) / 1e9 -
                             static_cast<double>(jobs.empty() ? 0 : jobs.front().arrival_s)},
          {"frag_jobs", frag},
          {"unplaced", unplaced},
          {"failed", failed},
          {"open_submits", open_submits},
          {"submits", submits},
          {"submit_failures", submit_failures},
          {"selections", selections},
          {"no_cluster", no_cluster},
          {"placed_on", placed_on},
          {"wall_s", wall_s}};
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
      "<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\">queue wait (min)</text>\n",
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
          all, fmt::format("Queue wait on the trace ({} jobs, 9 clusters)",
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
          runs, fmt::format("Queue wait on the trace ({} jobs, 9 clusters)", jobs.size()));
    }
    std::cout << json{{"trace", o.trace}, {"tick_s", o.tick_s}, {"runs", runs}}.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "trace_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
