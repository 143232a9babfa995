#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "falcon/accelerator_types.h"
#include "falcon/errors.h"
#include "falcon/workload_manager.h"
#include "process/bounded_parallel.h"
#include "util/time_format.h"
#include "xpk/failure_text.h"
#include "xpk/list_parser.h"
#include "xpk/xpk_cli.h"

namespace falcon {
namespace {

constexpr std::size_t kMaxNameLength = 40;
constexpr std::array<std::string_view, 5> kPriorities = {"very-low", "low", "medium", "high",
                                                         "very-high"};
constexpr const char* kDefaultNamespace = "default";
constexpr const char* kSubmissionsFile = "submissions.jsonl";

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// xpk's name_type: fullmatch [a-z]([-a-z0-9]*[a-z0-9])? and at most 40 characters.
std::optional<std::string> name_problem(const std::string& name) {
  if (name.empty()) return "the workload name is empty";
  if (name.size() > kMaxNameLength) {
    return fmt::format("workload name '{}' is {} characters long; xpk allows at most {}", name,
                       name.size(), kMaxNameLength);
  }
  const bool ok =
      (name.front() >= 'a' && name.front() <= 'z') && is_lower_alnum(name.back()) &&
      std::all_of(name.begin(), name.end(), [](char c) { return is_lower_alnum(c) || c == '-'; });
  if (!ok) {
    return fmt::format(
        "workload name '{}' is invalid: it must start with a lower-case letter, contain only "
        "lower-case letters, digits and '-', and end with a letter or digit "
        "([a-z]([-a-z0-9]*[a-z0-9])?)",
        name);
  }
  return std::nullopt;
}

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

nlohmann::json record_to_json(const SubmissionRecord& r) {
  return nlohmann::json{{"v", 1},
                        {"cluster", r.cluster},
                        {"workload", r.workload},
                        {"namespace", r.namespace_},
                        {"accelerator_type", r.accelerator_type},
                        {"device_class", r.device_class},
                        {"submitted_at", r.submitted_at},
                        {"cluster_id", r.cluster_id},
                        {"project", r.project},
                        {"zone", r.zone},
                        {"docker_image", r.docker_image},
                        {"priority", r.priority}};
}

// A complete record, or nullopt for a damaged line.
std::optional<SubmissionRecord> record_from_line(std::string_view line) {
  const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto text = [&](const char* key, bool required) -> std::optional<std::string> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
      return required ? std::nullopt : std::optional<std::string>("");
    }
    return it->get<std::string>();
  };
  SubmissionRecord r;
  const auto cluster = text("cluster", true);
  const auto workload = text("workload", true);
  const auto ns = text("namespace", true);
  const auto submitted = text("submitted_at", true);
  if (!cluster || !workload || !ns || !submitted) return std::nullopt;
  r.cluster = *cluster;
  r.workload = *workload;
  r.namespace_ = *ns;
  r.submitted_at = *submitted;
  r.accelerator_type = *text("accelerator_type", false);
  r.device_class = *text("device_class", false);
  r.cluster_id = *text("cluster_id", false);
  r.project = *text("project", false);
  r.zone = *text("zone", false);
  r.docker_image = *text("docker_image", false);
  r.priority = *text("priority", false);
  return r;
}

// `xpk workload create --help` answers, per binary, for the life of the process.
std::mutex g_help_mutex;
std::map<std::string, bool> g_namespace_support;

}  // namespace

XpkWorkloadManager::XpkWorkloadManager(std::shared_ptr<CommandRunner> runner, XpkSettings settings,
                                       std::shared_ptr<Clock> clock)
    : xpk_(std::make_shared<const xpk::XpkCli>(std::move(runner), std::move(settings))),
      clock_(std::move(clock)) {}

XpkWorkloadManager::~XpkWorkloadManager() = default;

std::string XpkWorkloadManager::submissions_path() const {
  return (xpk_->state_dir() / kSubmissionsFile).string();
}

