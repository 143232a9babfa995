#include "gcp/retry.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "gcp/api_error.h"
#include "gcp/credentials.h"

namespace falcon::gcp {

using std::chrono::milliseconds;

RetryPolicy RetryPolicy::for_logging() {
  RetryPolicy p;
  p.max_attempts = 6;
  p.deadline = milliseconds(5 * 60'000);
  p.initial_backoff = milliseconds(500);
  p.max_backoff = milliseconds(30'000);
  p.multiplier = 2.0;
  p.jitter = 0.25;
  p.quota_backoff = milliseconds(20'000);
  p.quota_max_backoff = milliseconds(60'000);
  return p;
}

RetryPolicy RetryPolicy::for_storage() {
  RetryPolicy p;
  p.max_attempts = 8;
  p.deadline = milliseconds(15 * 60'000);
  p.initial_backoff = milliseconds(1'000);
  p.max_backoff = milliseconds(32'000);
  p.multiplier = 2.0;
  p.jitter = 0.5;
  return p;
}

RetryPolicy RetryPolicy::for_token() {
  RetryPolicy p;
  p.max_attempts = 3;
  p.deadline = milliseconds(60'000);
  p.initial_backoff = milliseconds(1'000);
  p.max_backoff = milliseconds(10'000);
  p.multiplier = 2.0;
  p.jitter = 0.1;
  return p;
}

bool is_transient_status(int http_status) {
  return http_status == 408 || http_status == 429 || (http_status >= 500 && http_status <= 599);
}

Backoff::Backoff(const RetryPolicy& policy, std::uint64_t seed)
    : policy_(policy), rng_(seed != 0 ? seed : std::random_device{}()) {}

milliseconds Backoff::jittered(double wait_ms) {
  const double jitter = std::clamp(policy_.jitter, 0.0, 1.0);
  std::uniform_real_distribution<double> factor(1.0 - jitter, 1.0);
  return milliseconds(static_cast<std::int64_t>(std::llround(wait_ms * factor(rng_))));
}

milliseconds Backoff::next(int http_status, std::optional<milliseconds> retry_delay) {
  if (retry_delay) {
    // The server said how long; still count the failure so later waits keep growing.
    if (http_status == 429)
      ++quota_failures_;
    else
      ++failures_;
    return *retry_delay;
  }
  const double multiplier = std::max(1.0, policy_.multiplier);
  if (http_status == 429 && policy_.quota_backoff.count() > 0) {
    const double cap =
        static_cast<double>(std::max(policy_.quota_max_backoff, policy_.quota_backoff).count());
    const double wait = std::min(cap, static_cast<double>(policy_.quota_backoff.count()) *
                                          std::pow(multiplier, quota_failures_));
    ++quota_failures_;
    return jittered(wait);
  }
  const double cap = static_cast<double>(policy_.max_backoff.count());
  const double wait = std::min(
      cap, static_cast<double>(policy_.initial_backoff.count()) * std::pow(multiplier, failures_));
  ++failures_;
  return jittered(wait);
}

HttpResponse send_with_retry(HttpClient& http, HttpRequest request, const RetryOptions& options) {
  const Clock& clock = *options.clock;
  const auto deadline = clock.steady_now() + options.policy.deadline;
  const auto original_timeout = request.timeout;
  const int max_attempts = std::max(1, options.policy.max_attempts);
  const bool idempotent = options.idempotency == Idempotency::kIdempotent;
  Backoff backoff(options.policy, options.seed);
  bool refreshed_after_401 = false;

  for (int attempt = 1;; ++attempt) {
    if (options.before_attempt) options.before_attempt();
    if (options.credentials != nullptr) options.credentials->authorize(request.headers);
    const auto remaining = std::chrono::duration_cast<milliseconds>(deadline - clock.steady_now());
    request.timeout = std::min(original_timeout, std::max(remaining, milliseconds(1'000)));

    std::optional<HttpResponse> response;
    std::string transport_error;
    try {
      response = http.send(request);
    } catch (const HttpTransportError& e) {
      transport_error = e.what();
    }

    if (response) {
      if (response->status == 401 && options.credentials != nullptr && !refreshed_after_401) {
        refreshed_after_401 = true;
        options.credentials->invalidate();
        --attempt;
        continue;
      }
      const bool retry = idempotent && is_transient_status(response->status);
      if (!retry) {
        if (is_success(response->status) || !options.throw_on_error) return std::move(*response);
        throw_api_error(options.call, *response);
      }
    } else if (!idempotent) {
      throw LogRetrievalError(fmt::format("{} failed: {}", options.call, transport_error), 0,
                              "UNAVAILABLE");
    }

    // A transient failure of an idempotent call: wait and try again, if the budget allows.
    std::optional<milliseconds> retry_delay;
    const int status = response ? response->status : 0;
    if (response) retry_delay = parse_api_error(status, response->body).retry_delay;
    std::string exhausted;
    milliseconds wait{0};
    if (attempt >= max_attempts) {
      exhausted = fmt::format("gave up after {} attempts", attempt);
    } else {
      wait = backoff.next(status, retry_delay);
      if (clock.steady_now() + wait > deadline) {
        exhausted = fmt::format(
            "gave up after {} attempts: the next wait of {} ms would pass "
            "the {} s deadline",
            attempt, wait.count(), options.policy.deadline.count() / 1000);
      }
    }
    if (!exhausted.empty()) {
      if (!response) {
        throw LogRetrievalError(
            fmt::format("{} failed: {} ({})", options.call, transport_error, exhausted), 0,
            "UNAVAILABLE");
      }
      if (!options.throw_on_error) return std::move(*response);
      const ApiError error = parse_api_error(status, response->body);
      throw LogRetrievalError(
          fmt::format("{} ({})", describe_api_error(options.call, error), exhausted), status,
          error.status);
    }
    clock.sleep_for(wait);
  }
}

}  // namespace falcon::gcp
