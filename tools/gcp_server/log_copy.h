// The fake's Cloud Logging `entries:copy` (a long-running operation copying entries of a log
// bucket into Cloud Storage), `operations.get/cancel/list`, log bucket and settings reads, and a
// Log Router sink archive in Cloud Storage.
//
// What the real service documents and this fake follows:
//   - POST /v2/entries:copy {name: "projects/P/locations/L/buckets/B", filter, destination:
//     "storage.googleapis.com/BUCKET"} answers an Operation named
//     "projects/P/locations/L/operations/ID" whose metadata is a CopyLogEntriesMetadata (state
//     OPERATION_STATE_*, progress 0..100, writerIdentity, cancellationRequested, request,
//     startTime, endTime) and, once done, a CopyLogEntriesResponse (logEntriesCopiedCount, an
//     int64 as a string) or an error (google.rpc.Status; code 1 CANCELLED after a cancel).
//   - A filter is at most 20,000 characters. A log bucket with CMEK cannot be copied.
//   - The writer identity needs write access to the destination bucket; until it has it the
//     operation waits (OPERATION_STATE_WAITING_FOR_PERMISSIONS), and after an hour it is
//     cancelled.
//   - A sink to Cloud Storage writes hourly NDJSON files
//     BUCKET/<log id>/YYYY/MM/DD/HH:00:00_HH:59:59_S<n>.json and does not deduplicate.
// Choices where the service is silent (documented in README.md):
//   - The operation advances when it is read (operations.get/list) by as many entries as
//     CopySettings::entries_per_second allows for the time since it started running, on the
//     server's clock (0: all at once), so a test on a fake clock needs no background thread.
//   - Copied objects are named `<prefix>/<operation id>-<n>.jsonl` (unlike the sink's names; the
//     real names are not documented), hold entries_per_object entries each in reverse time
//     order, and every duplicate_every-th entry is written again in the next object.
//   - A destination may carry a folder after the bucket ("storage.googleapis.com/B/dir"): the
//     objects go under it.
//   - The writer identity is "serviceAccount:" + the project's loggingServiceAccountId
//     (GET /v2/projects/P/settings): service-<number>@gcp-sa-logging.iam.gserviceaccount.com,
//     the number derived from the project id.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "gcp_server/log_store.h"
#include "gcp_server/object_store.h"

namespace falcon::fake {

struct CopySettings {
  std::int64_t entries_per_second = 0;  // copy rate once running; 0: everything at once
  std::int64_t entries_per_object = 10'000;
  std::int64_t duplicate_every = 1'000;  // every Nth entry is copied twice (two objects); 0: never
  int fail_at_percent = -1;              // fail (FAILED, INTERNAL) once progress reaches it
  std::chrono::milliseconds permission_timeout{
      3'600'000};  // WAITING_FOR_PERMISSIONS, then cancelled
};

nlohmann::json to_json(const CopySettings& s);
// Applies the fields present in `j` (the names of to_json). Throws std::invalid_argument.
void apply_copy_settings(const nlohmann::json& j, CopySettings& s);

class LogCopyService {
 public:
  LogCopyService(const LogStore& logs, ObjectStore& objects, std::shared_ptr<Clock> clock);
  ~LogCopyService();

  // entries:copy. Throws ApiError: 400 for a malformed request (names the field), a filter over
  // 20,000 characters or a CMEK bucket (FAILED_PRECONDITION).
  nlohmann::json start(const nlohmann::json& body);
  // operations.get: advances the operation first. 404 for an unknown one.
  nlohmann::json get(const std::string& name);
  // operations.cancel: asks for cancellation (done at the next read). 404 unknown; a done
  // operation is left as it is.
  void cancel(const std::string& name);
  // operations.list of `parent` ("projects/P/locations/L"); `filter` must name
  // request_type=CopyLogEntries (400 otherwise, as the service requires a request type).
  nlohmann::json list(const std::string& parent, const std::string& filter);

  // GET /v2/projects/P/locations/L/buckets/B: every such bucket exists, with cmekSettings when
  // set_cmek gave it a key.
  nlohmann::json log_bucket(const std::string& name) const;
  void set_cmek(const std::string& bucket_name, const std::string& kms_key_name);
  // GET /v2/projects/P/settings.
  static nlohmann::json settings_of(const std::string& project);
  // "service-<n>@gcp-sa-logging.iam.gserviceaccount.com".
  static std::string logging_service_account(const std::string& project);

  CopySettings copy_settings() const;
  void set_copy_settings(const CopySettings& s);

  // Writes what a Log Router sink of `project` to `bucket` would have written by now: every
  // entry of the project stamped before `until_ns`, in hourly files per log id, `shard_entries`
  // entries per shard (S0, S1, ...), every `duplicate_every`-th entry twice (0: never). Returns
  // the number of objects written.
  std::int64_t write_sink_archive(const std::string& project, const std::string& bucket,
                                  std::int64_t until_ns, std::int64_t shard_entries,
                                  std::int64_t duplicate_every);

  void clear();

 private:
  struct Operation;
  void advance(Operation& op, std::int64_t now_ns);
  void flush_object(Operation& op, std::int64_t now_ns);
  void finish(Operation& op, const std::string& state, std::int64_t now_ns);
  nlohmann::json render(const Operation& op) const;

  const LogStore& logs_;
  ObjectStore& objects_;
  std::shared_ptr<Clock> clock_;
  mutable std::mutex mutex_;
  CopySettings settings_;
  std::map<std::string, std::unique_ptr<Operation>> operations_;  // by name
  std::map<std::string, std::string> cmek_;                       // log bucket name -> key
  std::uint64_t next_id_ = 1;
};

}  // namespace falcon::fake
