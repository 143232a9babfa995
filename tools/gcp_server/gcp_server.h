// A local server that speaks the Cloud Logging v2, Cloud Storage JSON API, OAuth token and
// GCE metadata-token protocols on loopback, for tests, the demo and benchmarks.
//
//   falcon::fake::GcpServer server({});          // in memory, auth required, port chosen by OS
//   server.start();
//   server.write_log_entries({entry1, entry2});   // as entries:write would store them
//   // point a client at server.base_url() with "Authorization: Bearer " + server.valid_token()
//
// Routes (all under base_url()):
//   POST /v2/entries:list, /v2/entries:write                   Logging ("logging.list", ".write")
//   POST /v2/entries:copy                                       ("logging.copy", log_copy.h)
//   GET  /v2/projects/P/locations/L/operations[/ID]   ("logging.operations_list", "_get")
//   POST /v2/projects/P/locations/L/operations/ID:cancel        ("logging.operations_cancel")
//   GET  /v2/projects/P/locations/L/buckets/B, /v2/projects/P/settings
//                                                  ("logging.bucket_get", "logging.settings_get")
//   GET|PUT /storage/v1/b/B/iam                    ("storage.iam_get", "storage.iam_set")
//   POST /upload/storage/v1/b/B/o?uploadType=resumable|media|multipart
//                                                  ("storage.upload_init", "storage.upload_media")
//   PUT  /upload/storage/v1/b/B/o?upload_id=ID     ("storage.upload_chunk")
//   DELETE /upload/storage/v1/b/B/o?upload_id=ID   499 ("storage.upload_cancel")
//   GET  /storage/v1/b/B/o/NAME[?alt=media]        ("storage.get"), /download/storage/v1/... too
//   GET  /storage/v1/b/B/o?prefix=&delimiter=&pageToken=&maxResults=   ("storage.list")
//   DELETE /storage/v1/b/B/o/NAME                  ("storage.delete")
//   POST /storage/v1/b?project=P, GET /storage/v1/b/B, GET /storage/v1/b  ("storage.bucket_*")
//   POST /token                                    ("oauth.token")
//   GET  /computeMetadata/v1/instance/service-accounts/default/token   ("metadata.token")
//   GET  /computeMetadata/v1/instance/service-accounts/default/?recursive=true,
//        /computeMetadata/v1/project/project-id    ("metadata.other")
// Control endpoints (never authenticated, never faulted):
//   GET /_fake/counters, POST /_fake/reset, GET|POST|DELETE /_fake/faults, POST /_fake/tokens,
//   POST /_fake/service_accounts, POST /_fake/authorized_users, GET /_fake/health,
//   GET|POST /_fake/copy (CopySettings), POST /_fake/log_buckets (CMEK),
//   POST /_fake/sink_archive (write a sink's hourly files).
// Protocol details and the choices where the reference is silent are documented in lql.h
// (filters), log_store.h (listing), object_store.h (uploads) and token_authority.h (OAuth).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "falcon/clock.h"
#include "gcp_server/fault_injector.h"
#include "gcp_server/log_line.h"
#include "gcp_server/read_quota.h"

namespace httplib {
class Server;
}

namespace falcon::fake {

class LogCopyService;

struct GcpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;              // 0: the OS picks a free port
  bool require_auth = true;  // Logging and Storage routes need a valid bearer token
  std::string data_dir;      // empty: in memory; else logs and objects persist there
  // Tokens accepted forever in addition to issued ones (e.g. for gcloud --access-token-file).
  std::vector<std::string> fixed_tokens;
  // Reject JWT assertions from issuers without a registered key and unknown refresh tokens.
  bool strict_credentials = false;
  // Entries one entries:list call examines before it returns a partial (possibly empty) page
  // with a nextPageToken, as the real service does near its deadline. 0: unlimited.
  std::size_t list_scan_budget = 0;
  // HTTP worker threads. An idle keep-alive connection holds one for up to 2 s, so allow one
  // per concurrent client connection.
  int threads = 32;
  // Cloud Logging's read quota: at most this many entries:list calls per project in any sliding
  // 60-second window (on `clock`); the next is refused with 429 RESOURCE_EXHAUSTED, its RetryInfo
  // the time until a call leaves the window. The project is that of the first resourceName.
  // 0: no quota (the default).
  int logging_reads_per_minute = 0;
  std::shared_ptr<Clock> clock;             // null: the system clock
  std::string project_id = "falcon-local";  // reported by the metadata server
  std::string service_account_email = "falcon-local@falcon-local.iam.gserviceaccount.com";
};

