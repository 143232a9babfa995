// falcon cluster list | status NAME | select --accelerator TYPE | warm-up
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/cli.h"
#include "falcon/errors.h"
#include "falcon/scoring.h"

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

// The probes' table. With a decision's `scores`, the last column is each cluster's verdict (why
// it was chosen or skipped: a full queue, an open breaker), or its probe error.
void print_probe_table(const std::vector<ClusterProbeResult>& results,
                       const std::map<std::string, int>& max_depth,
                       const std::vector<CandidateScore>* scores = nullptr) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : results) {
    auto max = max_depth.find(r.cluster);
    std::string last = one_line(r.error);
    if (scores != nullptr && (!r.error || r.error->empty())) {
      for (const CandidateScore& c : *scores) {
        if (c.cluster == r.cluster && !c.verdict.empty()) last = c.verdict;
      }
    }
    rows.push_back({r.cluster, probe_state(r), or_dash(r.queue_depth), or_dash(r.running_count),
                    max == max_depth.end() ? "-" : std::to_string(max->second), last});
  }
  print_table({"CLUSTER", "STATE", "QUEUED", "RUNNING", "MAX_QUEUE",
               scores != nullptr ? "VERDICT" : "ERROR"},
              rows);
}

// Each cluster's queue bound, for the probe tables.
std::map<std::string, int> max_depths(Context& ctx) {
  std::map<std::string, int> out;
  for (const auto& entry : ctx.client().list_clusters()) {
    out[entry.config.name] = entry.config.max_queue_depth;
  }
  return out;
}

// "1.2s", "350ms": a probe's age for people.
std::string age_text(std::int64_t ms) {
  if (ms < 1000) return fmt::format("{}ms", ms);
  return fmt::format("{:.1f}s", ms / 1000.0);
}

// Through a server: how old each candidate's probe was when the server decided, and where it
// came from (its cache, or probed for this selection because it was older than
// serve.max_probe_age_s).
void print_candidate_ages(const std::vector<MonitoredProbe>& candidate_probes) {
  if (candidate_probes.empty()) return;  // in-process: every candidate was probed now
  std::vector<std::vector<std::string>> rows;
  for (const MonitoredProbe& p : candidate_probes) {
    rows.push_back({p.result.cluster, age_text(p.age_ms), p.from_cache ? "cache" : "probed now",
                    p.backend.empty() ? "-" : p.backend, age_text(p.duration_ms)});
  }
  print_table({"CANDIDATE", "PROBE_AGE", "SOURCE", "BACKEND", "PROBE_TOOK"}, rows);
}

