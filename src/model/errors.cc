#include "falcon/errors.h"
#include "falcon/values.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "falcon/exit_codes.h"

namespace falcon {
namespace {

std::string join_problems(const std::vector<std::string>& problems) {
  if (problems.size() == 1) return problems.front();
  return fmt::format("{} problems:\n  {}", problems.size(), fmt::join(problems, "\n  "));
}

// "state store (sqlite, sqlite:///x/falcon.db): record_probes failed: database is locked"
std::string state_store_message(const std::string& backend, const std::string& location,
                                const std::string& operation, const std::string& db_message) {
  std::string where;
  if (!backend.empty() && !location.empty()) {
    where = fmt::format(" ({}, {})", backend, location);
  } else if (!backend.empty() || !location.empty()) {
    where = fmt::format(" ({})", backend.empty() ? location : backend);
  }
  return fmt::format("state store{}: {} failed: {}", where, operation, db_message);
}

}  // namespace

void FalconError::add_details(nlohmann::json& /*out*/) const {}

ClusterConfigError::ClusterConfigError(std::vector<std::string> problems)
    : FalconError(join_problems(problems)), problems_(std::move(problems)) {}

void ClusterConfigError::add_details(nlohmann::json& out) const { out["problems"] = problems_; }

UnknownClusterError::UnknownClusterError(std::string cluster, const std::vector<std::string>& known)
    : FalconError(known.empty() ? fmt::format("unknown cluster {}: no clusters are registered",
                                              quote_value(cluster))
                                : fmt::format("unknown cluster {} (registered: {})",
                                              quote_value(cluster), fmt::join(known, ", "))),
      cluster_(std::move(cluster)) {}

void UnknownClusterError::add_details(nlohmann::json& out) const { out["cluster"] = cluster_; }

NoAvailableClusterError::NoAvailableClusterError(std::string message, std::string accelerator,
                                                 std::vector<ClusterProbeResult> probe_results)
    : FalconError(std::move(message)),
      accelerator_(std::move(accelerator)),
      probe_results_(std::move(probe_results)) {}

void NoAvailableClusterError::add_details(nlohmann::json& out) const {
  out["accelerator"] = accelerator_;
  out["probe_results"] = probe_results_;
  if (!scores_.empty()) {
    out["policy"] = policy_;
    out["scores"] = scores_;
  }
}

ClusterUnreachableError::ClusterUnreachableError(std::string cluster, const std::string& reason)
    : FalconError(fmt::format("cluster '{}' is unreachable: {}", cluster, reason)),
      cluster_(std::move(cluster)) {}

void ClusterUnreachableError::add_details(nlohmann::json& out) const { out["cluster"] = cluster_; }

XpkCommandError::XpkCommandError(std::string message, std::string cluster,
                                 std::optional<int> exit_code, std::string stderr_text)
    : FalconError(std::move(message)),
      cluster_(std::move(cluster)),
      exit_code_(exit_code),
      stderr_(std::move(stderr_text)) {}

void XpkCommandError::add_details(nlohmann::json& out) const {
  out["cluster"] = cluster_;
  out["exit_code"] = exit_code_ ? nlohmann::json(*exit_code_) : nlohmann::json(nullptr);
  out["stderr"] = stderr_;
}

WorkloadSubmitError::WorkloadSubmitError(std::string message, std::string cluster,
                                         std::string workload, std::optional<int> exit_code,
                                         std::string stderr_text)
    : XpkCommandError(std::move(message), std::move(cluster), exit_code, std::move(stderr_text)),
      workload_(std::move(workload)) {}

void WorkloadSubmitError::add_details(nlohmann::json& out) const {
  XpkCommandError::add_details(out);
  out["workload"] = workload_;
}

WorkloadNotFoundError::WorkloadNotFoundError(std::string cluster, std::string workload)
    : FalconError(fmt::format("workload {} not found on cluster {}", quote_value(workload),
                              quote_value(cluster))),
      cluster_(std::move(cluster)),
      workload_(std::move(workload)) {}

void WorkloadNotFoundError::add_details(nlohmann::json& out) const {
  out["cluster"] = cluster_;
  out["workload"] = workload_;
}

LogRetrievalError::LogRetrievalError(std::string message, int http_status, std::string status)
    : FalconError(std::move(message)), http_status_(http_status), status_(std::move(status)) {}

void LogRetrievalError::add_details(nlohmann::json& out) const {
  out["http_status"] = http_status_;
  out["status"] = status_;
}

CommandStartError::CommandStartError(std::string binary, const std::string& reason)
    : FalconError(fmt::format("cannot run '{}': {}", binary, reason)), binary_(std::move(binary)) {}

void CommandStartError::add_details(nlohmann::json& out) const { out["binary"] = binary_; }

StateStoreError::StateStoreError(std::string backend, std::string location, std::string operation,
                                 std::string db_message)
    : FalconError(state_store_message(backend, location, operation, db_message)),
      backend_(std::move(backend)),
      location_(std::move(location)),
      operation_(std::move(operation)),
      db_message_(std::move(db_message)) {}

void StateStoreError::add_details(nlohmann::json& out) const {
  out["backend"] = backend_;
  out["location"] = location_;
  out["operation"] = operation_;
}

FencedError::FencedError(std::string uri, std::int64_t epoch, std::int64_t current)
    : FalconError(fmt::format("fenced: {} holds epoch {}, newer than this copy's {}; a newer copy "
                              "of the workload runs, so this one must not write",
                              uri, current, epoch)),
      uri_(std::move(uri)),
      epoch_(epoch),
      current_(current) {}

void FencedError::add_details(nlohmann::json& out) const {
  out["uri"] = uri_;
  out["epoch"] = epoch_;
  out["current"] = current_;
}

const std::vector<ErrorAnswer>& error_answers() {
  static const std::vector<ErrorAnswer> table = {
      {"ClusterConfigError", kExitUsage, 400, true},
      {"InvalidWorkloadSpecError", kExitUsage, 400, true},
      {"InvalidValueError", kExitUsage, 400, true},
      {"UsageError", kExitUsage, 400, false},
      {"UnknownClusterError", kExitNotFound, 404, true},
      {"WorkloadNotFoundError", kExitNotFound, 404, true},
      {"NoAvailableClusterError", kExitNoCluster, 503, true},
      {"WorkloadExistsError", kExitXpkFailed, 409, true},
      {"WorkloadNotCreatedError", kExitXpkFailed, 502, true},
      {"WorkloadSubmitError", kExitXpkFailed, 502, true},
      {"XpkCommandError", kExitXpkFailed, 502, true},
      {"CommandStartError", kExitXpkFailed, 502, true},
      {"LogRetrievalError", kExitLogs, 502, true},
      {"ClusterUnreachableError", kExitUnreachable, 503, true},
      {"FencedError", kExitFenced, 409, true},
      // The database down or refusing writes: the request may succeed shortly.
      {"StateStoreError", kExitInternal, 503, true},
      {"FalconError", kExitInternal, 500, true},
      {"InternalError", kExitInternal, 500, false},
  };
  return table;
}

const ErrorAnswer* find_error_answer(std::string_view type) {
  for (const ErrorAnswer& a : error_answers()) {
    if (a.type == type) return &a;
  }
  return nullptr;
}

}  // namespace falcon