class GcpServer {
 public:
  // Loads persisted state from options.data_dir when set. Throws std::runtime_error when the
  // data directory cannot be used.
  explicit GcpServer(GcpServerOptions options);
  ~GcpServer();  // stops if running
  GcpServer(const GcpServer&) = delete;
  GcpServer& operator=(const GcpServer&) = delete;

  // The underlying server, to add routes (the fleet's) BEFORE start(). Routes added this way
  // are neither authenticated nor counted nor faulted.
  httplib::Server& http();

  // Binds and serves on background threads; returns once the socket accepts connections.
  // Throws std::runtime_error when the address cannot be bound. Not restartable after stop().
  void start();
  // Stops accepting, finishes in-flight requests and joins the threads. Idempotent.
  void stop();
  int port() const;                 // valid after start()
  std::string base_url() const;     // "http://127.0.0.1:<port>"
  std::string valid_token() const;  // a bearer token the server accepts (valid for a day)

  // entries:write semantics (fills receiveTimestamp, insertId and timestamp if absent). Each
  // entry must carry logName and resource. Throws ApiError (see api_error.h) when one is
  // invalid; then nothing is stored.
  void write_log_entries(const std::vector<nlohmann::json>& entries);
  void write_log_entries(std::vector<nlohmann::json>&& entries);  // saves copying the entries
  // Fast bulk path for simulated pod logs: equivalent to write_log_entries with one entry per
  // line, each `shared` (logName, resource, labels, severity, ...) plus `timestamp` and
  // `textPayload`, with generated insertIds; no JSON object is built per line, so a million
  // lines take a second, not minutes. Throws ApiError when `shared` is invalid.
  void write_text_entries(const nlohmann::json& shared, std::vector<LogLine> lines);
  // Creates a bucket as POST /storage/v1/b?project=P does, unless it exists. Throws ApiError for
  // an invalid name.
  void ensure_bucket(const std::string& name, const std::string& project);
  std::size_t log_entry_count() const;
  // Entries examined by entries:list so far (see LogStore::examined).
  std::uint64_t log_entries_examined() const;
  std::size_t object_count() const;
  // The bytes of object `name` in `bucket`, or nullopt when there is none (the fleet's jobs read
  // their storage fence through it: fleet/simulator.h).
  std::optional<std::string> object_data(const std::string& bucket, const std::string& name) const;
  // entries:list calls refused with 429 by the read quota (logging_reads_per_minute) so far.
  std::int64_t logging_quota_rejections() const;

  FaultInjector& faults();
  // entries:copy, its operations, log buckets and the sink archive (log_copy.h).
  LogCopyService& copies();
  // Requests received per route name (see the table above), including failed ones.
  std::map<std::string, std::int64_t> request_counts() const;
  // Clears faults, counters, logs, objects and upload sessions.
  void reset();

  // Accept `token` as a bearer token from now on.
  void add_token(const std::string& token);
  // A service-account key file (JSON text) whose token_uri is this server's /token and whose
  // public key is registered, so a client can sign a JWT and exchange it here. Call after
  // start() (the token_uri needs the port).
  std::string create_service_account_key(const std::string& client_email) const;
  // An authorized_user credentials file (JSON text) with a refresh token this server accepts.
  // Call after start().
  std::string create_authorized_user() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon::fake