bool XpkWorkloadManager::namespace_flag_supported(const std::string& cluster_name,
                                                  const std::string& workload) {
  const XpkSettings& settings = xpk_->settings();
  {
    std::lock_guard lock(g_help_mutex);
    if (auto it = g_namespace_support.find(settings.binary); it != g_namespace_support.end()) {
      return it->second;
    }
  }
  CommandSpec help;
  help.argv = {settings.binary, "workload", "create", "--help"};
  help.env = settings.env;
  help.timeout = std::chrono::seconds(settings.command_timeout_s);
  CommandResult r;
  try {
    r = xpk_->run(help);
  } catch (const std::exception& e) {
    throw WorkloadSubmitError(
        fmt::format("cannot submit workload '{}' to cluster '{}': checking whether xpk supports "
                    "--namespace failed: {}",
                    workload, cluster_name, e.what()),
        cluster_name, workload, std::nullopt, "");
  }
  if (!r.ok()) {
    const auto failure = xpk::describe_failure(r);
    throw WorkloadSubmitError(
        fmt::format("cannot submit workload '{}' to cluster '{}': `{} workload create --help` "
                    "failed ({}), so falcon cannot tell whether this xpk supports --namespace; "
                    "set xpk.namespace_flag to supported or unsupported in repos.yaml",
                    workload, cluster_name, settings.binary, failure.full()),
        cluster_name, workload, exit_code_of(r), failure.details);
  }
  const bool supported = r.stdout_text.find("--namespace") != std::string::npos ||
                         r.stderr_text.find("--namespace") != std::string::npos;
  std::lock_guard lock(g_help_mutex);
  g_namespace_support[settings.binary] = supported;
  return supported;
}

WorkloadHandle XpkWorkloadManager::submit(const ClusterConfig& cluster, const WorkloadSpec& spec) {
  const XpkSettings& settings = xpk_->settings();
  auto refuse = [&](const std::string& why) {
    return WorkloadSubmitError(fmt::format("cannot submit workload '{}' to cluster '{}': {}",
                                           spec.name, cluster.name, why),
                               cluster.name, spec.name, std::nullopt, "");
  };

  if (auto problem = name_problem(spec.name)) throw refuse(*problem);
  if (std::find(kPriorities.begin(), kPriorities.end(), spec.priority) == kPriorities.end()) {
    throw refuse(
        fmt::format("priority '{}' is not one of {}", spec.priority, fmt::join(kPriorities, ", ")));
  }
  for (const auto& [key, value] : spec.env) {
    if (!is_env_key(key)) {
      throw refuse(
          fmt::format("environment variable name '{}' is invalid: it must match "
                      "[a-zA-Z_][a-zA-Z0-9_]*",
                      key));
    }
    // xpk pastes values unescaped into a double-quoted YAML scalar (reference §2.3), so these
    // would break the manifest and fail later inside kubectl apply with a confusing message.
    if (value.find_first_of("\"\\\n\r") != std::string::npos) {
      throw refuse(
          fmt::format("the value of environment variable '{}' contains a double quote, "
                      "a backslash or a newline, which xpk cannot pass through",
                      key));
    }
  }
  if (spec.docker_image.empty()) throw refuse("docker_image is empty");
  if (spec.command.empty()) throw refuse("command is empty");
  const AcceleratorSlot* slot = cluster.find_slot(spec.accelerator_type);
  if (slot == nullptr) {
    std::vector<std::string> offered;
    for (const auto& s : cluster.accelerator_slots) offered.push_back(s.type);
    throw refuse(fmt::format(
        "the cluster does not offer accelerator '{}' (it offers: {})", spec.accelerator_type,
        offered.empty() ? "nothing" : fmt::format("{}", fmt::join(offered, ", "))));
  }
  const std::string type_flag =
      slot->device_class == DeviceClass::kTpu ? "--tpu-type=" : "--device-type=";

  std::string ns = spec.namespace_.value_or(cluster.default_namespace);
  if (ns.empty()) ns = kDefaultNamespace;
  bool pass_namespace = false;
  if (settings.namespace_flag == NamespaceFlag::kSupported) {
    pass_namespace = true;
  } else if (settings.namespace_flag == NamespaceFlag::kUnsupported || ns == kDefaultNamespace) {
    pass_namespace = false;
  } else {
    pass_namespace = namespace_flag_supported(cluster.name, spec.name);
  }
  if (!pass_namespace && ns != kDefaultNamespace) {
    throw refuse(fmt::format(
        "namespace '{}' was requested ({}), but this xpk ('{}') has no --namespace flag and "
        "would run the workload in 'default'. Use the namespace 'default' (set the cluster's "
        "default_namespace or the spec's namespace), or, if your xpk does support --namespace, "
        "set xpk.namespace_flag: supported in repos.yaml",
        ns, spec.namespace_ ? "by the workload spec" : "as the cluster's default_namespace",
        settings.binary));
  }

  std::vector<std::string> flags = {
      "--workload=" + spec.name,
      "--docker-image=" + spec.docker_image,
      "--command=" + xpk::shell_join(spec.command),
      type_flag + canonical_accelerator_type(slot->type).value_or(slot->type),
      "--priority=" + spec.priority,
  };
  if (pass_namespace) flags.push_back("--namespace=" + ns);
  for (const auto& [key, value] : spec.env) flags.push_back("--env=" + key + "=" + value);

  const std::string submitted_at = format_iso8601(clock_->now());
  CommandResult r;
  try {
    r = xpk_->run(xpk_->workload_command(cluster, "create", flags, spec.extra_args,
                                         std::chrono::seconds(settings.command_timeout_s)));
  } catch (const std::exception& e) {
    throw refuse(e.what());
  }
  if (!r.ok()) {
    const auto failure = xpk::describe_failure(r);
    throw WorkloadSubmitError(
        fmt::format("xpk workload create failed for workload '{}' on cluster '{}': {}", spec.name,
                    cluster.name, failure.full()),
        cluster.name, spec.name, exit_code_of(r), failure.details);
  }

  SubmissionRecord record{.cluster = cluster.name,
                          .workload = spec.name,
                          .namespace_ = ns,
                          .accelerator_type = spec.accelerator_type,
                          .device_class = to_string(slot->device_class),
                          .submitted_at = submitted_at,
                          .cluster_id = cluster.cluster_id,
                          .project = cluster.project,
                          .zone = cluster.zone,
                          .docker_image = spec.docker_image,
                          .priority = spec.priority};
  try {
    record_submission(record);
  } catch (const std::exception&) {
    // The workload exists; failing now would invite a duplicate submit. See the header.
  }
  return WorkloadHandle{.workload_name = spec.name,
                        .cluster = cluster.name,
                        .namespace_ = ns,
                        .submitted_at = submitted_at};
}

