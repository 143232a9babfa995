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

Backoff::Backoff(const RetryPolicy& policy, std::uint64_t seed)
    : policy_(policy), rng_(seed != 0 ? seed : std::random_device{}()) {}

milliseconds Backoff::jittered(double wait_ms) {
  const double jitter = std::clamp(policy_.jitter, 0.0, 1.0);
  std::uniform_real_distribution<double> factor(1.0 - jitter, 1.0);
  return milliseconds(static_cast<std::int64_t>(std::llround(wait_ms * factor(rng_))));
}

milliseconds Backoff::next(int http_status, std::optional<milliseconds> retry_delay) {
  const double multiplier = std::max(1.0, policy_.multiplier);
  milliseconds wait{0};
  if (http_status == 429 && policy_.quota_backoff.count() > 0) {
    // With a RetryInfo the server says when; the backoff only spreads out repeated 429s.
    const milliseconds base = retry_delay ? policy_.initial_backoff : policy_.quota_backoff;
    const double cap =
        static_cast<double>(std::max(policy_.quota_max_backoff, policy_.quota_backoff).count());
    wait = jittered(
        std::min(cap, static_cast<double>(base.count()) * std::pow(multiplier, quota_failures_)));
    ++quota_failures_;
  } else {
    const double cap = static_cast<double>(policy_.max_backoff.count());
    wait = jittered(std::min(cap, static_cast<double>(policy_.initial_backoff.count()) *
                                      std::pow(multiplier, failures_)));
    ++failures_;
  }
  return retry_delay ? std::max(wait, *retry_delay) : wait;
}

namespace {

Verdict default_verdict(const HttpResponse& response) {
  if (is_success(response.status)) return {Outcome::kDone, {}};
  return {is_transient_http_status(response.status) ? Outcome::kRetry : Outcome::kFail, {}};
}

// "entries:list for projects/p failed: HTTP 503 UNAVAILABLE: busy", or with the caller's
// description of the problem in place of the server's message.
std::string describe_failure(const std::string& call, const HttpResponse& response,
                             const std::string& problem, ApiError* error_out) {
  ApiError error = parse_api_error(response.status, response.body);
  if (!problem.empty()) error.message = problem;
  std::string text = problem.empty() || response.status != 308
                         ? describe_api_error(call, error)
                         : fmt::format("{} failed: {}", call, problem);
  *error_out = std::move(error);
  return text;
}

std::string format_wait(milliseconds wait) {
  if (wait < milliseconds(10'000)) return fmt::format("{:.1f} s", wait.count() / 1000.0);
  return fmt::format("{} s", (wait.count() + 500) / 1000);
}

}  // namespace

HttpResponse run_with_retry(HttpClient& http, const RetryOptions& options,
                            const RetryHooks& hooks) {
  const Clock& clock = *options.clock;
  const auto deadline = clock.steady_now() + options.policy.deadline;
  const int max_attempts = std::max(1, options.policy.max_attempts);
  const bool idempotent = options.idempotency == Idempotency::kIdempotent;
  const bool quota_policy = options.policy.quota_backoff.count() > 0;
  Backoff backoff(options.policy, options.seed);
  bool refreshed_after_401 = false;
  bool after_failure = false;
  int attempts = 0;         // every request sent but the 401 repeat
  int failed_attempts = 0;  // those that count against max_attempts
  milliseconds waited{0};

  for (;;) {
    HttpRequest request = hooks.next_request(after_failure);
    after_failure = false;
    const std::string call = hooks.call ? hooks.call() : options.call;
    if (options.before_attempt) options.before_attempt();
    if (options.credentials != nullptr) options.credentials->authorize(request.headers);
    const auto remaining = std::chrono::duration_cast<milliseconds>(deadline - clock.steady_now());
    request.timeout = std::min(request.timeout, std::max(remaining, milliseconds(1'000)));

    std::optional<HttpResponse> response;
    std::string transport_error;
    try {
      response = http.send(request);
    } catch (const HttpTransportError& e) {
      transport_error = e.what();
    } catch (...) {
      if (hooks.after_send) hooks.after_send(request);
      throw;
    }
    if (hooks.after_send) hooks.after_send(request);
    ++attempts;

    Verdict verdict{Outcome::kRetry, {}};
    if (response) {
      if (response->status == 401 && options.credentials != nullptr && !refreshed_after_401) {
        refreshed_after_401 = true;
        options.credentials->invalidate();
        --attempts;
        continue;
      }
      verdict = hooks.classify ? hooks.classify(*response) : default_verdict(*response);
      if (verdict.outcome == Outcome::kDone) return std::move(*response);
      if (verdict.outcome == Outcome::kContinue) continue;
      if (verdict.outcome == Outcome::kRetry && !idempotent) verdict.outcome = Outcome::kFail;
      if (verdict.outcome == Outcome::kFail) {
        if (!options.throw_on_error) return std::move(*response);
        ApiError error;
        const std::string text = describe_failure(call, *response, verdict.problem, &error);
        throw LogRetrievalError(text, response->status, error.status);
      }
    } else if (!idempotent) {
      throw LogRetrievalError(fmt::format("{} failed: {}", call, transport_error), 0,
                              "UNAVAILABLE");
    }

    // A transient failure of an idempotent call: wait and try again, if the budget allows.
    const int status = response ? response->status : 0;
    const bool quota = quota_policy && status == 429;
    if (!quota) ++failed_attempts;
    std::optional<ApiError> api_error;
    if (response) api_error = parse_api_error(status, response->body);
    std::string exhausted;
    milliseconds wait{0};
    if (!quota && failed_attempts >= max_attempts) {
      exhausted = fmt::format("gave up after {} attempts", attempts);
    } else {
      wait = backoff.next(status, api_error ? api_error->retry_delay : std::nullopt);
      if (clock.steady_now() + wait > deadline) {
        exhausted = fmt::format(
            "gave up after {} attempts: the next wait of {} would pass the {} s deadline", attempts,
            format_wait(wait), options.policy.deadline.count() / 1000);
      }
    }
    if (!exhausted.empty()) {
      if (!response) {
        throw LogRetrievalError(fmt::format("{} failed: {} ({})", call, transport_error, exhausted),
                                0, "UNAVAILABLE");
      }
      if (!options.throw_on_error) return std::move(*response);
      ApiError error;
      const std::string text = describe_failure(call, *response, verdict.problem, &error);
      throw LogRetrievalError(fmt::format("{} ({})", text, exhausted), status, error.status);
    }
    if (options.on_wait) {
      RetryWait notice;
      notice.call = call;
      notice.http_status = status;
      notice.cause = quota ? RetryWait::Cause::kQuotaExceeded : RetryWait::Cause::kFailure;
      if (api_error) {
        notice.status = api_error->status;
        notice.problem = verdict.problem.empty() ? api_error->message : verdict.problem;
      } else {
        notice.problem = transport_error;
      }
      notice.wait = wait;
      notice.waited = waited;
      notice.time_left =
          std::chrono::duration_cast<milliseconds>(deadline - clock.steady_now()) - wait;
      notice.failed_attempts = failed_attempts;
      notice.max_attempts = max_attempts;
      options.on_wait(notice);
    }
    clock.sleep_for(wait);
    waited += wait;
    after_failure = true;
  }
}

HttpResponse send_with_retry(HttpClient& http, HttpRequest request, const RetryOptions& options) {
  RetryHooks hooks;
  hooks.next_request = [&request](bool) { return request; };
  return run_with_retry(http, options, hooks);
}

}  // namespace falcon::gcp
