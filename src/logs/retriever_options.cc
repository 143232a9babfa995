#include "logs/retriever_options.h"

#include <algorithm>

#include <fmt/format.h>

#include "gcp/credentials.h"
#include "gcp/rate_limiter.h"

namespace falcon::logs {
namespace {

using std::chrono::milliseconds;

// "0.5 s", "12 s", "3 min", "4 min 20 s".
std::string duration_text(milliseconds d) {
  if (d < milliseconds(10'000))
    return fmt::format("{:.1f} s", std::max<double>(0, d.count()) / 1000);
  const std::int64_t seconds = (d.count() + 500) / 1000;
  if (seconds < 120) return fmt::format("{} s", seconds);
  if (seconds % 60 == 0) return fmt::format("{} min", seconds / 60);
  return fmt::format("{} min {} s", seconds / 60, seconds % 60);
}

std::string http_failure(const gcp::RetryWait& wait) {
  if (wait.http_status == 0) return wait.problem;
  std::string out = fmt::format("HTTP {}", wait.http_status);
  if (!wait.status.empty()) out += " " + wait.status;
  if (!wait.problem.empty()) out += ": " + wait.problem;
  return out;
}

}  // namespace

LogWaitNotice describe_wait(const gcp::RetryWait& wait) {
  LogWaitNotice notice;
  notice.project = wait.project;
  notice.wait = wait.wait;
  notice.waited = wait.waited;
  notice.time_left = wait.time_left;
  const std::string waited =
      wait.waited.count() > 0 ? fmt::format("waited {} so far; ", duration_text(wait.waited)) : "";
  switch (wait.cause) {
    case gcp::RetryWait::Cause::kQuotaExceeded:
      notice.reason = LogWaitNotice::Reason::kQuotaExceeded;
      notice.message = fmt::format(
          "the Cloud Logging read quota of project {} is spent (HTTP 429{}), by falcon or other "
          "readers of the project; waiting {} before reading again ({}gives up in {})",
          wait.project, wait.status.empty() ? "" : " " + wait.status, duration_text(wait.wait),
          waited, duration_text(wait.time_left));
      break;
    case gcp::RetryWait::Cause::kRateLimit:
      if (!wait.warning.empty()) {
        notice.reason = LogWaitNotice::Reason::kReadRateNotShared;
        notice.message = wait.warning;
      } else {
        notice.reason = LogWaitNotice::Reason::kReadRateShared;
        notice.message = fmt::format(
            "waiting {} for the Cloud Logging read quota of project {}: "
            "gcp.logging_reads_per_minute allows {}",
            duration_text(wait.wait), wait.project, wait.problem);
      }
      break;
    case gcp::RetryWait::Cause::kFailure:
      notice.reason = LogWaitNotice::Reason::kRetrying;
      notice.message = fmt::format(
          "{} failed ({}); trying again in {} (attempt {} of {} failed; {}gives up in {})",
          wait.call, http_failure(wait), duration_text(wait.wait), wait.failed_attempts,
          wait.max_attempts, waited, duration_text(wait.time_left));
      break;
  }
  return notice;
}

RetrieverOptions make_retriever_options(const LogRetrieverOptions& public_options,
                                        const gcp::Environment& env) {
  const GcpSettings& settings = public_options.settings;
  const gcp::GcpEndpoints endpoints = gcp::resolve_endpoints(settings, env);
  auto credentials =
      gcp::make_default_credentials(settings, env, public_options.http, public_options.clock);
  const std::chrono::milliseconds timeout(std::max(1, settings.http_timeout_s) * 1000LL);

  RetrieverOptions options;
  options.logging.endpoint = endpoints.logging;
  options.logging.http = public_options.http;
  options.logging.credentials = credentials;
  options.logging.clock = public_options.clock;
  if (!public_options.quota_dir.empty()) {
    options.logging.rate_limiters =
        std::make_shared<gcp::SharedReadLimiter>(public_options.quota_dir, public_options.clock);
  }
  options.logging.reads_per_minute = std::max(1, settings.logging_reads_per_minute);
  options.logging.request_timeout = timeout;

  options.storage.endpoint = endpoints.storage;
  options.storage.http = public_options.http;
  options.storage.credentials = std::move(credentials);
  options.storage.clock = public_options.clock;
  options.storage.request_timeout = std::max(timeout, options.storage.request_timeout);
  const std::size_t chunk = static_cast<std::size_t>(std::max(settings.upload_chunk_bytes, 0)) /
                            gcp::kUploadQuantum * gcp::kUploadQuantum;
  options.storage.upload_chunk_bytes = std::max(chunk, gcp::kUploadQuantum);

  options.admin.endpoint = endpoints.logging;
  options.admin.http = public_options.http;
  options.admin.credentials = options.storage.credentials;
  options.admin.clock = public_options.clock;
  options.admin.request_timeout = timeout;
  options.export_settings = settings;

  options.clock = public_options.clock;
  options.on_wait = public_options.on_wait;
  return options;
}

}  // namespace falcon::logs
