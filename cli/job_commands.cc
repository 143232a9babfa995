// falcon job submit | status | cancel | list | logs | export-logs
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>

#include "cli/cli.h"
#include "falcon/errors.h"
#include "falcon/gcs_uri.h"
#include "falcon/state_store.h"
#include "falcon/supervisor.h"
#include "falcon/values.h"

namespace falcon::cli {
namespace {

// The signal (SIGINT or SIGTERM) that ended a --follow, 0 while none has.
std::atomic<int> g_interrupted{0};

extern "C" void on_interrupt(int signal) { g_interrupted.store(signal); }

struct SubmitArgs {
  std::string accelerator;
  std::string cluster;
  std::string name;
  std::string image;
  std::string priority = "medium";
  std::vector<std::string> env;
  std::string namespace_;
  std::vector<std::string> xpk_args;
  std::vector<std::string> command;
  // --managed and its options (run through a server: the supervisor lives there).
  bool managed = false;
  std::optional<int> max_recoveries;
  std::string stable_after;
  bool recover_on_failure = false;
};

struct RecoveriesArgs {
  std::string workload;
};

struct JobRef {
  std::string cluster;
  std::string workload;
};

// --rank and --slice are kept as given and checked by falcon/values.h's rule (so that `-1`,
// `2147483647` and `x` all get the same message, naming the flag and the range).
struct LogArgs {
  JobRef job;
  std::string rank = "0";
  std::string slice = "0";
  std::string since;
  std::string grep;
  int tail = 0;
  bool follow = false;
};

struct ExportArgs {
  JobRef job;
  std::string dest;
  std::string ranks = "all";
  std::string slice = "0";
  std::string since;
  std::string grep;
  std::string via;  // empty: auto (not sent to a server)
  bool keep_staging = false;
};

struct ListArgs {
  std::string cluster;
  std::string state;
};

// What `job submit --json` prints: the handle, and the selection when falcon chose the cluster.
struct SubmitOutcome {
  WorkloadHandle handle;
  std::optional<ClusterSelection> selection;
};

void to_json(nlohmann::json& j, const SubmitOutcome& v) {
  j = {{"handle", v.handle},
       {"selection", v.selection ? nlohmann::json(*v.selection) : nlohmann::json(nullptr)}};
}

// What `job cancel --json` prints.
struct CancelOutcome {
  std::string workload_name;
  std::string cluster;
  bool cancelled = false;
};

void to_json(nlohmann::json& j, const CancelOutcome& v) {
  j = {{"workload_name", v.workload_name}, {"cluster", v.cluster}, {"cancelled", v.cancelled}};
}

// The names of a job reference, checked before anything runs, locally or through a server.
const JobRef& checked(const JobRef& ref) {
  check_cluster_name("--cluster", ref.cluster);
  check_workload_name("workload", ref.workload);
  return ref;
}

void add_job_ref(CLI::App* cmd, JobRef& ref) {
  cmd->add_option("--cluster", ref.cluster, "cluster name (as in repos.yaml)")->required();
  cmd->add_option("workload", ref.workload, "workload name")->required();
}

std::map<std::string, std::string> parse_env(const std::vector<std::string>& items) {
  std::map<std::string, std::string> env;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(fmt::format("--env: {} is not KEY=VALUE", quote_value(item)));
    }
    env[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return env;
}

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> ranks;
  std::size_t start = 0;
  for (;;) {
    const auto comma = text.find(',', start);
    ranks.push_back(parse_index("--ranks", text.substr(start, comma - start), kMaxRank));
    if (comma == std::string::npos) return ranks;
    start = comma + 1;
  }
}

void print_status(const WorkloadStatus& s) {
  print_table({"WORKLOAD", "STATE", "START", "END", "EXIT_CODE"},
              {{s.workload_name, s.state, or_dash(s.start_time), or_dash(s.end_time),
                or_dash(s.exit_code)}});
}

// Says on stderr which time window a log read covers when it is not obvious.
LogFilter log_filter_for(const WorkloadHandle& handle, const std::string& since,
                         const std::string& grep) {
  LogFilter filter;
  if (!since.empty()) {
    filter.since = check_since("--since", since, std::chrono::system_clock::now());
  }
  if (!grep.empty()) filter.grep = grep;
  if (!filter.since && handle.submitted_at.empty()) {
    std::cerr << fmt::format(
        "falcon: no record of submitting {} from here; reading the last 24 hours of logs (use "
        "--since to change the window)\n",
        quote_value(handle.workload_name));
  }
  return filter;
}

// A signal ended a wait (its number).
struct Interrupted {
  int signal = 0;
};

void print_export(const Context& ctx, const LogExportResult& r) {
  if (ctx.json) {
    print_json(r);
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [rank, uri] : r.gcs_uris) rows.push_back({std::to_string(rank), uri});
  print_table({"RANK", "OBJECT"}, rows);
  std::cout << fmt::format("exported {} rank{} of {} at {}\n", r.exported_ranks.size(),
                           r.exported_ranks.size() == 1 ? "" : "s", r.workload_name, r.exported_at);
}

WorkloadSpec spec_from(const SubmitArgs& a) {
  WorkloadSpec spec;
  spec.name = a.name;
  spec.docker_image = a.image;
  spec.command = a.command;
  spec.accelerator_type = a.accelerator;
  spec.priority = a.priority;
  spec.env = parse_env(a.env);
  if (!a.namespace_.empty()) spec.namespace_ = a.namespace_;
  spec.extra_args = a.xpk_args;
  return spec;
}

// The path of one workload in the API.
std::string workload_path(const JobRef& ref) {
  return "/v1/workloads/" + ApiClient::segment(ref.cluster) + "/" +
         ApiClient::segment(ref.workload);
}

// "300", "300s", "5m", "1.5h": seconds. Throws UsageError naming --stable-after.
double parse_duration_s(const std::string& flag, const std::string& text) {
  double unit = 1;
  std::string number = text;
  if (!number.empty()) {
    switch (number.back()) {
      case 's':
        number.pop_back();
        break;
      case 'm':
        unit = 60;
        number.pop_back();
        break;
      case 'h':
        unit = 3600;
        number.pop_back();
        break;
      default:
        break;
    }
  }
  double value = -1;
  std::size_t used = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size() || !(value >= 0) || value * unit > 7 * 86400.0) {
    throw UsageError(
        fmt::format("{}: {} is not a duration like 300, 90s, 5m or 1h (at most 7 days)", flag,
                    quote_value(text)));
  }
  return value * unit;
}