// A server's brief decision: each candidate's probe state, age and source (the probes
// themselves and the scores are in its explanation: --explain, or --replay-selection ID).
void print_brief(const Decision& d) {
  std::vector<std::vector<std::string>> rows;
  for (const MonitoredProbe& p : d.candidate_probes) {
    rows.push_back({p.result.cluster, p.result.reachable ? "ok" : "unreachable", age_text(p.age_ms),
                    p.from_cache ? "cache" : "probed now"});
  }
  // A candidate a circuit breaker kept out has no probe: it shows with why.
  for (const auto& [cluster, why] : d.skipped) {
    const bool probed =
        std::any_of(d.candidate_probes.begin(), d.candidate_probes.end(),
                    [&](const MonitoredProbe& p) { return p.result.cluster == cluster; });
    if (!probed) rows.push_back({cluster, why, "-", "-"});
  }
  print_table({"CANDIDATE", "STATE", "PROBE_AGE", "SOURCE"}, rows);
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
  const auto clusters = ctx.client().list_clusters();
  if (ctx.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& entry : clusters) {
      nlohmann::json j = entry.config;
      j["breakers"] = entry.breakers;
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
  check_cluster_name("cluster", a.name);
  const auto [r, breakers] = ctx.client().cluster_health(a.name);
  if (ctx.json) {
    nlohmann::json out = r;
    out["breakers"] = breakers;
    print_json(out);
  } else {
    print_probe_table({r}, max_depths(ctx));
    std::cout << "probed at " << r.probed_at << "\n";
    if (r.capacity_error) std::cout << "capacity not known: " << one_line(r.capacity_error) << "\n";
    for (const auto& b : breakers) std::cout << "breaker " << b.key << ": " << b.summary << "\n";
  }
  return r.reachable ? kExitOk : kExitUnreachable;
}

struct SelectArgs {
  std::string accelerator;
  bool explain = false;
  std::string replay;          // a file of recorded selections ("-": stdin)
  std::int64_t replay_id = 0;  // a selection in the state store
  std::string policy;          // replay under this policy
};

std::string fixed(double v, int digits = 3) { return fmt::format("{:.{}f}", v, digits); }

// A term's value in its unit, for the explain table.
std::string term_value(const SignalTerm& t, const CandidateScore& c) {
  if (!t.value) return "-";
  const double v = *t.value;
  if (t.signal == "queue") return fmt::format("{:.0f} (max {})", v, c.max_queue_depth);
  if (t.signal == "wait" || t.signal == "recent_wait" || t.signal == "admission_delay") {
    return fmt::format("{:.0f}s", v);
  }
  if (t.signal == "latency") return fmt::format("{:.0f}ms", v);
  if (t.signal == "drain_per_min") return fmt::format("{:.2f}/min", v);
  if (t.signal == "health") return fmt::format("{:.2f} (n={})", v, c.signals.health_samples);
  if (t.signal == "capacity") {
    return c.signals.nominal_chips ? fmt::format("{:g}/{:g} free", v, *c.signals.nominal_chips)
                                   : fmt::format("{:g} free", v);
  }
  if (t.signal == "fragmentation") return fmt::format("{:.2f}", v);
  if (t.signal == "largest_free_block" || t.signal == "slice_chips") {
    return fmt::format("{:g} chips", v);
  }
  return fmt::format("{:g}", v);
}

std::string policy_formula(const std::string& policy) {
  if (policy == "score") {
    return "score = sum(weight x normalized signal) / sum(weights) x fragmentation weight; "
           "highest wins";
  }
  if (policy == "least-wait") {
    return "predicted wait = (queue_depth + 1) / drain rate (0 with an empty queue); least wins";
  }
  return "lowest slot priority wins; ties: smaller queue_depth, then file order";
}

// The --explain table: every candidate, each signal with its weight and contribution, and
// why it won, lost or was skipped; then each probe that could not read its cluster's capacity,
// and why (its free chips and blocks are not known, so the fit rule did not count them).
void print_explain(const std::string& policy, const std::vector<CandidateScore>& scores,
                   const std::vector<ClusterProbeResult>& probes) {
  std::cout << "policy " << (policy.empty() ? "priority" : policy) << ": " << policy_formula(policy)
            << "\n";
  std::vector<std::vector<std::string>> rows;
  std::set<std::string> uncounted;  // signals the policy shows but does not count: left out
  for (const CandidateScore& c : scores) {
    const std::string rank = c.rank > 0 ? std::to_string(c.rank) : "-";
    if (!c.eligible) {
      rows.push_back({c.cluster, rank, "-", "-", "-", "-", "-", c.verdict});
      continue;
    }
    bool first = true;
    for (const SignalTerm& t : c.terms) {
      const bool counted = t.weight != 0 || t.normalized;
      if (!counted) {
        uncounted.insert(t.signal);
        continue;
      }
      rows.push_back({first ? c.cluster : "", first ? rank : "", t.signal, term_value(t, c),
                      t.normalized ? fixed(*t.normalized) : "-", fmt::format("{:g}", t.weight),
                      policy != "priority" ? fixed(t.contribution) : "-", ""});
      first = false;
    }
    std::string total = "-";
    if (c.total)
      total = policy == "least-wait" ? fmt::format("{:.0f}s", *c.total) : fixed(*c.total);
    rows.push_back(
        {first ? c.cluster : "", first ? rank : "", "total", "", "", "", total, c.verdict});
  }
  print_table(
      {"CLUSTER", "RANK", "SIGNAL", "VALUE", "NORMALIZED", "WEIGHT", "CONTRIBUTION", "VERDICT"},
      rows);
  if (!uncounted.empty()) {
    std::cout << fmt::format("not counted by this policy, not shown (--json has them): {}\n",
                             fmt::join(uncounted, ", "));
  }
  for (const ClusterProbeResult& p : probes) {
    if (p.capacity_error) {
      std::cout << fmt::format("capacity of {} not known: {}\n", p.cluster,
                               one_line(p.capacity_error));
    }
  }
}

// Selections from a file: one selection (cluster select --json, GET /v1/selections/ID, POST
// /v1/select), a list of them, or {"selections": [...]} (GET /v1/selections). Read as a stream:
// each selection of a list is converted as soon as it is parsed and its JSON dropped, so memory
// follows the selections rather than the file's document, and nesting deeper than any recorded
// selection has is refused before it is built.
constexpr int kMaxReplayDepth = 32;

std::vector<ClusterSelection> read_recorded(const std::string& path) {
  using nlohmann::json;
  using Event = json::parse_event_t;
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) throw UsageError(fmt::format("--replay: cannot read '{}'", path));
    in = &file;
  }
  std::vector<ClusterSelection> out;
  const auto take = [&](const json& j) {
    try {
      out.push_back(j.get<ClusterSelection>());
    } catch (const json::exception& e) {
      throw UsageError(fmt::format(
          "--replay: '{}': selection {} is not a recorded selection (the JSON of cluster select "
          "--json or GET /v1/selections/ID): {}",
          path, out.size(), e.what()));
    }
  };
  // Where the parser is: the top value an array (its elements are at depth 1), or an object whose
  // "selections" array is open (its elements are at depth 2).
  bool top_is_array = false;
  std::string top_key;
  bool in_selections = false;
  const json::parser_callback_t each = [&](int depth, Event event, json& parsed) {
    if (event == Event::object_start || event == Event::array_start) {
      if (depth >= kMaxReplayDepth) {
        throw UsageError(
            fmt::format("--replay: '{}' nests deeper than {} levels", path, kMaxReplayDepth));
      }
      if (depth == 0) top_is_array = event == Event::array_start;
      if (depth == 1 && !top_is_array && event == Event::array_start) {
        in_selections = top_key == "selections";
      }
      return true;
    }
    if (event == Event::key && depth == 1) {
      top_key = parsed.get<std::string>();
      return true;
    }
    const bool element = (top_is_array && depth == 1) || (in_selections && depth == 2);
    if (element) {
      take(parsed);
      return false;  // converted: dropped from the document
    }
    if (event == Event::array_end && depth == 1) in_selections = false;
    return true;
  };
  json top;
  try {
    top = json::parse(*in, each);
  } catch (const json::parse_error& e) {
    throw UsageError(fmt::format("--replay: '{}' is not JSON: {}", path, e.what()));
  }
  if (!top_is_array) {
    const auto list = top.is_object() ? top.find("selections") : top.end();
    if (list == top.end()) {
      take(top);  // one selection
    } else if (!list->is_array()) {
      take(*list);
    }
  }
  if (out.empty()) throw UsageError(fmt::format("--replay: '{}' holds no selection", path));
  return out;
}

