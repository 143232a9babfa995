// falcon cluster list | status NAME | select --accelerator TYPE | warm-up
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

#include "cli/cli.h"
#include "falcon/errors.h"

namespace falcon::cli {
namespace {

std::string accelerators_text(const ClusterConfig& c) {
  std::vector<std::string> parts;
  for (const auto& slot : c.accelerator_slots) {
    parts.push_back(
        fmt::format("{} ({}, p{})", slot.type, to_string(slot.device_class), slot.priority));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string labels_text(const ClusterConfig& c) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : c.labels) parts.push_back(k + "=" + v);
  return parts.empty() ? "-" : fmt::format("{}", fmt::join(parts, ","));
}

std::string probe_state(const ClusterProbeResult& r) {
  return r.reachable ? "reachable" : "unreachable";
}

// An error on one table line: xpk's output spans several lines, --json has it whole.
std::string one_line(const std::optional<std::string>& error) {
  if (!error || error->empty()) return "-";
  std::string out;
  bool pending_separator = false;
  for (char ch : *error) {
    if (ch == '\n' || ch == '\r') {
      pending_separator = !out.empty();
      continue;
    }
    if (pending_separator) {
      out += " | ";
      pending_separator = false;
    }
    out += ch;
  }
  constexpr std::size_t kMax = 160;
  if (out.size() > kMax) out = out.substr(0, kMax - 3) + "...";
  return out;
}

void print_probe_table(const std::vector<ClusterProbeResult>& results,
                       const std::map<std::string, int>& max_depth) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : results) {
    auto max = max_depth.find(r.cluster);
    rows.push_back({r.cluster, probe_state(r), or_dash(r.queue_depth), or_dash(r.running_count),
                    max == max_depth.end() ? "-" : std::to_string(max->second), one_line(r.error)});
  }
  print_table({"CLUSTER", "STATE", "QUEUED", "RUNNING", "MAX_QUEUE", "ERROR"}, rows);
}

// --- Client mode: GET /v1/clusters gives each cluster's configuration and breakers.
struct ClusterRow {
  ClusterConfig config;
  std::vector<BreakerReport> breakers;
};

std::vector<ClusterRow> cluster_rows(Context& ctx) {
  std::vector<ClusterRow> rows;
  if (ctx.remote()) {
    const nlohmann::json answer = ctx.api().get("/v1/clusters");
    for (const auto& c : answer.at("clusters")) {
      rows.push_back(
          {c.at("config").get<ClusterConfig>(),
           c.value("breakers", nlohmann::json::array()).get<std::vector<BreakerReport>>()});
    }
    return rows;
  }
  for (const auto& c : ctx.fabric().list_clusters()) {
    rows.push_back({c, ctx.fabric().cluster_breakers(c.name)});
  }
  return rows;
}

std::map<std::string, int> max_depths(Context& ctx) {
  std::map<std::string, int> out;
  if (ctx.remote()) {
    for (const auto& row : cluster_rows(ctx)) out[row.config.name] = row.config.max_queue_depth;
    return out;
  }
  for (const auto& c : ctx.fabric().list_clusters()) out[c.name] = c.max_queue_depth;
  return out;
}

// "1.2s", "350ms": a probe's age for people.
std::string age_text(std::int64_t ms) {
  if (ms < 1000) return fmt::format("{}ms", ms);
  return fmt::format("{:.1f}s", ms / 1000.0);
}

// Client mode: how old each candidate's probe was when the server decided, and where it came
// from (its cache, or probed for this selection because it was older than serve.max_probe_age_s).
void print_candidate_ages(const nlohmann::json& candidate_probes) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : candidate_probes) {
    rows.push_back({p.at("result").at("cluster").get<std::string>(),
                    age_text(p.value("age_ms", std::int64_t{0})),
                    p.value("from_cache", false) ? "cache" : "probed now",
                    p.value("backend", std::string("-")),
                    age_text(p.value("duration_ms", std::int64_t{0}))});
  }
  print_table({"CANDIDATE", "PROBE_AGE", "SOURCE", "BACKEND", "PROBE_TOOK"}, rows);
}

// The breakers of one cluster in a table cell: "closed" when all are closed with no failures,
// else each one that is not, by key.
std::string breakers_text(const std::vector<BreakerReport>& breakers) {
  if (breakers.empty()) return "-";  // no state store
  std::vector<std::string> parts;
  for (const auto& b : breakers) {
    if (b.summary != "closed") parts.push_back(b.key + ": " + b.summary);
  }
  return parts.empty() ? "closed" : fmt::format("{}", fmt::join(parts, "; "));
}

int run_cluster_list(Context& ctx) {
  const auto clusters = cluster_rows(ctx);
  if (ctx.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& row : clusters) {
      nlohmann::json j = row.config;
      j["breakers"] = row.breakers;
      out.push_back(std::move(j));
    }
    print_json(out);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [c, breakers] : clusters) {
    rows.push_back({c.name, c.project, c.zone, c.cluster_id, accelerators_text(c),
                    std::to_string(c.max_queue_depth), labels_text(c), breakers_text(breakers)});
  }
  print_table(
      {"NAME", "PROJECT", "ZONE", "CLUSTER_ID", "ACCELERATORS", "MAX_QUEUE", "LABELS", "BREAKER"},
      rows);
  return kExitOk;
}