// The body's "managed" object, or null without --managed.
nlohmann::json managed_body(const SubmitArgs& a) {
  if (!a.managed) {
    if (a.max_recoveries || !a.stable_after.empty() || a.recover_on_failure) {
      throw UsageError(
          "--max-recoveries, --stable-after and --recover-on-failure go with --managed");
    }
    return nullptr;
  }
  nlohmann::json m = nlohmann::json::object();
  if (a.max_recoveries) m["max_recoveries"] = *a.max_recoveries;
  if (!a.stable_after.empty())
    m["stable_after_s"] = parse_duration_s("--stable-after", a.stable_after);
  if (a.recover_on_failure) m["recover_on_failure"] = true;
  return m;
}

int run_submit(Context& ctx, const SubmitArgs& a) {
  check_workload_name("--name", a.name);
  if (!a.cluster.empty()) check_cluster_name("--cluster", a.cluster);
  const WorkloadSpec spec = spec_from(a);
  const nlohmann::json managed = managed_body(a);
  if (!managed.is_null() && !ctx.remote()) {
    throw UsageError(
        "--managed needs a falcon server: the supervisor that heals managed workloads runs in "
        "`falcon serve`; pass --server URL or set FALCON_SERVER (docs/self-healing.md)");
  }
  SubmitOutcome out;
  std::string cluster = a.cluster;
  if (ctx.remote()) {
    nlohmann::json body = {{"spec", spec}};
    if (!cluster.empty()) body["cluster"] = cluster;
    if (!managed.is_null()) body["managed"] = managed;
    const nlohmann::json answer = ctx.api().post("/v1/workloads", body);
    out.handle = answer.at("handle").get<WorkloadHandle>();
    if (const auto it = answer.find("selection"); it != answer.end() && !it->is_null()) {
      out.selection = it->get<ClusterSelection>();
      if (!ctx.json) std::cerr << out.selection->reason << "\n";
    }
  } else if (cluster.empty()) {
    out.selection = ctx.fabric().select_cluster(a.accelerator);
    cluster = out.selection->selected_cluster;
    if (!ctx.json) std::cerr << out.selection->reason << "\n";
  }
  if (!ctx.remote()) {
    out.handle = ctx.fabric().submit_workload(cluster, spec);
    if (out.selection && out.selection->selection_id != 0) {
      // The submission names the decision that chose its cluster, as `falcon serve` records it.
      try {
        const auto store = ctx.fabric().state_store();
        if (auto row = store->find_submission(out.handle.cluster, out.handle.workload_name)) {
          row->selection_id = out.selection->selection_id;
          store->record_submission(*row);
        }
      } catch (const std::exception& e) {
        std::cerr << fmt::format("falcon: the submission could not be linked to selection {}: {}\n",
                                 out.selection->selection_id, e.what());
      }
    }
  }
  if (ctx.json) {
    print_json(out);
  } else {
    std::cout << fmt::format(
        "submitted {} to cluster {} (namespace {}) at {}{}\n", out.handle.workload_name,
        out.handle.cluster, out.handle.namespace_, out.handle.submitted_at,
        managed.is_null() ? "" : ", managed: the server's supervisor heals it");
  }
  return kExitOk;
}

