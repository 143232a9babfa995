// Cloud Logging v2 calls that do not read entries, and so do not spend the read quota:
// `entries:copy` (a long-running operation copying a log bucket's entries into Cloud Storage),
// `operations.get/cancel`, a log bucket's settings and a project's Logging service account.
//
//   LoggingAdminClient admin({.endpoint = endpoints.logging, .http = http,
//                             .credentials = credentials, .clock = clock});
//   CopyOperation op = admin.copy_log_entries({.name =
//   "projects/p/locations/global/buckets/_Default",
//                                              .filter = filter,
//                                              .destination = "storage.googleapis.com/b/dir"});
//   while (!op.done) { clock->sleep_for(5s); op = admin.get_operation(op.name); }
//
// Wire shapes (googleapis logging v2 and the gcloud SDK's messages): the Operation's metadata is
// a CopyLogEntriesMetadata (state OPERATION_STATE_*, progress, writerIdentity,
// cancellationRequested), its response a CopyLogEntriesResponse (logEntriesCopiedCount, an int64
// sent as a string), its error a google.rpc.Status.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "falcon/clock.h"
#include "falcon/http_client.h"
#include "gcp/credentials.h"
#include "gcp/retry.h"

namespace falcon::gcp {

// CopyLogEntriesMetadata.state.
enum class CopyState {
  kUnspecified,
  kScheduled,
  kWaitingForPermissions,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kPending,  // waiting for quota
};

// "SCHEDULED", "WAITING_FOR_PERMISSIONS", ... (the wire name without OPERATION_STATE_).
const char* to_string(CopyState state);
// The wire name (with or without the OPERATION_STATE_ prefix); kUnspecified when unknown.
CopyState parse_copy_state(std::string_view text);

struct CopyLogEntriesRequest {
  std::string name;         // "projects/P/locations/L/buckets/B"
  std::string filter;       // LQL, at most 20,000 characters
  std::string destination;  // "storage.googleapis.com/BUCKET[/FOLDER]"
};

// An entries:copy operation as operations.get reports it.
struct CopyOperation {
  std::string name;  // "projects/P/locations/L/operations/ID"
  bool done = false;
  CopyState state = CopyState::kUnspecified;
  int progress = 0;             // 0..100
  std::string writer_identity;  // "serviceAccount:..."
  bool cancellation_requested = false;
  std::int64_t entries_copied = -1;  // from the response once done; -1 when absent
  int error_code = 0;                // google.rpc code when done with an error (1: cancelled)
  std::string error_message;
  std::string start_time;
  std::string end_time;
};

// A log bucket's settings that decide whether it can be copied.
struct LogBucketInfo {
  std::string name;
  std::string kms_key_name;  // cmekSettings.kmsKeyName; empty without CMEK
};

struct LoggingAdminClientOptions {
  std::string endpoint = "https://logging.googleapis.com";
  std::shared_ptr<HttpClient> http;          // required
  std::shared_ptr<Credentials> credentials;  // null: no Authorization header
  std::shared_ptr<Clock> clock;              // required
  RetryPolicy retry = RetryPolicy::for_storage();
  std::chrono::milliseconds request_timeout{60'000};
  std::uint64_t seed = 0;
  std::function<void(const RetryWait&)> on_wait;  // optional
};

// Thread-safe; cheap to copy. Every call blocks and throws LogRetrievalError (HTTP status,
// google.rpc status name, the server's message, the call) once retries are exhausted or the
// failure is permanent. Reads are retried on transient failures; copy_log_entries is not (a
// repeat could start a second copy).
class LoggingAdminClient {
 public:
  // Throws std::invalid_argument when http or clock is missing.
  explicit LoggingAdminClient(LoggingAdminClientOptions options);

  CopyOperation copy_log_entries(const CopyLogEntriesRequest& request) const;
  CopyOperation get_operation(const std::string& name) const;
  // Asks for cancellation; the operation reports CANCELLED later (get_operation).
  void cancel_operation(const std::string& name) const;
  // GET of "projects/P/locations/L/buckets/B".
  LogBucketInfo get_log_bucket(const std::string& name) const;
  // The project's Logging service account (settings.loggingServiceAccountId), e.g.
  // "service-123@gcp-sa-logging.iam.gserviceaccount.com".
  std::string logging_service_account(const std::string& project) const;

 private:
  std::shared_ptr<const LoggingAdminClientOptions> options_;
};

// Parses an Operation body; throws LogRetrievalError naming `call` when it is not one.
CopyOperation parse_copy_operation(const std::string& body, const std::string& call);

}  // namespace falcon::gcp
