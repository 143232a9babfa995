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
};

struct JobRef {
  std::string cluster;
  std::string workload;
};

struct LogArgs {
  JobRef job;
  int rank = 0;
  int slice = 0;
  std::string since;
  std::string grep;
  int tail = 0;
  bool follow = false;
};

struct ExportArgs {
  JobRef job;
  std::string dest;
  std::string ranks = "all";
  int slice = 0;
  std::string since;
  std::string grep;
};

void add_job_ref(CLI::App* cmd, JobRef& ref) {
  cmd->add_option("--cluster", ref.cluster, "cluster name (as in repos.yaml)")->required();
  cmd->add_option("workload", ref.workload, "workload name")->required();
}

std::map<std::string, std::string> parse_env(const std::vector<std::string>& items) {
  std::map<std::string, std::string> env;
  for (const auto& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(fmt::format("--env: '{}' is not KEY=VALUE", item));
    }
    env[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return env;
}

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> ranks;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    std::size_t used = 0;
    int rank = -1;
    try {
      rank = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || rank < 0) {
      throw UsageError(fmt::format("--ranks: '{}' is not 'all' or a list like 0,1,2", text));
    }
    ranks.push_back(rank);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ranks;
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
  if (!since.empty()) filter.since = parse_since("--since", since);
  if (!grep.empty()) filter.grep = grep;
  if (!filter.since && handle.submitted_at.empty()) {
    std::cerr << fmt::format(
        "falcon: no record of submitting '{}' from here; reading the last 24 hours of logs (use "
        "--since to change the window)\n",
        handle.workload_name);
  }
  return filter;
}

}  // namespace