std::string seconds_cell(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  const double s = v.get<double>();
  return s >= 100 ? fmt::format("{:.0f}s", s) : fmt::format("{:.1f}s", s);
}

std::string text_cell(const nlohmann::json& v) {
  return v.is_string() && !v.get<std::string>().empty() ? v.get<std::string>() : "-";
}

int run_recoveries(Context& ctx, const RecoveriesArgs& a) {
  const std::optional<std::string> workload =
      a.workload.empty() ? std::nullopt : std::optional(a.workload);
  nlohmann::json recoveries = nlohmann::json::array();
  if (ctx.remote()) {
    recoveries = ctx.api()
                     .get("/v1/recoveries" + ApiClient::query({{"workload", workload}}))
                     .at("recoveries");
  } else {
    const auto store = ctx.fabric().state_store();
    for (const RecoveryRecord& r : store->list_recoveries(1000, workload)) {
      recoveries.push_back(recovery_json(r));
    }
  }
  if (ctx.json) {
    print_json({{"recoveries", recoveries}});
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const nlohmann::json& r : recoveries) {
    const nlohmann::json& p = r.at("phases");
    rows.push_back({text_cell(r.at("id")), text_cell(r.at("workload")), text_cell(r.at("kind")),
                    text_cell(r.at("from_cluster")) + "->" + text_cell(r.at("to_cluster")),
                    text_cell(r.at("replacement")), seconds_cell(r.at("svrt_s")),
                    seconds_cell(p.at("detection_s")), seconds_cell(p.at("decision_s")),
                    seconds_cell(p.at("submit_s")), seconds_cell(p.at("admission_s")),
                    seconds_cell(p.at("stability_s")), text_cell(r.at("outcome")),
                    text_cell(r.at("cause"))});
  }
  print_table({"INCIDENT", "WORKLOAD", "KIND", "FROM->TO", "REPLACEMENT", "SVRT", "DETECT",
               "DECIDE", "SUBMIT", "ADMIT", "STABLE", "OUTCOME", "CAUSE"},
              rows);
  return kExitOk;
}

int run_status(Context& ctx, const JobRef& given) {
  const JobRef& ref = checked(given);
  WorkloadStatus s;
  if (ctx.remote()) {
    s = ctx.api().get(workload_path(ref)).at("status").get<WorkloadStatus>();
  } else {
    const WorkloadHandle h = ctx.fabric().handle_for(ref.cluster, ref.workload);
    s = ctx.fabric().get_workload_status(h);
  }
  if (ctx.json) {
    print_json(s);
  } else {
    print_status(s);
  }
  return kExitOk;
}