int run_cluster_replay(Context& ctx, const SelectArgs& a) {
  std::vector<ClusterSelection> recorded;
  if (!a.replay.empty()) {
    recorded = read_recorded(a.replay);
  } else {
    recorded.push_back(ctx.client().recorded_selection(a.replay_id));
  }
  // Weights, signal settings and the configured policies come from the configuration.
  SelectionSettings settings;
  try {
    settings = ctx.fabric().config()->selection;
  } catch (const ClusterConfigError&) {
    if (a.policy.empty()) throw;  // without --policy the configuration names the policy
    std::cerr << "note: no configuration could be read; replaying with the default weights\n";
  }
  std::optional<SelectionPolicy> forced;
  if (!a.policy.empty()) forced = parse_selection_policy(a.policy);
  const auto now = std::chrono::system_clock::now();
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows;
  int changed = 0;
  for (const ClusterSelection& r : recorded) {
    const SelectionPolicy policy = forced.value_or(settings.policy_for(r.accelerator));
    ClusterSelection replayed;
    try {
      replayed = replay_selection(r, policy, settings, now);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--replay: {}", e.what()));
    }
    const bool differs = replayed.selected_cluster != r.selected_cluster;
    changed += differs ? 1 : 0;
    out.push_back({{"recorded",
                    {{"selection_id", r.selection_id},
                     {"selected_cluster", r.selected_cluster},
                     {"policy", r.policy},
                     {"decided_at", r.decided_at}}},
                   {"replayed", replayed},
                   {"changed", differs}});
    rows.push_back({r.selection_id ? std::to_string(r.selection_id) : "-", r.accelerator,
                    r.decided_at, r.selected_cluster.empty() ? "(none)" : r.selected_cluster,
                    r.policy.empty() ? "-" : r.policy,
                    replayed.selected_cluster.empty() ? "(none)" : replayed.selected_cluster,
                    replayed.policy, differs ? "yes" : "no"});
  }
  if (ctx.json) {
    print_json(recorded.size() == 1 ? out[0] : out);
    return kExitOk;
  }
  if (recorded.size() == 1) {
    const auto& replayed = out[0]["replayed"].get<ClusterSelection>();
    print_explain(replayed.policy, replayed.scores, replayed.probe_results);
    std::cout << "recorded: " << (rows[0][3]) << " (policy " << rows[0][4] << ", " << rows[0][2]
              << ")\n";
    std::cout << "replayed: " << replayed.reason << "\n";
    return kExitOk;
  }
  print_table({"SELECTION", "ACCELERATOR", "DECIDED_AT", "RECORDED", "POLICY", "REPLAYED",
               "REPLAY_POLICY", "CHANGED"},
              rows);
  std::cout << changed << " of " << recorded.size() << " decisions change\n";
  return kExitOk;
}

