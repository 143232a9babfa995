#include <algorithm>
#include <array>
#include <exception>
#include <functional>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "falcon/accelerator_types.h"
#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "falcon/values.h"
#include "falcon/workload_manager.h"
#include "util/time_format.h"
#include "workload/create_args.h"
#include "workload/submission_log.h"
#include "xpk/failure_text.h"
#include "xpk/list_parser.h"
#include "xpk/workload_listing.h"
#include "xpk/xpk_cli.h"

namespace falcon {
namespace {

constexpr std::array<std::string_view, 5> kPriorities = {"very-low", "low", "medium", "high",
                                                         "very-high"};
constexpr const char* kDefaultNamespace = "default";
constexpr const char* kSubmissionsFile = "submissions.jsonl";

bool is_env_key(const std::string& key) {
  auto head = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  return !key.empty() && head(key.front()) && std::all_of(key.begin(), key.end(), [&](char c) {
    return head(c) || (c >= '0' && c <= '9');
  });
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// An xpk time cell as ISO 8601 with milliseconds; `<none>` is null; text that is not a
// timestamp is passed through unchanged.
std::optional<std::string> time_cell(const std::string& cell) {
  if (cell.empty() || cell == xpk::kNone) return std::nullopt;
  if (auto t = parse_rfc3339(cell)) return format_iso8601(*t);
  return cell;
}

std::optional<int> exit_code_of(const CommandResult& r) {
  if (r.timed_out || r.term_signal != 0) return std::nullopt;
  return r.exit_code;
}

// kubectl's `Error from server (NotFound): jobsets.jobset.x-k8s.io "X" not found`. Lines about
// a PathwaysJob are ignored: xpk's PathwaysJob pre-step fails that way for every ordinary
// workload, even when the JobSet delete then succeeds.
bool reports_jobset_not_found(const CommandResult& r) {
  for (const std::string* text : {&r.stderr_text, &r.stdout_text}) {
    for (std::string_view line : xpk::split_output_lines(*text)) {
      const std::string l = lower(line);
      if ((l.find("notfound") != std::string::npos || l.find("not found") != std::string::npos) &&
          l.find("jobset") != std::string::npos && l.find("pathways") == std::string::npos) {
        return true;
      }
    }
  }
  return false;
}

// The line in which xpk says that `workload` exists, when that is why create failed. xpk 1.13
// (stdin closed) prints `[XPK] <name> already exists, do you want to overwrite it? (y/N): ` last,
// after `... already exists. Skipping its creation` lines about its own service account and
// roles, then an EOFError traceback on stderr; xpk before 1.9 prints `[XPK] <name> already
// exists, XPK will not create this workload. ...`. Only lines naming the workload count.
std::optional<std::string> duplicate_name_line(const CommandResult& r,
                                               const std::string& workload) {
  if (r.timed_out || r.term_signal != 0) return std::nullopt;
  const std::string prompt = workload + " already exists, do you want to overwrite it?";
  const std::string refusal = workload + " already exists, XPK will not create this workload";
  for (std::string_view line : xpk::split_output_lines(r.stdout_text)) {
    for (const std::string& text : {prompt, refusal}) {
      const auto at = line.find(text);
      if (at == std::string_view::npos) continue;
      if (at != 0 && line[at - 1] != ' ') continue;  // `[XPK] <name>`, not another name's tail
      std::string_view kept = line;
      while (!kept.empty() && (kept.back() == ' ' || kept.back() == '\r')) kept.remove_suffix(1);
      return std::string(kept);
    }
  }
  return std::nullopt;
}

// Whether a failed `xpk workload create` stopped before its create step, so that it made
// nothing (WorkloadNotCreatedError): xpk ended by itself ("XPK failed, error code N"; not a
// timeout, a signal or cut output), a step before the apply failed (its existence check's
// kubectl call, "[XPK] Task Check if Workload Already Exists failed with 1" followed by
// kubectl's "Unable to connect to the server: ..."; or "Workload scheduling validation
// failed. XPK will not create the workload"), and nothing of the create step was printed
// ("[XPK] Starting workload create" comes before the YAML is rendered and applied, or any
// mention of `kubectl apply`). Anything else leaves it open whether the JobSet was applied.
bool failed_before_create_step(const CommandResult& r) {
  if (r.ok() || r.timed_out || r.term_signal != 0 || r.stdout_truncated) return false;
  bool pre_apply_failure = false;
  bool xpk_failed = false;
  for (std::string_view line : xpk::split_output_lines(r.stdout_text)) {
    if (line.find("Starting workload create") != std::string_view::npos ||
        line.find("kubectl apply") != std::string_view::npos) {
      return false;
    }
    if (line.find("[XPK] Task Check if Workload Already Exists failed with") !=
            std::string_view::npos ||
        line.find("Workload scheduling validation failed. XPK will not create the workload") !=
            std::string_view::npos) {
      pre_apply_failure = true;
    }
    if (line.find("[XPK] XPK failed, error code") != std::string_view::npos) xpk_failed = true;
  }
  return pre_apply_failure && xpk_failed;
}

}  // namespace

XpkWorkloadManager::XpkWorkloadManager(std::shared_ptr<CommandRunner> runner, XpkSettings settings,
                                       std::shared_ptr<Clock> clock)
    : XpkWorkloadManager(
          std::make_shared<const xpk::XpkCli>(std::move(runner), std::move(settings)),
          std::move(clock)) {}

XpkWorkloadManager::XpkWorkloadManager(std::shared_ptr<const xpk::XpkCli> xpk,
                                       std::shared_ptr<Clock> clock,
                                       std::shared_ptr<SubmissionStore> submissions,
                                       std::shared_ptr<const WorkloadListSource> kube,
                                       ProbeBackend default_backend)
    : xpk_(std::move(xpk)),
      clock_(std::move(clock)),
      submissions_(std::move(submissions)),
      kube_(std::move(kube)),
      default_backend_(default_backend) {
  if (!xpk_ || !clock_) {
    throw std::invalid_argument("XpkWorkloadManager: xpk and clock must be set");
  }
  if (!submissions_) submissions_ = make_jsonl_submission_store(submissions_path());
}

XpkWorkloadManager::~XpkWorkloadManager() = default;

std::string XpkWorkloadManager::submissions_path() const {
  return (xpk_->state_dir() / kSubmissionsFile).string();
}

bool XpkWorkloadManager::namespace_flag_supported(const std::string& cluster_name,
                                                  const std::string& workload) {
  try {
    return xpk_->create_has_namespace_flag();
  } catch (const XpkCommandError& e) {
    throw WorkloadSubmitError(
        fmt::format("cannot submit workload '{}' to cluster '{}': {}, so falcon cannot tell "
                    "whether this xpk supports --namespace; set xpk.namespace_flag to supported "
                    "or unsupported in repos.yaml",
                    workload, cluster_name, e.what()),
        cluster_name, workload, e.exit_code(), e.stderr_text());
  } catch (const std::exception& e) {
    throw WorkloadSubmitError(
        fmt::format("cannot submit workload '{}' to cluster '{}': checking whether xpk supports "
                    "--namespace failed: {}",
                    workload, cluster_name, e.what()),
        cluster_name, workload, std::nullopt, "");
  }
}

namespace {

// Submit's own checks: the caller's input is at fault, nothing has run.
InvalidWorkloadSpecError invalid_spec(const ClusterConfig& cluster, const WorkloadSpec& spec,
                                      const std::string& why) {
  return InvalidWorkloadSpecError(
      fmt::format("cannot submit workload '{}' to cluster '{}': {}", spec.name, cluster.name, why),
      cluster.name, spec.name);
}

// A failure around xpk before it printed anything (the state directory, a missing binary, the
// store refusing the intent).
WorkloadSubmitError refused(const ClusterConfig& cluster, const WorkloadSpec& spec,
                            const std::string& why) {
  return WorkloadSubmitError(
      fmt::format("cannot submit workload '{}' to cluster '{}': {}", spec.name, cluster.name, why),
      cluster.name, spec.name, std::nullopt, "");
}

// Checks the spec against its rules and the cluster's slots (InvalidWorkloadSpecError) and
// returns the slot it runs on.
const AcceleratorSlot& checked_slot(const ClusterConfig& cluster, const WorkloadSpec& spec) {
  const auto invalid = [&](const std::string& why) { return invalid_spec(cluster, spec, why); };
  if (auto problem = workload_name_problem(spec.name)) throw invalid(*problem);
  if (std::find(kPriorities.begin(), kPriorities.end(), spec.priority) == kPriorities.end()) {
    throw invalid(fmt::format("priority {} is not one of {}", quote_value(spec.priority),
                              fmt::join(kPriorities, ", ")));
  }
  for (const auto& [key, value] : spec.env) {
    if (!is_env_key(key)) {
      throw invalid(
          fmt::format("environment variable name {} is invalid: it must match "
                      "[a-zA-Z_][a-zA-Z0-9_]*",
                      quote_value(key)));
    }
    if (auto problem = workload::env_value_problem(key, value)) throw invalid(*problem);
  }
  if (auto problem = workload::docker_image_problem(spec.docker_image)) throw invalid(*problem);
  if (spec.command.empty()) throw invalid("command is empty");
  if (auto problem = workload::xpk_args_problem(spec.extra_args)) throw invalid(*problem);
  const AcceleratorSlot* slot = cluster.find_slot(spec.accelerator_type);
  if (slot == nullptr) {
    std::vector<std::string> offered;
    for (const auto& s : cluster.accelerator_slots) offered.push_back(s.type);
    throw invalid(fmt::format(
        "the cluster does not offer accelerator '{}' (it offers: {})", spec.accelerator_type,
        offered.empty() ? "nothing" : fmt::format("{}", fmt::join(offered, ", "))));
  }
  // TPU templates paste the command into a block scalar only; GPU and CPU ones also into a
  // double-quoted env value.
  if (auto problem = workload::command_problem(xpk::shell_join(spec.command),
                                               slot->device_class != DeviceClass::kTpu)) {
    throw invalid(*problem);
  }
  return *slot;
}

// The flags of `xpk workload create` for a checked spec.
std::vector<std::string> create_flags(const WorkloadSpec& spec, const AcceleratorSlot& slot,
                                      const std::optional<std::string>& namespace_flag) {
  const std::string type_flag =
      slot.device_class == DeviceClass::kTpu ? "--tpu-type=" : "--device-type=";
  std::vector<std::string> flags = {
      "--workload=" + spec.name,
      "--docker-image=" + spec.docker_image,
      "--command=" + xpk::shell_join(spec.command),
      type_flag + canonical_accelerator_type(slot.type).value_or(slot.type),
      "--priority=" + spec.priority,
  };
  if (namespace_flag) flags.push_back("--namespace=" + *namespace_flag);
  for (const auto& [key, value] : spec.env) flags.push_back("--env=" + key + "=" + value);
  return flags;
}

// The namespace the workload runs in, and whether --namespace is passed (`xpk_has_flag` asks
// xpk's --help, for xpk.namespace_flag auto). Throws InvalidWorkloadSpecError for a namespace
// other than default that this xpk cannot take.
std::string namespace_for(const ClusterConfig& cluster, const WorkloadSpec& spec,
                          const XpkSettings& settings, const std::function<bool()>& xpk_has_flag,
                          bool* pass_flag) {
  std::string ns = spec.namespace_.value_or(cluster.default_namespace);
  if (ns.empty()) ns = kDefaultNamespace;
  bool pass = false;
  if (settings.namespace_flag == NamespaceFlag::kSupported) {
    pass = true;
  } else if (settings.namespace_flag == NamespaceFlag::kUnsupported || ns == kDefaultNamespace) {
    pass = false;
  } else {
    pass = xpk_has_flag();
  }
  if (!pass && ns != kDefaultNamespace) {
    throw invalid_spec(
        cluster, spec,
        fmt::format(
            "namespace '{}' was requested ({}), but this xpk ('{}') has no --namespace flag and "
            "would run the workload in 'default'. Use the namespace 'default' (set the "
            "cluster's default_namespace or the spec's namespace), or, if your xpk does support "
            "--namespace, set xpk.namespace_flag: supported in repos.yaml",
            ns, spec.namespace_ ? "by the workload spec" : "as the cluster's default_namespace",
            settings.binary));
  }
  *pass_flag = pass;
  return ns;
}

// Runs `xpk workload create` with the submission's intent recorded first (intent before
// effect): a store that cannot take it fails the submit with nothing created. Throws the
// create's outcome as submit documents it (workload_manager.h).
void create_recorded(const xpk::XpkCli& xpk, SubmissionStore& submissions,
                     const ClusterConfig& cluster, const WorkloadSpec& spec,
                     const std::vector<std::string>& flags, const SubmissionRecord& record) {
  // Intent before effect: recorded before xpk runs, so that no workload exists that the store
  // does not know of. A store that cannot take it fails the submit here, with nothing created.
  // A record of the name that exists already (an earlier workload of that name) is left alone
  // until the create has succeeded.
  bool intended = false;
  try {
    intended = submissions.intend(record);
  } catch (const StateStoreError& e) {
    throw StateStoreError(
        e.backend(), e.location(),
        fmt::format("record the submission of workload '{}' to cluster '{}' before creating it "
                    "(nothing was created)",
                    spec.name, cluster.name),
        e.db_message());
  } catch (const std::exception& e) {
    throw refused(
        cluster, spec,
        fmt::format(
            "the submission could not be recorded before creating it (nothing was created): {}",
            e.what()));
  }
  // A create that made nothing takes its intent back; one that may have made the workload keeps
  // it (a later status by name tells which).
  const auto made_nothing = [&] {
    if (intended) submissions.forget(record);
  };

  CommandResult r;
  try {
    r = xpk.run_workload(cluster, "create", flags, spec.extra_args,
                         std::chrono::seconds(xpk.settings().command_timeout_s));
  } catch (const std::exception& e) {
    made_nothing();  // xpk did not run (a missing binary, an unusable state directory)
    throw refused(cluster, spec, e.what());
  }
  if (!r.ok()) {
    if (auto line = duplicate_name_line(r, spec.name)) {
      made_nothing();
      throw WorkloadExistsError(
          fmt::format("workload '{}' already exists on cluster '{}' (xpk workload create exited "
                      "{} without replacing it); pick another name, or cancel the existing "
                      "workload first: falcon job cancel --cluster {} {}",
                      spec.name, cluster.name, r.exit_code, cluster.name, spec.name),
          cluster.name, spec.name, exit_code_of(r), *line);
    }
    const auto failure = xpk::describe_failure(r);
    if (failed_before_create_step(r)) {
      made_nothing();
      throw WorkloadNotCreatedError(
          fmt::format("xpk workload create failed for workload '{}' on cluster '{}' before its "
                      "create step (nothing was created): {}",
                      spec.name, cluster.name, failure.full()),
          cluster.name, spec.name, exit_code_of(r), failure.details);
    }
    throw WorkloadSubmitError(
        fmt::format("xpk workload create failed for workload '{}' on cluster '{}': {}", spec.name,
                    cluster.name, failure.full()),
        cluster.name, spec.name, exit_code_of(r), failure.details);
  }

  if (!intended) {
    try {
      submissions.record(record);  // replaces the earlier workload's record of the name
    } catch (const std::exception&) {
      // The workload exists and the store knows its name; failing now would invite a
      // duplicate submit. See the header.
    }
  }
}

}  // namespace

WorkloadHandle XpkWorkloadManager::submit(const ClusterConfig& cluster, const WorkloadSpec& spec,
                                          std::int64_t selection_id) {
  const AcceleratorSlot& slot = checked_slot(cluster, spec);
  bool pass_namespace = false;
  const std::string ns = namespace_for(
      cluster, spec, xpk_->settings(),
      [&] { return namespace_flag_supported(cluster.name, spec.name); }, &pass_namespace);
  const std::vector<std::string> flags =
      create_flags(spec, slot, pass_namespace ? std::optional(ns) : std::nullopt);
  const SubmissionRecord record{.cluster = cluster.name,
                                .workload = spec.name,
                                .namespace_ = ns,
                                .accelerator_type = slot.type,  // one spelling in the record
                                .device_class = to_string(slot.device_class),
                                .submitted_at = format_iso8601(clock_->now()),
                                .cluster_id = cluster.cluster_id,
                                .project = cluster.project,
                                .zone = cluster.zone,
                                .docker_image = spec.docker_image,
                                .priority = spec.priority,
                                .spec = spec,
                                .selection_id = selection_id};
  create_recorded(*xpk_, *submissions_, cluster, spec, flags, record);
  return WorkloadHandle{.workload_name = spec.name,
                        .cluster = cluster.name,
                        .namespace_ = ns,
                        .submitted_at = record.submitted_at};
}

std::vector<xpk::ListedWorkload> XpkWorkloadManager::read_workloads(
    const ClusterConfig& cluster, const std::optional<std::string>& filter_by_job) const {
  if (kube_ && cluster.probe_backend.value_or(default_backend_) == ProbeBackend::kKube) {
    try {
      return kube_->list_workloads(cluster);
    } catch (const std::exception& e) {
      throw XpkCommandError(e.what(), cluster.name, std::nullopt, "");
    }
  }
  auto listing = xpk::list_workloads(*xpk_, cluster, filter_by_job,
                                     std::chrono::seconds(xpk_->settings().command_timeout_s));
  listing.workloads_or_throw();
  return std::move(listing.workloads);
}

WorkloadStatus XpkWorkloadManager::get_status(const ClusterConfig& cluster,
                                              const WorkloadHandle& handle) {
  check_workload_name("workload", handle.workload_name);  // before xpk runs
  const auto workloads = read_workloads(cluster, handle.workload_name);
  WorkloadStatus status;
  status.workload_name = handle.workload_name;
  status.state = kStateUnknown;
  for (const auto& w : workloads) {
    // --filter-by-job is a substring match: take the row of exactly this name.
    if (w.row.jobset_name != handle.workload_name) continue;
    status.state = w.state;
    status.start_time = time_cell(w.row.created_time);
    if (is_terminal_state(status.state)) status.end_time = time_cell(w.row.status_time);
    return status;
  }
  // Not in the cluster's list: never submitted, or deleted (the spec: querying a workload that
  // does not exist raises WorkloadNotFoundError).
  throw WorkloadNotFoundError(cluster.name, handle.workload_name);
}

bool XpkWorkloadManager::cancel(const ClusterConfig& cluster, const WorkloadHandle& handle) {
  check_workload_name("workload", handle.workload_name);  // before xpk runs
  // Intent before effect (issue 27): a delete the store cannot record is not run.
  const std::int64_t intent = submissions_->intend_delete(cluster.name, handle.workload_name);
  const auto timeout = std::chrono::seconds(xpk_->settings().command_timeout_s);
  CommandResult r;
  try {
    r = xpk_->run_workload(cluster, "delete", {"--workload=" + handle.workload_name}, {}, timeout);
  } catch (const std::exception& e) {
    submissions_->deleted(intent, kDeleteFailed, e.what());
    throw;
  }
  if (r.ok()) {
    submissions_->deleted(intent, kDeleteDeleted, "");
    return true;
  }
  if (!r.timed_out && r.term_signal == 0 && reports_jobset_not_found(r)) {
    submissions_->deleted(intent, kDeleteNotFound, "");
    throw WorkloadNotFoundError(cluster.name, handle.workload_name);
  }
  const auto failure = xpk::describe_failure(r);
  submissions_->deleted(intent, kDeleteFailed, failure.full());
  throw XpkCommandError(fmt::format("xpk workload delete failed for workload '{}' on cluster "
                                    "'{}': {}",
                                    handle.workload_name, cluster.name, failure.full()),
                        cluster.name, exit_code_of(r), failure.details);
}

std::vector<WorkloadInfo> XpkWorkloadManager::list_workloads(
    const ClusterConfig& cluster, const std::optional<std::string>& state_filter) {
  if (state_filter && !is_valid_state(*state_filter)) {
    throw std::invalid_argument(
        fmt::format("state filter '{}' is not one of QUEUED, RUNNING, COMPLETED, FAILED, UNKNOWN",
                    *state_filter));
  }
  const auto workloads = read_workloads(cluster, std::nullopt);
  std::vector<WorkloadInfo> out;
  for (const auto& [row, state] : workloads) {
    WorkloadInfo info;
    info.name = row.jobset_name;
    info.state = state;
    if (state_filter && info.state != *state_filter) continue;
    // An unreadable record loses only the accelerator column.
    if (auto rec = submissions_->find(cluster.name, row.jobset_name)) {
      info.accelerator_type = rec->accelerator_type;
    }
    info.start_time = time_cell(row.created_time);
    out.push_back(std::move(info));
  }
  return out;
}

std::optional<SubmissionRecord> XpkWorkloadManager::find_submission(
    const std::string& cluster, const std::string& workload) const {
  return submissions_->find(cluster, workload);
}

}  // namespace falcon