int run_cancel(Context& ctx, const JobRef& given) {
  const JobRef& ref = checked(given);
  WorkloadHandle h;
  bool cancelled = false;
  if (ctx.remote()) {
    const nlohmann::json answer = ctx.api().del(workload_path(ref));
    h = answer.at("handle").get<WorkloadHandle>();
    cancelled = answer.at("cancelled").get<bool>();
  } else {
    h = ctx.fabric().handle_for(ref.cluster, ref.workload);
    cancelled = ctx.fabric().cancel_workload(h);
  }
  const CancelOutcome out{h.workload_name, h.cluster, cancelled};
  if (ctx.json) {
    print_json(out);
  } else {
    std::cout << fmt::format("cancelled {} on cluster {}\n", h.workload_name, h.cluster);
  }
  return kExitOk;
}

// --state as given, upper-cased and checked; null when absent.
std::optional<std::string> parse_state(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::string upper = text;
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (!is_valid_state(upper)) {
    throw UsageError(
        fmt::format("--state: {} is not one of QUEUED, RUNNING, COMPLETED, FAILED, "
                    "UNKNOWN",
                    quote_value(text)));
  }
  return upper;
}

// Client mode: what the cluster's xpk lists now (GET /v1/workloads?live=true), or its error.
std::vector<WorkloadInfo> list_remote(Context& ctx, const std::string& cluster,
                                      const std::optional<std::string>& state) {
  const nlohmann::json answer =
      ctx.api().get("/v1/workloads" +
                    ApiClient::query({{"live", "true"}, {"cluster", cluster}, {"state", state}}));
  for (const auto& entry : answer.at("clusters")) {
    if (entry.value("cluster", std::string()) != cluster) continue;
    if (const auto it = entry.find("error"); it != entry.end() && !it->is_null()) {
      throw ApiError(502, *it);  // exits by its type, as the error would locally
    }
    return entry.at("workloads").get<std::vector<WorkloadInfo>>();
  }
  throw ApiError(
      502,
      {{"type", "InternalError"},
       {"message", fmt::format("{} did not answer for cluster {}", ctx.server_url(), cluster)}});
}

int run_list(Context& ctx, const ListArgs& a) {
  check_cluster_name("--cluster", a.cluster);
  const auto state = parse_state(a.state);
  const auto workloads = ctx.remote() ? list_remote(ctx, a.cluster, state)
                                      : ctx.fabric().list_workloads(a.cluster, state);
  if (ctx.json) {
    print_json(workloads);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : workloads) {
    rows.push_back({w.name, w.state, w.accelerator_type.empty() ? "-" : w.accelerator_type,
                    or_dash(w.start_time)});
  }
  print_table({"WORKLOAD", "STATE", "ACCELERATOR", "START"}, rows);
  return kExitOk;
}

// Prints log lines as they come (one JSON string a line with --json) and counts them.
class LinePrinter {
 public:
  explicit LinePrinter(bool json) : json_(json) {}
  void operator()(const std::string& line) {
    if (json_) {
      std::cout << nlohmann::json(line).dump() << "\n";
    } else {
      std::cout << line << "\n";
    }
    ++count_;
  }
  std::size_t count() const { return count_; }

 private:
  bool json_;
  std::size_t count_ = 0;
};

// A read that printed nothing says so on stderr (and exits 0: an empty window is no error), and
// what --grep is when one was given: a Cloud Logging query, where `step=99` compares a field.
void say_when_empty(const LogArgs& a, int rank, int slice, std::size_t lines) {
  if (lines > 0) return;
  std::string where = fmt::format("rank {}", rank);
  if (slice > 0) where += fmt::format(" of slice {}", slice);
  std::cerr << fmt::format("falcon: no log lines for {} of workload {} on cluster {}{}\n", where,
                           a.job.workload, a.job.cluster,
                           a.since.empty() ? "" : " since " + quote_value(a.since));
  if (!a.grep.empty()) {
    std::cerr << fmt::format(
        "falcon: --grep is a Cloud Logging query, not a regular expression; to find text in "
        "the lines, quote it as a string: --grep '\"{}\"'\n",
        printable(a.grep, 200));
  }
}

