// Faults the local GCP server injects on request, so tests can exercise retries, backoff and
// resumption against real HTTP. Controlled in process (GcpServer::faults()) or over HTTP
// (POST /_fake/faults with the JSON form below).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace falcon::fake {

// One fault rule. It applies to the next `times` requests of `route` (a route name as in
// GcpServer::request_counts(), e.g. "logging.list", "storage.upload_chunk", or "*" for all).
// In order: wait `delay`; then either cut the connection or answer `status`; a rule with only a
// delay lets the request through afterwards.
//
// JSON form: {"route":"logging.list","times":2,"status":429,"message":"...","delay_ms":0,
//             "cut_connection":false,"cut_after_bytes":-1,"retry_delay":"2s"}
struct Fault {
  std::string route = "*";
  int times = 1;  // -1: every request until cleared
  // HTTP status to answer with (0: none). The body is the error shape of the route's API:
  // google.rpc.Status for Logging (429 carries ErrorInfo RATE_LIMIT_EXCEEDED with the quota
  // metadata, a Help link and a RetryInfo), the legacy `errors[]` shape for Storage, an OAuth
  // error for /token, plain text for the metadata server.
  int status = 0;
  std::string message;  // empty: the API's usual message for `status`
  std::chrono::milliseconds delay{0};
  // Drop the connection without a response after reading `cut_after_bytes` of the request
  // body (-1: half of its Content-Length). For a resumable upload chunk, the whole 256 KiB
  // quanta of the bytes read are persisted first (the session's Range then reports them), as a
  // real interrupted upload may leave a prefix committed.
  bool cut_connection = false;
  std::int64_t cut_after_bytes = -1;
  std::string retry_delay = "1s";  // RetryInfo.retryDelay for 429 (proto Duration text)

  nlohmann::json to_json() const;
  // Throws std::invalid_argument on unknown keys or wrong types.
  static Fault from_json(const nlohmann::json& j);
};

// Thread-safe list of pending faults, consumed as matching requests arrive.
class FaultInjector {
 public:
  void add(Fault fault);
  // Shortcuts for the common cases.
  void fail_next(std::string route, int status, int times = 1);
  void cut_next(std::string route, std::int64_t after_bytes = -1, int times = 1);
  void delay_next(std::string route, std::chrono::milliseconds delay, int times = 1);
  void clear();
  std::vector<Fault> pending() const;

  // The first rule matching `route`, with one use consumed; nullopt when none applies.
  std::optional<Fault> take(std::string_view route);

 private:
  mutable std::mutex mutex_;
  std::vector<Fault> faults_;
};

}  // namespace falcon::fake
