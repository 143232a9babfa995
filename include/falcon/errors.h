// The layer's errors: one hierarchy, rooted at FalconError. This table is the contract with the
// business layer (the spec's error table); foreign failures (errno, HTTP status, yaml-cpp and JSON
// exceptions, xpk exit codes) are translated into these at the boundary, with context.
//
//   FalconError
//   ├── ClusterConfigError        repos.yaml is missing, malformed or invalid (every problem)
//   ├── InvalidValueError         a value given (a name, rank, slice, time) breaks its rule
//   │                             (falcon/values.h)
//   ├── UnknownClusterError       a cluster name the registry does not know (the spec's KeyError)
//   ├── NoAvailableClusterError   no candidate, or every candidate unreachable or full
//   ├── ClusterUnreachableError   one cluster's probe timed out or failed
//   ├── XpkCommandError           an xpk command failed (exit code and what it printed)
//   │   └── WorkloadSubmitError   `xpk workload create` failed or was refused before running
//   ├── WorkloadNotFoundError     status/cancel of a workload the cluster does not have
//   ├── LogRetrievalError         Cloud Logging or Cloud Storage failed (status and message)
//   ├── CommandStartError         a binary could not be started (names the binary)
//   └── StateStoreError           the state database failed (backend, operation, its message)
//
// Each error knows its class name and extra fields, so the CLI can print
// {"error": {"type": "<ErrorClass>", "message": "...", ...}} and pick its exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "falcon/model.h"

namespace falcon {

class FalconError : public std::runtime_error {
 public:
  explicit FalconError(const std::string& message) : std::runtime_error(message) {}
  // The class name as the spec spells it, e.g. "NoAvailableClusterError".
  virtual const char* type_name() const noexcept { return "FalconError"; }
  // Adds this error's extra fields (cluster, probe results, stderr, ...) to `out`.
  virtual void add_details(nlohmann::json& out) const;
};

class ClusterConfigError : public FalconError {
 public:
  // `problems`: every problem found, each `file:line:col: path: problem`.
  explicit ClusterConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }
  const char* type_name() const noexcept override { return "ClusterConfigError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::vector<std::string> problems_;
};

class UnknownClusterError : public FalconError {
 public:
  // `known`: the registered names, listed in the message to help the user.
  UnknownClusterError(std::string cluster, const std::vector<std::string>& known);
  const std::string& cluster() const { return cluster_; }
  const char* type_name() const noexcept override { return "UnknownClusterError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string cluster_;
};

class NoAvailableClusterError : public FalconError {
 public:
  NoAvailableClusterError(std::string message, std::string accelerator,
                          std::vector<ClusterProbeResult> probe_results);
  const std::string& accelerator() const { return accelerator_; }
  const std::vector<ClusterProbeResult>& probe_results() const { return probe_results_; }
  // The policy and each candidate's part in the failed decision (why each was skipped), when
  // the selector got that far; empty for "no cluster supports <type>".
  void set_scores(std::string policy, std::vector<CandidateScore> scores) {
    policy_ = std::move(policy);
    scores_ = std::move(scores);
  }
  const std::string& policy() const { return policy_; }
  const std::vector<CandidateScore>& scores() const { return scores_; }
  const char* type_name() const noexcept override { return "NoAvailableClusterError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string accelerator_;
  std::vector<ClusterProbeResult> probe_results_;
  std::string policy_;
  std::vector<CandidateScore> scores_;
};

class ClusterUnreachableError : public FalconError {
 public:
  ClusterUnreachableError(std::string cluster, const std::string& reason);
  const std::string& cluster() const { return cluster_; }
  const char* type_name() const noexcept override { return "ClusterUnreachableError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string cluster_;
};

class XpkCommandError : public FalconError {
 public:
  // `exit_code` is null when xpk did not run or was killed (timeout, signal).
  XpkCommandError(std::string message, std::string cluster, std::optional<int> exit_code,
                  std::string stderr_text);
  const std::string& cluster() const { return cluster_; }
  const std::optional<int>& exit_code() const { return exit_code_; }
  // What xpk printed that explains the failure: its stderr and its `[XPK]` error lines.
  const std::string& stderr_text() const { return stderr_; }
  const char* type_name() const noexcept override { return "XpkCommandError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string cluster_;
  std::optional<int> exit_code_;
  std::string stderr_;
};

class WorkloadSubmitError : public XpkCommandError {
 public:
  WorkloadSubmitError(std::string message, std::string cluster, std::string workload,
                      std::optional<int> exit_code, std::string stderr_text);
  const std::string& workload() const { return workload_; }
  const char* type_name() const noexcept override { return "WorkloadSubmitError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string workload_;
};

class WorkloadNotFoundError : public FalconError {
 public:
  WorkloadNotFoundError(std::string cluster, std::string workload);
  const std::string& cluster() const { return cluster_; }
  const std::string& workload() const { return workload_; }
  const char* type_name() const noexcept override { return "WorkloadNotFoundError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string cluster_;
  std::string workload_;
};

class LogRetrievalError : public FalconError {
 public:
  // `http_status` is 0 for transport failures; `status` is the google.rpc.Status code name
  // ("RESOURCE_EXHAUSTED") or empty.
  LogRetrievalError(std::string message, int http_status = 0, std::string status = "");
  int http_status() const { return http_status_; }
  const std::string& status() const { return status_; }
  const char* type_name() const noexcept override { return "LogRetrievalError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  int http_status_;
  std::string status_;
};

class CommandStartError : public FalconError {
 public:
  CommandStartError(std::string binary, const std::string& reason);
  const std::string& binary() const { return binary_; }
  const char* type_name() const noexcept override { return "CommandStartError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string binary_;
};

class StateStoreError : public FalconError {
 public:
  // `backend`: "sqlite" | "postgresql" | "" (URL not understood); `location`: the database's
  // URL without its password; `operation`: what the store was doing ("open", "record_probes");
  // `db_message`: what the database said.
  StateStoreError(std::string backend, std::string location, std::string operation,
                  std::string db_message);
  const std::string& backend() const { return backend_; }
  const std::string& location() const { return location_; }
  const std::string& operation() const { return operation_; }
  const std::string& db_message() const { return db_message_; }
  const char* type_name() const noexcept override { return "StateStoreError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string backend_;
  std::string location_;
  std::string operation_;
  std::string db_message_;
};

// A copy of a managed workload that a newer one supersedes (storage fencing, fence.h): the
// fence object holds a later epoch than the copy was started with, so it must not write a
// checkpoint. `falcon fence check` exits 8.
class FencedError : public FalconError {
 public:
  FencedError(std::string uri, std::int64_t epoch, std::int64_t current);
  const std::string& uri() const { return uri_; }
  std::int64_t epoch() const { return epoch_; }
  std::int64_t current() const { return current_; }
  const char* type_name() const noexcept override { return "FencedError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string uri_;
  std::int64_t epoch_;
  std::int64_t current_;
};

}  // namespace falcon