int run_logs_remote(Context& ctx, const LogArgs& a, int rank, int slice) {
  std::optional<std::string> since;
  if (!a.since.empty()) since = check_since("--since", a.since, std::chrono::system_clock::now());
  auto opt_int = [](int v) { return v > 0 ? std::optional(std::to_string(v)) : std::nullopt; };
  const std::string path =
      workload_path(a.job) + "/logs" +
      ApiClient::query({{"rank", std::to_string(rank)},
                        {"slice", opt_int(slice)},
                        {"tail", opt_int(a.tail)},
                        {"since", since},
                        {"grep", a.grep.empty() ? std::nullopt : std::optional(a.grep)},
                        {"follow", a.follow ? std::optional<std::string>("true") : std::nullopt}});
  if (a.follow) {
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
  }
  LinePrinter print(ctx.json);
  ctx.api().stream_lines(
      path,
      [&print](const std::string& line) {
        print(line);
        std::cout.flush();
      },
      [] { return g_interrupted.load() != 0; });
  if (const int signal = g_interrupted.load(); signal != 0) return 128 + signal;
  say_when_empty(a, rank, slice, print.count());
  return kExitOk;
}

int run_logs_local(Context& ctx, const LogArgs& a, int rank, int slice) {
  ClusterFabric& fabric = ctx.fabric();
  const WorkloadHandle h = fabric.handle_for(a.job.cluster, a.job.workload);
  LogFilter filter = log_filter_for(h, a.since, a.grep);
  if (a.tail > 0) filter.tail_lines = a.tail;
  LinePrinter print(ctx.json);
  if (!a.follow) {
    for (const std::string& line : fabric.stream_pod_log(h, rank, filter, slice)) print(line);
    std::cout.flush();
    say_when_empty(a, rank, slice, print.count());
    return kExitOk;
  }
  // --follow: poll for new lines; stop on Ctrl-C, or shortly after the workload finishes.
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  FollowOptions options;
  fabric.follow_pod_log_until_finished(
      h, rank, filter, slice, options, [] { return g_interrupted.load() != 0; },
      [&](const std::string& line) {
        print(line);
        std::cout.flush();
      });
  // Ended by a signal: exit as a shell reports a process that signal killed (130, 143).
  if (const int signal = g_interrupted.load(); signal != 0) return 128 + signal;
  say_when_empty(a, rank, slice, print.count());
  return kExitOk;
}

int run_logs(Context& ctx, const LogArgs& a) {
  checked(a.job);
  const int rank = parse_index("--rank", a.rank, kMaxRank);
  const int slice = parse_index("--slice", a.slice, kMaxSlice);
  // Cloud Logging refuses a filter it cannot parse with 400 and a position in the whole filter,
  // which the user never sees: say that --grep's expression is the part they wrote.
  const auto grep_hint = [&a] {
    std::cerr << fmt::format(
        "falcon: the filter Cloud Logging refused includes --grep {} (a Cloud Logging query: "
        "field=value, \"text\", AND, OR, NOT); the position above counts lines of the whole "
        "filter, where --grep's expression is on a line of its own\n",
        quote_value(a.grep));
  };
  try {
    return ctx.remote() ? run_logs_remote(ctx, a, rank, slice)
                        : run_logs_local(ctx, a, rank, slice);
  } catch (const LogRetrievalError& e) {
    if (!a.grep.empty() && e.http_status() == 400) grep_hint();
    throw;
  } catch (const ApiError& e) {
    if (!a.grep.empty() && e.type() == "LogRetrievalError" &&
        e.error().value("http_status", 0) == 400) {
      grep_hint();
    }
    throw;
  }
}