WorkloadStatus XpkWorkloadManager::get_status(const ClusterConfig& cluster,
                                              const WorkloadHandle& handle) {
  const auto timeout = std::chrono::seconds(xpk_->settings().command_timeout_s);
  const CommandResult r = xpk_->run(xpk_->workload_command(
      cluster, "list", {"--filter-by-job=" + handle.workload_name}, {}, timeout));
  if (!r.ok()) {
    const auto failure = xpk::describe_failure(r);
    throw XpkCommandError(
        fmt::format("xpk workload list failed on cluster '{}' (status of '{}'): {}", cluster.name,
                    handle.workload_name, failure.full()),
        cluster.name, exit_code_of(r), failure.details);
  }
  const auto list = xpk::parse_workload_list(r.stdout_text);
  if (!list) {
    throw XpkCommandError(
        fmt::format("xpk workload list on cluster '{}' exited 0 but printed no workload list",
                    cluster.name),
        cluster.name, 0, "");
  }
  WorkloadStatus status;
  status.workload_name = handle.workload_name;
  status.state = kStateUnknown;
  for (const auto& row : list->rows) {
    if (row.jobset_name != handle.workload_name) continue;  // xpk's filter is a substring match
    status.state = xpk::map_row_state(row);
    status.start_time = time_cell(row.created_time);
    if (is_terminal_state(status.state)) status.end_time = time_cell(row.status_time);
    break;
  }
  return status;
}

