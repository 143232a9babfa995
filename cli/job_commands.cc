// falcon job submit | status | cancel | list | logs | export-logs
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "cli/cli.h"
#include "falcon/errors.h"
#include "falcon/gcs_uri.h"
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

// --managed's options, or null without --managed.
std::optional<ManagedOptions> managed_options(const SubmitArgs& a) {
  if (!a.managed) {
    if (a.max_recoveries || !a.stable_after.empty() || a.recover_on_failure) {
      throw UsageError(
          "--max-recoveries, --stable-after and --recover-on-failure go with --managed");
    }
    return std::nullopt;
  }
  ManagedOptions m;
  m.max_recoveries = a.max_recoveries;
  if (!a.stable_after.empty())
    m.stable_after_s = parse_duration_s("--stable-after", a.stable_after);
  m.recover_on_failure = a.recover_on_failure;
  return m;
}

int run_submit(Context& ctx, const SubmitArgs& a) {
  check_workload_name("--name", a.name);
  if (!a.cluster.empty()) check_cluster_name("--cluster", a.cluster);
  const SubmitRequest request{
      .spec = spec_from(a), .cluster = a.cluster, .managed = managed_options(a)};
  const Submission out = ctx.client().submit(request);
  if (ctx.json) {
    print_json(out);
    return kExitOk;
  }
  if (out.selection) std::cerr << out.selection->reason << "\n";
  std::cout << fmt::format("submitted {} to cluster {} (namespace {}) at {}{}\n",
                           out.handle.workload_name, out.handle.cluster, out.handle.namespace_,
                           out.handle.submitted_at,
                           request.managed ? ", managed: the server's supervisor heals it" : "");
  return kExitOk;
}

std::string seconds_cell(const std::optional<double>& s) {
  if (!s) return "-";
  return *s >= 100 ? fmt::format("{:.0f}s", *s) : fmt::format("{:.1f}s", *s);
}

std::string text_cell(const std::string& v) { return v.empty() ? "-" : v; }
std::string text_cell(const std::optional<std::string>& v) { return text_cell(v.value_or("")); }

int run_recoveries(Context& ctx, const RecoveriesArgs& a) {
  const auto recoveries =
      ctx.client().recoveries(a.workload.empty() ? std::nullopt : std::optional(a.workload));
  if (ctx.json) {
    print_json({{"recoveries", recoveries}});
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const Recovery& r : recoveries) {
    rows.push_back({text_cell(r.id), text_cell(r.workload), text_cell(r.kind),
                    text_cell(r.from_cluster) + "->" + text_cell(r.to_cluster),
                    text_cell(r.replacement), seconds_cell(r.svrt_s), seconds_cell(r.detection_s),
                    seconds_cell(r.decision_s), seconds_cell(r.submit_s),
                    seconds_cell(r.admission_s), seconds_cell(r.stability_s), text_cell(r.outcome),
                    text_cell(r.cause)});
  }
  print_table({"INCIDENT", "WORKLOAD", "KIND", "FROM->TO", "REPLACEMENT", "SVRT", "DETECT",
               "DECIDE", "SUBMIT", "ADMIT", "STABLE", "OUTCOME", "CAUSE"},
              rows);
  return kExitOk;
}

int run_status(Context& ctx, const JobRef& given) {
  const JobRef& ref = checked(given);
  const WorkloadStatus s = ctx.client().status(ref.cluster, ref.workload);
  if (ctx.json) {
    print_json(s);
  } else {
    print_status(s);
  }
  return kExitOk;
}