// Client mode: POST /v1/exports starts it on the server; its progress is polled until it ends.
LogExportResult export_remote(Context& ctx, const ExportArgs& a, int slice) {
  nlohmann::json body = {
      {"cluster", a.job.cluster}, {"workload", a.job.workload}, {"dest", a.dest}, {"slice", slice}};
  if (a.ranks != "all") body["ranks"] = parse_ranks(a.ranks);
  if (!a.since.empty()) {
    body["since"] = check_since("--since", a.since, std::chrono::system_clock::now());
  }
  if (!a.grep.empty()) body["grep"] = a.grep;
  // The path choice, when one was asked for: a server that does not know these fields yet
  // ignores them (and exports by reading).
  if (!a.via.empty()) body["via"] = a.via;
  if (a.keep_staging) body["keep_staging"] = true;
  const nlohmann::json started = ctx.api().post("/v1/exports", body);
  const std::int64_t id = started.at("id").get<std::int64_t>();
  const std::string path = "/v1/exports/" + std::to_string(id);
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  std::map<std::string, nlohmann::json> shown;  // progress per rank, as last printed
  std::string said;                             // the step, as last printed
  for (;;) {
    const nlohmann::json e = ctx.api().get(path);
    // The export's step (queued, the path chosen and why, a copy's state and progress): one
    // line each time it changes, as a local export prints it.
    std::string step;
    if (e.value("state", "") == "queued" && e.contains("queue_position")) {
      step = fmt::format("export {}: queued behind the server's running exports (place {})", id,
                         e["queue_position"].dump());
    } else if (e.contains("status") && e["status"].is_object()) {
      const nlohmann::json& s = e["status"];
      step = s.value("message", "");
      if (s.contains("percent")) step += fmt::format(" ({}%)", s["percent"].get<int>());
    }
    if (!step.empty() && step != said) {
      std::cerr << "falcon: " << step << "\n";
      said = step;
    }
    if (tty && e.contains("progress") && e["progress"].is_object()) {
      for (const auto& [rank, p] : e["progress"].items()) {
        if (shown[rank] == p) continue;
        shown[rank] = p;
        std::cerr << fmt::format("\rrank {}: {} lines, {:.1f} MiB{}", rank,
                                 p.value("lines", std::int64_t{0}),
                                 static_cast<double>(p.value("bytes", std::int64_t{0})) / 1048576.0,
                                 p.value("done", false) ? " done\n" : "");
      }
    }
    const std::string state = e.at("state").get<std::string>();
    if (state == "done") return e.at("result").get<LogExportResult>();
    if (state != "running" && state != "queued") {
      nlohmann::json error = e.at("result").value("error", nlohmann::json::object());
      if (!error.contains("message")) {
        error = {{"type", "InternalError"},
                 {"message", fmt::format("export {} ended {}", id, state)}};
      }
      // "Stopped": the server stopped before the export finished (503: unreachable).
      throw ApiError(error.value("type", std::string()) == "Stopped" ? 503 : 0, error);
    }
    if (const int signal = g_interrupted.load(); signal != 0) {
      std::cerr << fmt::format("falcon: export {} goes on in the server; its progress: GET {}{}\n",
                               id, ctx.api().url(), path);
      throw Interrupted{signal};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

int run_export_logs(Context& ctx, const ExportArgs& a) {
  checked(a.job);
  const int slice = parse_index("--slice", a.slice, kMaxSlice);
  try {
    (void)parse_gcs_uri(a.dest);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--dest: {}", e.what()));
  }
  if (ctx.remote()) {
    LogExportResult r;
    try {
      r = export_remote(ctx, a, slice);
    } catch (const Interrupted& i) {
      return 128 + i.signal;
    }
    print_export(ctx, r);
    return kExitOk;
  }
  ExportOptions how;
  if (!a.via.empty()) {
    const std::optional<ExportVia> via = parse_export_via(a.via);
    if (!via) {
      throw UsageError(
          fmt::format("--via: {} is not auto, read, copy or sink", quote_value(a.via)));
    }
    how.via = *via;
  }
  how.keep_staging = a.keep_staging;
  ClusterFabric& fabric = ctx.fabric();
  const WorkloadHandle h = fabric.handle_for(a.job.cluster, a.job.workload);
  LogFilter filter = log_filter_for(h, a.since, a.grep);
  if (a.ranks != "all") filter.ranks = parse_ranks(a.ranks);
  const bool tty = isatty(STDERR_FILENO) != 0;
  // Ctrl-C or SIGTERM stops the export: a copy operation is cancelled, staged objects deleted.
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  how.cancelled = [] { return g_interrupted.load() != 0; };
  std::string last_state;
  int last_decile = -1;
  how.on_status = [&](const ExportStatus& s) {
    switch (s.phase) {
      case ExportStatus::Phase::kCopying: {
        // A terminal rewrites one line; a log gets a line per state change and per 10%.
        if (tty) {
          std::cerr << fmt::format("\rcopy {}: {} {}%   ", s.operation, s.state, s.percent);
          if (s.state == "SUCCEEDED" || s.state == "FAILED" || s.state == "CANCELLED") {
            std::cerr << "\n";
          }
        } else if (s.state != last_state || s.percent / 10 != last_decile) {
          std::cerr << fmt::format("falcon: copy {}: {} {}%\n", s.operation, s.state, s.percent);
        }
        last_state = s.state;
        last_decile = s.percent / 10;
        break;
      }
      case ExportStatus::Phase::kSplitting:
        if (!s.message.empty()) {
          std::cerr << "falcon: " << s.message << "\n";
        } else if (tty) {
          std::cerr << fmt::format("\rsplitting: {} of {} objects, {} lines   ", s.objects,
                                   s.objects_total, s.lines)
                    << (s.objects == s.objects_total ? "\n" : "");
        }
        break;
      default:
        if (!s.message.empty()) std::cerr << "falcon: " << s.message << "\n";
        break;
    }
  };
  LogExportResult r;
  try {
    r = fabric.export_pod_logs(h, filter, a.dest, slice, how, [tty](const ExportProgress& p) {
      if (!tty) return;
      std::cerr << fmt::format("\rrank {}: {} lines, {:.1f} MiB{}", p.rank, p.lines,
                               p.bytes / 1048576.0, p.done ? " done\n" : "");
    });
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--ranks: {}", e.what()));
  } catch (const LogRetrievalError& e) {
    // Ended by a signal: exit as a shell reports a process that signal killed (130, 143).
    if (const int signal = g_interrupted.load(); signal != 0 && e.status() == "CANCELLED") {
      std::cerr << "falcon: " << e.what() << "\n";
      return 128 + signal;
    }
    throw;
  }
  print_export(ctx, r);
  return kExitOk;
}

void add_submit(CLI::App* job, Context& ctx) {
  auto a = std::make_shared<SubmitArgs>();
  CLI::App* cmd = job->add_subcommand(
      "submit",
      "submit a workload through xpk; selects a cluster first when --cluster is absent.\n"
      "  falcon job submit --accelerator tpu-v4-64 --name bench-1 --image IMG -- python3 "
      "train.py");
  cmd->add_option("--accelerator", a->accelerator, "accelerator type")->required();
  cmd->add_option("--cluster", a->cluster, "cluster (default: select the best)");
  cmd->add_option("--name", a->name, "workload name ([a-z][-a-z0-9]*, <= 40)")->required();
  cmd->add_option("--image", a->image, "docker image")->required();
  cmd->add_option("--priority", a->priority, "very-low | low | medium | high | very-high");
  cmd->add_option("--env", a->env, "KEY=VALUE, repeatable")->allow_extra_args(false);
  cmd->add_option("--namespace", a->namespace_,
                  "namespace (default: the cluster's default_namespace)");
  cmd->add_option("--xpk-arg", a->xpk_args,
                  "extra argument passed verbatim to xpk workload create, repeatable")
      ->allow_extra_args(false);
  cmd->add_option("command", a->command, "the command to run, after --")->required();
  cmd->add_flag("--managed", a->managed,
                "hand the workload to the server's supervisor, which recovers it on another "
                "cluster when the platform loses it (needs --server; docs/self-healing.md)");
  cmd->add_option("--max-recoveries", a->max_recoveries,
                  "with --managed: recoveries allowed (default supervisor.max_recoveries, 3)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--stable-after", a->stable_after,
                  "with --managed: a replacement RUNNING this long is recovered (300, 90s, 5m; "
                  "default supervisor.stable_after_s, 5m)");
  cmd->add_flag("--recover-on-failure", a->recover_on_failure,
                "with --managed: recover the workload's own failures (non-zero exit) too");
  bind(cmd, ctx, a, run_submit);
}

void add_recoveries(CLI::App* job, Context& ctx) {
  auto a = std::make_shared<RecoveriesArgs>();
  CLI::App* cmd = job->add_subcommand(
      "recoveries",
      "recovery incidents of managed workloads, newest first: kind, clusters, replacement, SVRT "
      "and its phases (detection, decision, submit, admission, stability), outcome");
  cmd->add_option("workload", a->workload, "a managed workload's name (default: all)");
  bind(cmd, ctx, a, run_recoveries);
}

void add_list(CLI::App* job, Context& ctx) {
  auto a = std::make_shared<ListArgs>();
  CLI::App* cmd = job->add_subcommand("list", "workloads of one cluster");
  cmd->add_option("--cluster", a->cluster, "cluster name")->required();
  cmd->add_option("--state", a->state, "QUEUED | RUNNING | COMPLETED | FAILED | UNKNOWN");
  bind(cmd, ctx, a, run_list);
}

void add_logs(CLI::App* job, Context& ctx) {
  auto a = std::make_shared<LogArgs>();
  CLI::App* cmd = job->add_subcommand("logs", "print one rank's log lines (rank 0 by default)");
  add_job_ref(cmd, a->job);
  cmd->add_option("--rank", a->rank,
                  fmt::format("worker index within the slice (0 to {})", kMaxRank))
      ->type_name("INT");
  cmd->add_option("--slice", a->slice,
                  fmt::format("slice index, multi-slice workloads (0 to {})", kMaxSlice))
      ->type_name("INT");
  cmd->add_option("--since", a->since, "RFC 3339 time, or an age like 30m, 6h, 2d");
  cmd->add_option("--grep", a->grep,
                  "Cloud Logging query expression, applied on the server (e.g. step_time)");
  cmd->add_option("--tail", a->tail, fmt::format("only the last N lines (1 to {})", kMaxTailLines))
      ->check(CLI::Range(1, kMaxTailLines));
  cmd->add_flag("--follow", a->follow,
                "keep printing new lines until the workload finishes (Ctrl-C to stop)");
  bind(cmd, ctx, a, run_logs);
}

void add_export_logs(CLI::App* job, Context& ctx) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = job->add_subcommand("export-logs",
                                      "archive ranks' logs to Cloud Storage: <dest>/rank-N.log and "
                                      "<dest>/collection_meta.json");
  add_job_ref(cmd, a->job);
  cmd->add_option("--dest", a->dest, "gs://BUCKET/PATH/")->required();
  cmd->add_option("--ranks", a->ranks, "all (default) or a list like 0,1");
  cmd->add_option("--slice", a->slice,
                  fmt::format("slice index, multi-slice workloads (0 to {})", kMaxSlice))
      ->type_name("INT");
  cmd->add_option("--since", a->since, "RFC 3339 time, or an age like 6h");
  cmd->add_option("--grep", a->grep, "Cloud Logging query expression");
  cmd->add_option("--via", a->via,
                  "auto (default) | read | copy | sink: entries:list under the read quota, an "
                  "entries:copy operation (gcp.log_copy_staging), or the sink archive "
                  "(gcp.log_archive); auto takes the sink when it covers the window, else copy "
                  "when gcp.log_copy allows it, else read, and says why (docs/log-export.md)");
  cmd->add_flag("--keep-staging", a->keep_staging,
                "with copy: keep the staged objects (their prefix is in collection_meta.json)");
  bind(cmd, ctx, a, run_export_logs);
}

// `job status` and `job cancel`: a cluster and a workload name.
void add_job_ref_command(CLI::App* job, Context& ctx, const std::string& name,
                         const std::string& description, int (*handler)(Context&, const JobRef&)) {
  auto ref = std::make_shared<JobRef>();
  CLI::App* cmd = job->add_subcommand(name, description);
  add_job_ref(cmd, *ref);
  bind(cmd, ctx, ref, handler);
}

}  // namespace

void add_job_commands(CLI::App& app, Context& ctx) {
  CLI::App* job = app.add_subcommand(
      "job", "xpk workloads: submit, status, cancel, list, logs, export-logs, recoveries");
  job->require_subcommand(1);
  add_submit(job, ctx);
  add_job_ref_command(job, ctx, "status", "state of one workload", run_status);
  add_job_ref_command(job, ctx, "cancel", "delete a workload (xpk workload delete)", run_cancel);
  add_list(job, ctx);
  add_logs(job, ctx);
  add_export_logs(job, ctx);
  add_recoveries(job, ctx);
}

}  // namespace falcon::cli
