// Everything a CloudLogRetriever is built from, with the internal types the public
// LogRetrieverOptions leaves out. The public constructor derives it from LogRetrieverOptions
// (endpoints, Application Default Credentials, quotas, the shared read limiter); tests and
// benchmarks build it themselves, to point the clients at a local server, use fixed credentials,
// a fake clock, a limiter of their own or short retry policies, and call make_retriever.
//
//   logs::RetrieverOptions options = logs::make_retriever_options(public_options,
//                                                                 gcp::current_environment());
//   options.logging.retry.max_attempts = 3;
//   CloudLogRetriever retriever = logs::make_retriever(std::move(options));
#pragma once

#include <cstddef>
#include <memory>

#include "falcon/clock.h"
#include "falcon/log_retriever.h"
#include "gcp/endpoints.h"
#include "gcp/logging_admin_client.h"
#include "gcp/logging_client.h"
#include "gcp/storage_client.h"
#include "logs/rank_splitter.h"

namespace falcon::logs {

struct RetrieverOptions {
  // Cloud Logging reads. reads_per_minute is the per-project rate the read limiter keeps to;
  // page_size is always 1000 (or less for a short tail).
  gcp::LoggingClientOptions logging;
  // Cloud Storage writes. upload_chunk_bytes is the largest chunk an export uses per rank (the
  // client's own default is 8 MiB; make_retriever_options takes GcpSettings', 256 KiB).
  gcp::StorageClientOptions storage;
  // What the chunk buffers of one export may hold in total, however many ranks it writes: each
  // rank's chunk is this divided by the number of ranks, rounded down to a multiple of 256 KiB,
  // at least 256 KiB (the protocol's minimum) and at most storage.upload_chunk_bytes.
  std::size_t export_buffer_bytes = std::size_t{64} << 20;
  // entries:copy, operations, log buckets and settings (the copy path; no read quota).
  gcp::LoggingAdminClientOptions admin;
  // The copy and sink paths: log_archive*, log_copy* (GcpSettings).
  GcpSettings export_settings;
  // How the copy and sink paths split staged objects per rank.
  SplitterOptions splitter;
  // Timestamps ("now" for the default 24-hour window, exported_at) and follow's waits.
  std::shared_ptr<Clock> clock;
  // Told of waits (LogWaitNotice), through logging.on_wait and storage.on_wait unless those are
  // set already. Optional.
  LogWaitHandler on_wait;
};

// Options for the real service (or whatever the settings and environment point at): endpoints
// from resolve_endpoints(settings, env); credentials resolved lazily by
// make_default_credentials; reads limited to settings.logging_reads_per_minute per project by a
// SharedReadLimiter on options.quota_dir (a ProjectRateLimiters of the retriever's own when it is
// empty); requests timed out after settings.http_timeout_s; chunks of settings.upload_chunk_bytes
// rounded down to a multiple of 256 KiB. Never blocks or throws for missing credentials (they are
// looked for on the first request).
RetrieverOptions make_retriever_options(const LogRetrieverOptions& options,
                                        const gcp::Environment& env);

// A retriever on exactly these clients. Throws std::invalid_argument when the options lack an
// HTTP client or a clock.
CloudLogRetriever make_retriever(RetrieverOptions options);

// The LogWaitNotice, message included, for a wait of the Logging or Storage client.
LogWaitNotice describe_wait(const gcp::RetryWait& wait);

}  // namespace falcon::logs
