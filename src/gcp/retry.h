// Retry = policy + backoff + idempotency, in one small loop (STYLE: "don't build a framework").
//
//   RetryOptions options{.policy = RetryPolicy::for_logging(),
//                        .call = "entries:list for projects/p", .clock = clock.get(),
//                        .credentials = credentials.get()};
//   HttpResponse response = send_with_retry(*http, request, options);  // 2xx, or throws
//
// Transient failures are HTTP 408, 429, 5xx and transport errors (no response at all). They are
// retried only for idempotent calls, with exponential backoff, jitter and a cap, within both an
// attempt limit and a total deadline. A google.rpc.RetryInfo `retryDelay` in an error body is the
// least a wait lasts. Sleeping goes through the injected Clock, so tests never really wait.
//
// A 429 on a policy with a quota backoff (Cloud Logging's read quota, shared by every reader of
// the project) is not a failure of the request: it is waited out, with a backoff that grows with
// each 429, until the call's deadline, and it does not use up the attempt limit.
//
// send_with_retry sends one request. run_with_retry is the same loop for a call that is a
// conversation, such as a resumable upload's chunks and status queries: the caller builds each
// request and says what each answer means, and the loop keeps the budget, the backoff, the
// deadline, the 401 refresh and the messages.
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
  // Quota backoff for 429. When quota_backoff > 0, a 429 is waited out until the deadline
  // without counting against max_attempts, and the k-th 429 waits
  // min(b * multiplier^k, quota_max_backoff), jittered as above, where b is quota_backoff, or
  // initial_backoff when the server sent a RetryInfo (which is then the least the wait lasts).
  // 0: a 429 is a transient failure like any other.
  std::chrono::milliseconds quota_backoff{0};
  std::chrono::milliseconds quota_max_backoff{0};

  // Cloud Logging reads: 6 attempts in 5 minutes, 0.5 s x2 up to 30 s; 429s waited out for those
  // 5 minutes: 20 s, 40 s, then 60 s, or from the RetryInfo: at least it, 0.5 s x2 up to 60 s.
  static RetryPolicy for_logging();
  // Cloud Storage: 8 attempts in 15 minutes, 1 s x2 up to 32 s (GCS's documented strategy).
  static RetryPolicy for_storage();
  // OAuth token and metadata endpoints: 3 attempts in 1 minute, 1 s x2, 10% jitter.
  static RetryPolicy for_token();
};

// The waits between attempts under one policy. Not thread-safe; one per call.
class Backoff {
 public:
  // `seed` feeds the jitter; 0 picks a random seed.
  Backoff(const RetryPolicy& policy, std::uint64_t seed);

  // The wait after a failure with `http_status` (0 for a transport error). `retry_delay` is the
  // server's RetryInfo: the wait is never shorter.
  std::chrono::milliseconds next(int http_status,
                                 std::optional<std::chrono::milliseconds> retry_delay);

 private:
  std::chrono::milliseconds jittered(double wait_ms);

  RetryPolicy policy_;
  std::mt19937_64 rng_;
  int failures_ = 0;
  int quota_failures_ = 0;
};

// A wait about to start, for a caller that tells its user why nothing happens.
struct RetryWait {
  enum class Cause {
    kFailure,        // a transient failure (is_transient_http_status, transport) before another
    kQuotaExceeded,  // the server answered 429 on a quota policy: waited out until the deadline
    kRateLimit,      // the client's own read limiter (LoggingClient): the rate is spent for now
  };
  Cause cause = Cause::kFailure;
  std::string call;     // the request, as errors name it
  int http_status = 0;  // the failure: 429, 503, ...; 0 for a transport error or kRateLimit
  std::string status;   // its google.rpc name when known ("RESOURCE_EXHAUSTED")
  std::string problem;  // the server's message, the transport error, or who shares the rate
  std::string project;  // Logging reads: the project whose read quota it is (else empty)
  std::string warning;  // kRateLimit: why the rate is not shared as configured (at most once)
  std::chrono::milliseconds wait{0};       // the wait about to start
  std::chrono::milliseconds waited{0};     // already waited in this call, before this wait
  std::chrono::milliseconds time_left{0};  // until the call's deadline, once this wait is over
  int failed_attempts = 0;                 // counted against max_attempts so far (not 429s)
  int max_attempts = 0;
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
  // Called before every wait between attempts (on the calling thread). Optional.
  std::function<void(const RetryWait&)> on_wait;
  // true: a final non-2xx response throws LogRetrievalError. false: it is returned.
  bool throw_on_error = true;
};

// What an answer means to run_with_retry.
enum class Outcome {
  kDone,      // return it
  kContinue,  // send the next request at once: progress, not a failure
  kRetry,     // a transient failure: wait, then send the next request (after_failure = true)
  kFail,      // a permanent failure: throw it (or return it when throw_on_error is false)
};

struct Verdict {
  Outcome outcome = Outcome::kDone;
  // For kRetry and kFail: what went wrong, in place of the server's error message (e.g. "the
  // server keeps committing nothing"). Empty: the error body says it.
  std::string problem;
};

// The caller's side of a call made of several requests.
struct RetryHooks {
  // Required. The request of the next attempt; `after_failure` is true after a transient failure
  // (a resumable upload then asks the session where it is instead of resending).
  std::function<HttpRequest(bool after_failure)> next_request;
  // Names the request last built, for messages. Null: RetryOptions::call.
  std::function<std::string()> call;
  // Called after every send with the request that went out, response or not (e.g. to take its
  // body back). Optional.
  std::function<void(HttpRequest&)> after_send;
  // What a response means. Null: 2xx done, transient statuses retried, the rest failed. May
  // throw LogRetrievalError for a protocol error of its own.
  std::function<Verdict(const HttpResponse&)> classify;
};

// The loop. A 401 with credentials invalidates the token and repeats the request once, at once.
// A transient failure (a kRetry, a transport error) of an idempotent call waits (Backoff, at
// least RetryInfo, options.on_wait told first) and goes on while the attempt limit and the
// deadline allow; a 429 on a quota policy only needs the deadline (see RetryPolicy). Each
// request's timeout is shortened so that no attempt outlives the deadline. Blocks.
// Returns the response classified kDone (or, throw_on_error false, the last failed one).
// Throws LogRetrievalError: for a failure that is permanent or the last one, with its HTTP
// status, google.rpc status name and message (0 and UNAVAILABLE for a transport error); for
// credential failures; and whatever the hooks throw. Messages name the call and never contain a
// token.
HttpResponse run_with_retry(HttpClient& http, const RetryOptions& options, const RetryHooks& hooks);

// run_with_retry of one request, sent again as it is after each failure: the 2xx response.
// Thread-safe as long as `http` and the callbacks are.
HttpResponse send_with_retry(HttpClient& http, HttpRequest request, const RetryOptions& options);

}  // namespace falcon::gcp