int run_cluster_select(Context& ctx, const SelectArgs& a) {
  if (!a.replay.empty() || a.replay_id != 0) return run_cluster_replay(ctx, a);
  if (a.accelerator.empty()) {
    throw UsageError("--accelerator is required (or --replay FILE / --replay-selection ID)");
  }
  SelectRequest request{.accelerator_type = a.accelerator, .explain = a.explain};
  if (!a.policy.empty()) request.policy = parse_selection_policy(a.policy);
  Decision d;
  try {
    d = ctx.client().select(request);
  } catch (const NoAvailableClusterError& e) {
    if (!ctx.json && a.explain && !e.scores().empty()) {
      print_explain(e.policy(), e.scores(), e.probe_results());
    } else if (!ctx.json && !e.probe_results().empty()) {
      print_probe_table(e.probe_results(), max_depths(ctx), &e.scores());
    }
    throw;
  }
  if (ctx.json) {
    print_json(d);
    return kExitOk;
  }
  const ClusterSelection& s = d.selection;
  if (d.brief) {
    print_brief(d);
  } else if (a.explain) {
    print_explain(s.policy, s.scores, s.probe_results);
  } else {
    print_probe_table(s.probe_results, max_depths(ctx), &s.scores);
  }
  std::cout << s.reason << "\n";
  if (s.selection_id != 0) std::cout << "decision recorded as selection " << s.selection_id << "\n";
  // Locally the fabric has said so on stderr already.
  if (ctx.remote() && !s.not_recorded.empty()) {
    std::cerr << "falcon: the server could not record this decision: " << s.not_recorded << "\n";
  }
  if (d.same_as != 0 && d.same_as != s.selection_id) {
    std::cout << "the same as selection " << d.same_as << ": nothing it depended on has changed\n";
  }
  if (!d.brief) print_candidate_ages(d.candidate_probes);
  return kExitOk;
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
  status->add_option("cluster", status_args->name, "cluster name")->required();
  bind(status, ctx, status_args, run_cluster_status);

  auto select_args = std::make_shared<SelectArgs>();
  CLI::App* select = cluster->add_subcommand(
      "select", "choose the best cluster for an accelerator (exit 4 when none is available)");
  select->add_option("--accelerator", select_args->accelerator,
                     "accelerator type, e.g. tpu-v4-64 (required unless replaying)");
  select->add_flag("--explain", select_args->explain,
                   "print every candidate's signals, weights, contributions and verdict");
  auto* replay = select->add_option(
      "--replay", select_args->replay,
      "decide again, without probing, on recorded selections: a file of cluster select --json "
      "or GET /v1/selections[/ID] output (- reads stdin)");
  auto* replay_id = select->add_option("--replay-selection", select_args->replay_id,
                                       "decide again on selection ID of the state store");
  replay->excludes(replay_id);
  select
      ->add_option("--policy", select_args->policy,
                   "decide under this policy instead of the configured one (live, or with "
                   "--replay)")
      ->check(CLI::IsMember({"priority", "score", "least-wait"}));
  bind(select, ctx, select_args, run_cluster_select);

  bind(cluster->add_subcommand(
           "warm-up", "fetch every cluster's credentials into its own kubeconfig, in parallel"),
       ctx, run_cluster_warm_up);
}

}  // namespace falcon::cli