int run_cancel(Context& ctx, const JobRef& given) {
  const JobRef& ref = checked(given);
  const Cancellation out = ctx.client().cancel(ref.cluster, ref.workload);
  if (ctx.json) {
    print_json(out);
  } else {
    std::cout << fmt::format("cancelled {} on cluster {}\n", out.handle.workload_name,
                             out.handle.cluster);
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

int run_list(Context& ctx, const ListArgs& a) {
  check_cluster_name("--cluster", a.cluster);
  const auto state = parse_state(a.state);
  const auto workloads = ctx.client().list_workloads(a.cluster, state);
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
  LogRequest request{.cluster = a.job.cluster,
                     .workload = a.job.workload,
                     .rank = rank,
                     .slice = slice,
                     .tail = a.tail,
                     .follow = a.follow};
  if (!a.since.empty()) {
    request.since = check_since("--since", a.since, std::chrono::system_clock::now());
  }
  if (!a.grep.empty()) request.grep = a.grep;
  if (a.follow) {
    // Poll for new lines; stop on Ctrl-C, or shortly after the workload finishes.
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
  }
  LinePrinter print(ctx.json);
  try {
    ctx.client().read_logs(
        request,
        [&print, &a](const std::string& line) {
          print(line);
          if (a.follow) std::cout.flush();
        },
        [] { return g_interrupted.load() != 0; });
  } catch (const LogRetrievalError& e) {
    if (!a.grep.empty() && e.http_status() == 400) grep_hint();
    throw;
  }
  std::cout.flush();
  // Ended by a signal: exit as a shell reports a process that signal killed (130, 143).
  if (const int signal = g_interrupted.load(); signal != 0) return 128 + signal;
  say_when_empty(a, rank, slice, print.count());
  return kExitOk;
}

// Prints an export's steps on stderr: a terminal gets one rewritten line for a copy's progress
// and the split; a log a line per state change and per 10%.
ExportObserver export_printer(bool tty) {
  struct Said {
    std::string state;
    int decile = -1;
  };
  auto said = std::make_shared<Said>();
  ExportObserver observer;
  observer.on_status = [tty, said](const ExportStatus& s) {
    switch (s.phase) {
      case ExportStatus::Phase::kCopying:
        if (tty) {
          std::cerr << fmt::format("\rcopy {}: {} {}%   ", s.operation, s.state, s.percent);
          if (s.state == "SUCCEEDED" || s.state == "FAILED" || s.state == "CANCELLED") {
            std::cerr << "\n";
          }
        } else if (s.state != said->state || s.percent / 10 != said->decile) {
          std::cerr << fmt::format("falcon: copy {}: {} {}%\n", s.operation, s.state, s.percent);
        }
        said->state = s.state;
        said->decile = s.percent / 10;
        break;
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
  observer.on_progress = [tty](const ExportProgress& p) {
    if (!tty) return;
    std::cerr << fmt::format("\rrank {}: {} lines, {:.1f} MiB{}", p.rank, p.lines,
                             static_cast<double>(p.bytes) / 1048576.0, p.done ? " done\n" : "");
  };
  // Ctrl-C or SIGTERM: in-process the export stops (a copy operation is cancelled, staged
  // objects deleted); through a server the wait stops and the export goes on there.
  observer.cancelled = [] { return g_interrupted.load() != 0; };
  return observer;
}

int run_export_logs(Context& ctx, const ExportArgs& a) {
  checked(a.job);
  ExportRequest request{.cluster = a.job.cluster,
                        .workload = a.job.workload,
                        .dest = a.dest,
                        .slice = parse_index("--slice", a.slice, kMaxSlice),
                        .keep_staging = a.keep_staging};
  try {
    (void)parse_gcs_uri(a.dest);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--dest: {}", e.what()));
  }
  if (a.ranks != "all") request.ranks = parse_ranks(a.ranks);
  if (!a.since.empty()) {
    request.since = check_since("--since", a.since, std::chrono::system_clock::now());
  }
  if (!a.grep.empty()) request.grep = a.grep;
  if (!a.via.empty()) {
    request.via = parse_export_via(a.via);
    if (!request.via) {
      throw UsageError(
          fmt::format("--via: {} is not auto, read, copy or sink", quote_value(a.via)));
    }
  }
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  LogExportResult r;
  try {
    r = ctx.client().export_logs(request, export_printer(isatty(STDERR_FILENO) != 0));
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
