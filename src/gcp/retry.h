// Retry = policy + backoff + idempotency, in one small helper (STYLE: "don't build a framework").
//
//   RetryOptions options{.policy = RetryPolicy::for_logging(),
//                        .call = "entries:list for projects/p", .clock = clock.get(),
//                        .credentials = credentials.get()};
//   HttpResponse response = send_with_retry(*http, request, options);  // 2xx, or throws
//
// Transient failures are HTTP 408, 429, 5xx and transport errors (no response at all). They are
// retried only for idempotent calls, with exponential backoff, jitter and a cap, within both an
// attempt limit and a total deadline. A 429 may get its own long, quota-aware backoff (Cloud
// Logging's read quota is per minute), and a google.rpc.RetryInfo `retryDelay` in an error body
// always sets the wait. Sleeping goes through the injected Clock, so tests never really wait.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "falcon/clock.h"
#include "falcon/http_client.h"

namespace falcon::gcp {

class Credentials;

enum class Idempotency { kIdempotent, kNonIdempotent };

struct RetryPolicy {
  int max_attempts = 6;                              // including the first; at least 1
  std::chrono::milliseconds deadline{10 * 60'000};   // from the first attempt, sleeps included
  std::chrono::milliseconds initial_backoff{1'000};  // the wait after the first failure
  std::chrono::milliseconds max_backoff{32'000};     // cap of the ordinary backoff
  double multiplier = 2.0;                           // growth per failure
  double jitter = 0.5;  // each wait is drawn uniformly from [w * (1 - jitter), w]
  // Quota backoff for 429: when quota_backoff > 0, the k-th 429 waits
  // min(quota_backoff * multiplier^k, quota_max_backoff), jittered as above. 0: a 429 backs off
  // like any other transient failure.
  std::chrono::milliseconds quota_backoff{0};
  std::chrono::milliseconds quota_max_backoff{0};

  // Cloud Logging reads: 6 attempts in 5 minutes, 0.5 s x2 up to 30 s; 429 waits 20 s, 40 s,
  // then 60 s (RetryInfo wins when present).
  static RetryPolicy for_logging();
  // Cloud Storage: 8 attempts in 15 minutes, 1 s x2 up to 32 s (GCS's documented strategy).
  static RetryPolicy for_storage();
  // OAuth token and metadata endpoints: 3 attempts in 1 minute, 1 s x2, 10% jitter.
  static RetryPolicy for_token();
};

// True for the HTTP statuses worth retrying: 408, 429 and 5xx.
bool is_transient_status(int http_status);

// The waits between attempts under one policy. Not thread-safe; one per call.
class Backoff {
 public:
  // `seed` feeds the jitter; 0 picks a random seed.
  Backoff(const RetryPolicy& policy, std::uint64_t seed);

  // The wait after a failure with `http_status` (0 for a transport error). `retry_delay` is the
  // server's RetryInfo, which is returned as it is when present.
  std::chrono::milliseconds next(int http_status,
                                 std::optional<std::chrono::milliseconds> retry_delay);

 private:
  std::chrono::milliseconds jittered(double wait_ms);

  RetryPolicy policy_;
  std::mt19937_64 rng_;
  int failures_ = 0;
  int quota_failures_ = 0;
};

struct RetryOptions {
  RetryPolicy policy;
  Idempotency idempotency = Idempotency::kIdempotent;
  std::string call;              // names the call in errors: "entries:list for projects/p"
  const Clock* clock = nullptr;  // required: deadlines and sleeps
  std::uint64_t seed = 0;        // jitter; 0 picks a random seed
  // When set, every attempt carries its Authorization header; a 401 invalidates the cached token
  // and the call is tried once more at once (not counted as an attempt).
  Credentials* credentials = nullptr;
  // Called before every attempt, e.g. to take a permit from a rate limiter. May block.
  std::function<void()> before_attempt;
  // true: a final non-2xx response throws LogRetrievalError. false: it is returned.
  bool throw_on_error = true;
};

// Sends `request` through `http`, retrying transient failures as described above. The request's
// timeout is shortened so that no attempt outlives the policy's deadline. Blocks (sleeps on
// options.clock between attempts).
// Returns the final response: 2xx, or (throw_on_error false) whatever came last.
// Throws LogRetrievalError: for a final non-2xx response (throw_on_error true) with its HTTP
// status, google.rpc status name and message; for a transport error that was not retried or
// was the last one (http_status 0); and for credential failures. Messages name options.call
// and never contain a token. Thread-safe as long as `http` and the callbacks are.
HttpResponse send_with_retry(HttpClient& http, HttpRequest request, const RetryOptions& options);

}  // namespace falcon::gcp