bool XpkWorkloadManager::cancel(const ClusterConfig& cluster, const WorkloadHandle& handle) {
  if (auto problem = name_problem(handle.workload_name)) {
    throw XpkCommandError(fmt::format("cannot cancel on cluster '{}': {}", cluster.name, *problem),
                          cluster.name, std::nullopt, "");
  }
  const auto timeout = std::chrono::seconds(xpk_->settings().command_timeout_s);
  const CommandResult r = xpk_->run(xpk_->workload_command(
      cluster, "delete", {"--workload=" + handle.workload_name}, {}, timeout));
  if (r.ok()) return true;
  if (!r.timed_out && r.term_signal == 0 && reports_jobset_not_found(r)) {
    throw WorkloadNotFoundError(cluster.name, handle.workload_name);
  }
  const auto failure = xpk::describe_failure(r);
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
  const auto timeout = std::chrono::seconds(xpk_->settings().command_timeout_s);
  const CommandResult r = xpk_->run(xpk_->workload_command(cluster, "list", {}, {}, timeout));
  if (!r.ok()) {
    const auto failure = xpk::describe_failure(r);
    throw XpkCommandError(
        fmt::format("xpk workload list failed on cluster '{}': {}", cluster.name, failure.full()),
        cluster.name, exit_code_of(r), failure.details);
  }
  const auto list = xpk::parse_workload_list(r.stdout_text);
  if (!list) {
    throw XpkCommandError(
        fmt::format("xpk workload list on cluster '{}' exited 0 but printed no workload list",
                    cluster.name),
        cluster.name, 0, "");
  }
  std::map<std::string, std::string> accelerators;  // workload -> type, last record wins
  for (const auto& rec : read_submissions()) {
    if (rec.cluster == cluster.name) accelerators[rec.workload] = rec.accelerator_type;
  }
  std::vector<WorkloadInfo> out;
  for (const auto& row : list->rows) {
    WorkloadInfo info;
    info.name = row.jobset_name;
    info.state = xpk::map_row_state(row);
    if (state_filter && info.state != *state_filter) continue;
    if (auto it = accelerators.find(row.jobset_name); it != accelerators.end()) {
      info.accelerator_type = it->second;
    }
    info.start_time = time_cell(row.created_time);
    out.push_back(std::move(info));
  }
  return out;
}

std::optional<SubmissionRecord> XpkWorkloadManager::find_submission(
    const std::string& cluster, const std::string& workload) const {
  std::optional<SubmissionRecord> found;
  try {
    for (auto& rec : read_submissions()) {
      if (rec.cluster == cluster && rec.workload == workload) found = std::move(rec);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return found;
}

void XpkWorkloadManager::record_submission(const SubmissionRecord& record) const {
  xpk::ensure_private_dir(xpk_->state_dir());
  const std::string path = submissions_path();
  const int fd = ::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw FalconError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  }
  std::string line = record_to_json(record).dump() + "\n";
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n') line.insert(0, "\n");
  }
  std::size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw FalconError(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
    }
    written += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

std::vector<SubmissionRecord> XpkWorkloadManager::read_submissions() const {
  std::vector<SubmissionRecord> records;
  std::ifstream in(submissions_path(), std::ios::binary);
  if (!in) return records;
  std::string line;
  while (std::getline(in, line)) {
    if (auto rec = record_from_line(line)) records.push_back(std::move(*rec));
  }
  return records;
}

std::vector<WarmupResult> XpkWorkloadManager::warm_up(const std::vector<ClusterConfig>& clusters,
                                                      int max_parallel) {
  const XpkSettings& settings = xpk_->settings();
  std::vector<WarmupResult> results(clusters.size());
  run_bounded_parallel(clusters.size(), max_parallel, [&](std::size_t i) {
    const ClusterConfig& cluster = clusters[i];
    WarmupResult& out = results[i];
    out.cluster = cluster.name;
    const auto start = clock_->steady_now();
    try {
      CommandSpec spec;
      spec.argv = {settings.gcloud_binary,
                   "container",
                   "clusters",
                   "get-credentials",
                   cluster.cluster_id,
                   "--project=" + cluster.project,
                   "--location=" + (cluster.location.empty() ? cluster.zone : cluster.location)};
      spec.env = xpk_->cluster_environment(cluster);
      spec.timeout = std::chrono::seconds(settings.command_timeout_s);
      const CommandResult r = xpk_->run(spec);
      out.ok = r.ok();
      if (!r.ok()) {
        out.error = fmt::format("gcloud get-credentials failed for cluster '{}': {}", cluster.name,
                                xpk::describe_failure(r).full());
      }
    } catch (const std::exception& e) {
      out.ok = false;
      out.error =
          fmt::format("gcloud get-credentials failed for cluster '{}': {}", cluster.name, e.what());
    } catch (...) {
      out.ok = false;
      out.error = "gcloud get-credentials failed with an unknown exception";
    }
    out.elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_->steady_now() - start);
  });
  return results;
}

}  // namespace falcon
