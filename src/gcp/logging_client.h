// Cloud Logging v2 `entries:list` over REST (reference gcp.md section 1).
//
//   LoggingClient logging({.endpoint = endpoints.logging, .http = http,
//                          .credentials = credentials, .clock = clock});
//   ListLogEntriesRequest request{.resource_names = {"projects/p"},
//                                 .filter = R"(timestamp>="2026-04-13T00:00:00Z" AND ...)"};
//   LogEntryReader reader = logging.list_entries(request);
//   while (std::optional<LogEntry> entry = reader.next()) use(entry->message);
//
// Pages are fetched lazily, one request each time the previous page is used up, and the reader
// keeps going while the server returns a nextPageToken, even after an empty page. Every request
// takes a permit from the project's read limiter (the options' ReadLimiter: shared by every
// client given it, and with SharedReadLimiter by every falcon process of the machine) and is
// retried on transient failures; a 429 is waited out until the request's deadline, with a
// backoff that honours RetryInfo.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "falcon/clock.h"
#include "falcon/http_client.h"
#include "gcp/credentials.h"
#include "gcp/rate_limiter.h"
#include "gcp/retry.h"
#include "util/page_tokens.h"

namespace falcon::gcp {

// One LogEntry, the fields the layer uses (log_entry.proto names in comments).
struct LogEntry {
  std::string log_name;              // logName
  std::string timestamp;             // timestamp, RFC 3339 as sent
  std::int64_t timestamp_nanos = 0;  // the same in ns since the epoch; 0 if absent or malformed
  std::string receive_timestamp;     // receiveTimestamp
  std::int64_t receive_timestamp_nanos = 0;  // the same in ns; 0 if absent or malformed
  std::string insert_id;                     // insertId
  std::string severity;                      // severity name; "" when absent (DEFAULT)
  std::string text_payload;                  // textPayload, "" when absent
  std::string json_payload;                  // jsonPayload as compact JSON text, "" when absent
  // The line a person reads: textPayload; else jsonPayload.message when it is a string; else the
  // compact JSON of jsonPayload or protoPayload.
  std::string message;
  std::string resource_type;                           // resource.type
  std::map<std::string, std::string> resource_labels;  // resource.labels
  std::map<std::string, std::string> labels;           // labels (k8s-pod/... keys among them)
};

struct ListLogEntriesRequest {
  std::vector<std::string> resource_names;  // "projects/<id>", at most 100
  std::string filter;                       // LQL; the caller quotes and escapes values
  bool newest_first = false;                // orderBy "timestamp desc" (else "timestamp asc")
  int page_size = 1000;                     // 1..1000
  std::string page_token;                   // to resume from a previous response
};

struct LogEntriesPage {
  std::vector<LogEntry> entries;
  std::string next_page_token;  // "" on the last page
  // The server's time when it answered (its HTTP Date header, whole seconds), in ns since the
  // epoch; nullopt when it sent none. The same clock as receiveTimestamp, unlike this machine's.
  std::optional<std::int64_t> server_time_nanos;
};

struct LoggingClientOptions {
  std::string endpoint = "https://logging.googleapis.com";  // base URL, see resolve_endpoints
  std::shared_ptr<HttpClient> http;                         // required
  std::shared_ptr<Credentials> credentials;                 // null: no Authorization header
  std::shared_ptr<Clock> clock;                             // required: waits and deadlines
  // Paces reads per project. Null: a ProjectRateLimiters of this client's own, on `clock`.
  std::shared_ptr<ReadLimiter> rate_limiters;
  int reads_per_minute = 60;  // per project
  RetryPolicy retry = RetryPolicy::for_logging();
  std::chrono::milliseconds request_timeout{60'000};
  std::uint64_t seed = 0;  // jitter; 0 picks a random seed
  // Told before every wait between attempts, and before a wait for the read limiter of at least
  // `rate_limit_notice_after` (shorter ones are the ordinary pace of a long read). Called on the
  // reading thread. Optional.
  std::function<void(const RetryWait&)> on_wait;
  std::chrono::milliseconds rate_limit_notice_after{5'000};
};

class LogEntryReader;

// Thread-safe; cheap to copy (shares its HTTP client, credentials and rate limiter).
class LoggingClient {
 public:
  // Throws std::invalid_argument when http or clock is missing.
  explicit LoggingClient(LoggingClientOptions options);

  // One entries:list call. Blocks (rate limiter, network, backoff). Throws LogRetrievalError
  // with the HTTP status, google.rpc status name and message once retries are exhausted or the
  // error is permanent (400, 403, 404, ...), and std::invalid_argument for a request that cannot
  // be valid (no resource names, page_size outside 1..1000).
  LogEntriesPage list_entries_page(const ListLogEntriesRequest& request) const;

  // A lazy reader over every page of `request`. Does no I/O until next() is called.
  LogEntryReader list_entries(ListLogEntriesRequest request) const;

 private:
  std::shared_ptr<const LoggingClientOptions> options_;
};

// Reads entries page by page. Not thread-safe; one per consumer.
class LogEntryReader {
 public:
  LogEntryReader(LoggingClient client, ListLogEntriesRequest request);

  // The next entry, fetching the next page only when the current one is used up (skipping empty
  // pages that carry a nextPageToken); nullopt once the last page is used up. Throws as
  // LoggingClient::list_entries_page; after a throw, next() tries the same page again.
  std::optional<LogEntry> next();

  int pages_fetched() const { return pages_fetched_; }
  // The server's time of the first page (LogEntriesPage::server_time_nanos), once fetched.
  std::optional<std::int64_t> first_server_time_nanos() const { return first_server_time_; }
  // The token of the page after the one being read ("" at the end): lets a caller resume.
  const std::string& next_page_token() const { return request_.page_token; }

 private:
  LoggingClient client_;
  ListLogEntriesRequest request_;
  std::vector<LogEntry> page_;
  std::size_t position_ = 0;
  bool done_ = false;
  int pages_fetched_ = 0;
  std::optional<std::int64_t> first_server_time_;
  PageTokens tokens_;
};

// How errors name a request: "entries:list for projects/p".
std::string entries_list_call(const ListLogEntriesRequest& request);

// One LogEntry JSON object as the reader decodes it (the fields of LogEntry above).
LogEntry parse_log_entry(const nlohmann::json& item);

// Parses one entries:list response body. Throws LogRetrievalError when it is not the expected
// JSON (`call` names the request in the message).
LogEntriesPage parse_log_entries_page(const std::string& body, const std::string& call);

// An HTTP-date (RFC 9110: "Sun, 06 Nov 1994 08:49:37 GMT") in ns since the epoch, nullopt when
// it is not one.
std::optional<std::int64_t> parse_http_date(std::string_view text);

// "p" for "projects/p" (and "projects/p/locations/..."), else the whole resource name: the key of
// the per-project read limiter.
std::string project_of_resource(const std::string& resource_name);

}  // namespace falcon::gcp