void add_job_commands(CLI::App& app, Context& ctx) {
  CLI::App* job = app.add_subcommand("job", "xpk workloads: submit, status, cancel, list, logs");
  job->require_subcommand(1);

  // --- submit
  auto submit_args = std::make_shared<SubmitArgs>();
  CLI::App* submit = job->add_subcommand(
      "submit",
      "submit a workload through xpk; selects a cluster first when --cluster is absent.\n"
      "  falcon job submit --accelerator tpu-v4-64 --name bench-1 --image IMG -- python3 "
      "train.py");
  submit->add_option("--accelerator", submit_args->accelerator, "accelerator type")->required();
  submit->add_option("--cluster", submit_args->cluster, "cluster (default: select the best)");
  submit->add_option("--name", submit_args->name, "workload name ([a-z][-a-z0-9]*, <= 40)")
      ->required();
  submit->add_option("--image", submit_args->image, "docker image")->required();
  submit->add_option("--priority", submit_args->priority,
                     "very-low | low | medium | high | very-high");
  submit->add_option("--env", submit_args->env, "KEY=VALUE, repeatable")->allow_extra_args(false);
  submit->add_option("--namespace", submit_args->namespace_,
                     "namespace (default: the cluster's default_namespace)");
  submit
      ->add_option("--xpk-arg", submit_args->xpk_args,
                   "extra argument passed verbatim to xpk workload create, repeatable")
      ->allow_extra_args(false);
  submit->add_option("command", submit_args->command, "the command to run, after --")->required();
  submit->callback([&ctx, submit_args] {
    ctx.action = [&ctx, submit_args] {
      const SubmitArgs& a = *submit_args;
      WorkloadSpec spec;
      spec.name = a.name;
      spec.docker_image = a.image;
      spec.command = a.command;
      spec.accelerator_type = a.accelerator;
      spec.priority = a.priority;
      spec.env = parse_env(a.env);
      if (!a.namespace_.empty()) spec.namespace_ = a.namespace_;
      spec.extra_args = a.xpk_args;

      std::optional<ClusterSelection> selection;
      std::string cluster = a.cluster;
      if (cluster.empty()) {
        selection = ctx.fabric().select_cluster(a.accelerator);
        cluster = selection->selected_cluster;
        if (!ctx.json) std::cerr << selection->reason << "\n";
      }
      const WorkloadHandle handle = ctx.fabric().submit_workload(cluster, spec);
      if (ctx.json) {
        nlohmann::json out = {{"handle", handle}};
        out["selection"] = selection ? nlohmann::json(*selection) : nlohmann::json(nullptr);
        print_json(out);
      } else {
        std::cout << fmt::format("submitted {} to cluster {} (namespace {}) at {}\n",
                                 handle.workload_name, handle.cluster, handle.namespace_,
                                 handle.submitted_at);
      }
      return kExitOk;
    };
  });

  // --- status
  auto status_ref = std::make_shared<JobRef>();
  CLI::App* status = job->add_subcommand("status", "state of one workload");
  add_job_ref(status, *status_ref);
  status->callback([&ctx, status_ref] {
    ctx.action = [&ctx, status_ref] {
      const WorkloadHandle h = ctx.fabric().handle_for(status_ref->cluster, status_ref->workload);
      const WorkloadStatus s = ctx.fabric().get_workload_status(h);
      if (ctx.json)
        print_json(s);
      else
        print_status(s);
      return kExitOk;
    };
  });

  // --- cancel
  auto cancel_ref = std::make_shared<JobRef>();
  CLI::App* cancel = job->add_subcommand("cancel", "delete a workload (xpk workload delete)");
  add_job_ref(cancel, *cancel_ref);
  cancel->callback([&ctx, cancel_ref] {
    ctx.action = [&ctx, cancel_ref] {
      const WorkloadHandle h = ctx.fabric().handle_for(cancel_ref->cluster, cancel_ref->workload);
      const bool cancelled = ctx.fabric().cancel_workload(h);
      if (ctx.json) {
        print_json(
            {{"workload_name", h.workload_name}, {"cluster", h.cluster}, {"cancelled", cancelled}});
      } else {
        std::cout << fmt::format("cancelled {} on cluster {}\n", h.workload_name, h.cluster);
      }
      return kExitOk;
    };
  });

  // --- list
  auto list_cluster = std::make_shared<std::string>();
  auto list_state = std::make_shared<std::string>();
  CLI::App* list = job->add_subcommand("list", "workloads of one cluster");
  list->add_option("--cluster", *list_cluster, "cluster name")->required();
  list->add_option("--state", *list_state, "QUEUED | RUNNING | COMPLETED | FAILED | UNKNOWN");
  list->callback([&ctx, list_cluster, list_state] {
    ctx.action = [&ctx, list_cluster, list_state] {
      std::optional<std::string> state;
      if (!list_state->empty()) {
        std::string upper = *list_state;
        for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        if (!is_valid_state(upper)) {
          throw UsageError(
              fmt::format("--state: '{}' is not one of QUEUED, RUNNING, COMPLETED, FAILED, UNKNOWN",
                          *list_state));
        }
        state = upper;
      }
      const auto workloads = ctx.fabric().list_workloads(*list_cluster, state);
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
    };
  });

  // --- logs
  auto log_args = std::make_shared<LogArgs>();
  CLI::App* logs = job->add_subcommand("logs", "print one rank's log lines (rank 0 by default)");
  add_job_ref(logs, log_args->job);
  logs->add_option("--rank", log_args->rank, "worker index within the slice")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--slice", log_args->slice, "slice index (multi-slice workloads)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--since", log_args->since, "RFC 3339 time, or an age like 30m, 6h, 2d");
  logs->add_option("--grep", log_args->grep,
                   "Cloud Logging query expression, applied on the server (e.g. step_time)");
  logs->add_option("--tail", log_args->tail,
                   fmt::format("only the last N lines (1 to {})", kMaxTailLines))
      ->check(CLI::Range(1, kMaxTailLines));
  logs->add_flag("--follow", log_args->follow,
                 "keep printing new lines until the workload finishes (Ctrl-C to stop)");
  logs->callback([&ctx, log_args] {
    ctx.action = [&ctx, log_args]() -> int {
      const LogArgs& a = *log_args;
      ClusterFabric& fabric = ctx.fabric();
      const WorkloadHandle h = fabric.handle_for(a.job.cluster, a.job.workload);
      LogFilter filter = log_filter_for(h, a.since, a.grep);
      if (a.tail > 0) filter.tail_lines = a.tail;
      std::int64_t count = 0;
      auto emit = [&](const std::string& line) {
        ++count;
        if (ctx.json) {
          std::cout << nlohmann::json(line).dump() << "\n";
        } else {
          std::cout << line << "\n";
        }
      };
      if (!a.follow) {
        for (const std::string& line : fabric.stream_pod_log(h, a.rank, filter, a.slice)) {
          emit(line);
        }
        std::cout.flush();
        return kExitOk;
      }
      // --follow: poll for new lines; stop on Ctrl-C, or shortly after the workload finishes.
      std::signal(SIGINT, on_interrupt);
      std::signal(SIGTERM, on_interrupt);
      FollowOptions options;
      fabric.follow_pod_log_until_finished(
          h, a.rank, filter, a.slice, options, [] { return g_interrupted.load() != 0; },
          [&](const std::string& line) {
            emit(line);
            std::cout.flush();
          });
      // Ended by a signal: exit as a shell reports a process that signal killed (130, 143).
      if (const int signal = g_interrupted.load(); signal != 0) return 128 + signal;
      return kExitOk;
    };
  });

  // --- export-logs
  auto export_args = std::make_shared<ExportArgs>();
  CLI::App* export_logs =
      job->add_subcommand("export-logs",
                          "archive ranks' logs to Cloud Storage: <dest>/rank-N.log and "
                          "<dest>/collection_meta.json");
  add_job_ref(export_logs, export_args->job);
  export_logs->add_option("--dest", export_args->dest, "gs://BUCKET/PATH/")->required();
  export_logs->add_option("--ranks", export_args->ranks, "all (default) or a list like 0,1");
  export_logs->add_option("--slice", export_args->slice, "slice index (multi-slice workloads)")
      ->check(CLI::NonNegativeNumber);
  export_logs->add_option("--since", export_args->since, "RFC 3339 time, or an age like 6h");
  export_logs->add_option("--grep", export_args->grep, "Cloud Logging query expression");
  export_logs->callback([&ctx, export_args] {
    ctx.action = [&ctx, export_args] {
      const ExportArgs& a = *export_args;
      try {
        (void)parse_gcs_uri(a.dest);
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--dest: {}", e.what()));
      }
      ClusterFabric& fabric = ctx.fabric();
      const WorkloadHandle h = fabric.handle_for(a.job.cluster, a.job.workload);
      LogFilter filter = log_filter_for(h, a.since, a.grep);
      if (a.ranks != "all") filter.ranks = parse_ranks(a.ranks);
      const bool tty = isatty(STDERR_FILENO) != 0;
      LogExportResult r;
      try {
        r = fabric.export_pod_logs(h, filter, a.dest, a.slice, [tty](const ExportProgress& p) {
          if (!tty) return;
          std::cerr << fmt::format("\rrank {}: {} lines, {:.1f} MiB{}", p.rank, p.lines,
                                   p.bytes / 1048576.0, p.done ? " done\n" : "");
        });
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--ranks: {}", e.what()));
      }
      if (ctx.json) {
        print_json(r);
        return kExitOk;
      }
      std::vector<std::vector<std::string>> rows;
      for (const auto& [rank, uri] : r.gcs_uris) rows.push_back({std::to_string(rank), uri});
      print_table({"RANK", "OBJECT"}, rows);
      std::cout << fmt::format("exported {} rank{} of {} at {}\n", r.exported_ranks.size(),
                               r.exported_ranks.size() == 1 ? "" : "s", r.workload_name,
                               r.exported_at);
      return kExitOk;
    };
  });
}

}  // namespace falcon::cli
