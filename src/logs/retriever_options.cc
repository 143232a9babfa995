#include "logs/retriever_options.h"

#include <algorithm>

#include "gcp/credentials.h"

namespace falcon::logs {

RetrieverOptions make_retriever_options(std::shared_ptr<HttpClient> http,
                                        const GcpSettings& settings, std::shared_ptr<Clock> clock,
                                        const gcp::Environment& env) {
  const gcp::GcpEndpoints endpoints = gcp::resolve_endpoints(settings, env);
  auto credentials = gcp::make_default_credentials(settings, env, http, clock);
  const std::chrono::milliseconds timeout(std::max(1, settings.http_timeout_s) * 1000LL);

  RetrieverOptions options;
  options.logging.endpoint = endpoints.logging;
  options.logging.http = http;
  options.logging.credentials = credentials;
  options.logging.clock = clock;
  options.logging.reads_per_minute = std::max(1, settings.logging_reads_per_minute);
  options.logging.request_timeout = timeout;

  options.storage.endpoint = endpoints.storage;
  options.storage.http = std::move(http);
  options.storage.credentials = std::move(credentials);
  options.storage.clock = clock;
  options.storage.request_timeout = std::max(timeout, options.storage.request_timeout);
  const std::size_t chunk = static_cast<std::size_t>(std::max(settings.upload_chunk_bytes, 0)) /
                            gcp::kUploadQuantum * gcp::kUploadQuantum;
  options.storage.upload_chunk_bytes = std::max(chunk, gcp::kUploadQuantum);

  options.clock = std::move(clock);
  return options;
}

}  // namespace falcon::logs