struct StatusArgs {
  std::string name;
};

int run_cluster_status(Context& ctx, const StatusArgs& a) {
  ClusterProbeResult r;
  std::vector<BreakerReport> breakers;
  if (ctx.remote()) {
    // The server's probe, no older than its serve.max_probe_age_s (probed now if need be).
    const nlohmann::json answer =
        ctx.api().get("/v1/clusters/" + ApiClient::segment(a.name) +
                      ApiClient::query({{"fresh", "true"}, {"since", "1s"}, {"limit", "1"}}));
    r = answer.at("probe").at("result").get<ClusterProbeResult>();
    breakers = answer.value("breakers", nlohmann::json::array()).get<std::vector<BreakerReport>>();
  } else {
    r = ctx.fabric().get_cluster_status(a.name);
    breakers = ctx.fabric().cluster_breakers(a.name);  // after this probe fed them
  }
  if (ctx.json) {
    nlohmann::json out = r;
    out["breakers"] = breakers;
    print_json(out);
  } else {
    print_probe_table({r}, max_depths(ctx));
    std::cout << "probed at " << r.probed_at << "\n";
    for (const auto& b : breakers) std::cout << "breaker " << b.key << ": " << b.summary << "\n";
  }
  return r.reachable ? kExitOk : kExitUnreachable;
}

struct SelectArgs {
  std::string accelerator;
};

int run_cluster_select_remote(Context& ctx, const SelectArgs& a) {
  nlohmann::json answer;
  try {
    answer = ctx.api().post("/v1/select", {{"accelerator_type", a.accelerator}});
  } catch (const ApiError& e) {
    if (!ctx.json && e.type() == "NoAvailableClusterError" && e.error().contains("probe_results")) {
      const auto results = e.error()["probe_results"].get<std::vector<ClusterProbeResult>>();
      if (!results.empty()) print_probe_table(results, max_depths(ctx));
    }
    throw;
  }
  if (ctx.json) {
    print_json(answer);  // the local shape, plus candidate_probes (each probe's age and source)
    return kExitOk;
  }
  const auto s = answer.get<ClusterSelection>();
  print_probe_table(s.probe_results, max_depths(ctx));
  std::cout << s.reason << "\n";
  if (s.selection_id != 0) std::cout << "decision recorded as selection " << s.selection_id << "\n";
  print_candidate_ages(answer.value("candidate_probes", nlohmann::json::array()));
  return kExitOk;
}

int run_cluster_select(Context& ctx, const SelectArgs& a) {
  if (ctx.remote()) return run_cluster_select_remote(ctx, a);
  try {
    const ClusterSelection s = ctx.fabric().select_cluster(a.accelerator);
    if (ctx.json) {
      print_json(s);
    } else {
      print_probe_table(s.probe_results, max_depths(ctx));
      std::cout << s.reason << "\n";
      if (s.selection_id != 0)
        std::cout << "decision recorded as selection " << s.selection_id << "\n";
    }
    return kExitOk;
  } catch (const NoAvailableClusterError& e) {
    if (!ctx.json && !e.probe_results().empty()) {
      print_probe_table(e.probe_results(), max_depths(ctx));
    }
    throw;
  }
}

int run_cluster_warm_up(Context& ctx) {
  ctx.refuse_remote("cluster warm-up",
                    "it fetches credentials into this machine's kubeconfigs and the API has no "
                    "route for it; the server fetches its own when it probes. Run it without "
                    "--server (and FALCON_SERVER unset) on the machine that runs xpk");
  const auto results = ctx.fabric().warm_up();
  bool all_ok = true;
  for (const auto& r : results) all_ok = all_ok && r.ok;
  if (ctx.json) {
    print_json(results);
    return all_ok ? kExitOk : kExitUnreachable;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : results) {
    rows.push_back({r.cluster, r.ok ? "ok" : "failed",
                    fmt::format("{:.1f}s", r.elapsed.count() / 1000.0), r.error.value_or("-")});
  }
  print_table({"CLUSTER", "CREDENTIALS", "TIME", "ERROR"}, rows);
  return all_ok ? kExitOk : kExitUnreachable;
}

}  // namespace

void add_cluster_commands(CLI::App& app, Context& ctx) {
  CLI::App* cluster = app.add_subcommand("cluster", "registered clusters: list, probe, select");
  cluster->require_subcommand(1);

  bind(cluster->add_subcommand("list", "list the clusters of repos.yaml"), ctx, run_cluster_list);

  auto status_args = std::make_shared<StatusArgs>();
  CLI::App* status = cluster->add_subcommand(
      "status", "probe one cluster now (exit 0 reachable, 7 unreachable, 3 unknown)");
  status->add_option("name", status_args->name, "cluster name")->required();
  bind(status, ctx, status_args, run_cluster_status);

  auto select_args = std::make_shared<SelectArgs>();
  CLI::App* select = cluster->add_subcommand(
      "select", "choose the best cluster for an accelerator (exit 4 when none is available)");
  select->add_option("--accelerator", select_args->accelerator, "accelerator type, e.g. tpu-v4-64")
      ->required();
  bind(select, ctx, select_args, run_cluster_select);

  bind(cluster->add_subcommand(
           "warm-up", "fetch every cluster's credentials into its own kubeconfig, in parallel"),
       ctx, run_cluster_warm_up);
}

}  // namespace falcon::cli
