// FabricCounters: what the layer did, counted for `falcon serve`'s /metrics (issue 13).
//
// The library counts through this seam, never through globals: give one in
// FabricDependencies::counters and the fabric feeds it (xpk calls by verb and result; Cloud
// Logging reads and their 429 answers; bytes uploaded to Cloud Storage); leave it null and
// nothing is counted. Thread-safe; counting costs one atomic add or a short lock.
//
//   auto counters = std::make_shared<falcon::FabricCounters>();
//   falcon::FabricDependencies deps;
//   deps.counters = counters;
//   falcon::ClusterFabric fabric("repos.yaml", deps);
//   ...
//   const falcon::FabricCounters::Snapshot s = counters->snapshot();
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace falcon {

class HttpClient;

class FabricCounters {
 public:
  // Results of an xpk call: "ok" (exit 0), "failed" (another exit code), "timeout" (killed at
  // its deadline), "start_error" (the binary could not be started).
  void xpk_call(std::string_view verb, std::string_view result);
  // One entries:list request to Cloud Logging answered with HTTP `status` (0: no answer).
  void logging_read(int status);
  // Bytes of a request body sent to a Cloud Storage upload (a chunk or a whole object).
  void upload_bytes(std::uint64_t bytes);

  struct Snapshot {
    std::map<std::pair<std::string, std::string>, std::uint64_t> xpk_calls;  // (verb, result)
    std::uint64_t logging_reads = 0;         // every entries:list request sent (the sum)
    std::uint64_t logging_ok = 0;            // answered 2xx
    std::uint64_t logging_rate_limited = 0;  // answered 429
    std::uint64_t logging_failed = 0;        // answered another non-2xx, or no answer
    std::uint64_t upload_requests = 0;
    std::uint64_t upload_bytes = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> xpk_calls_;
  std::atomic<std::uint64_t> logging_ok_{0};
  std::atomic<std::uint64_t> logging_rate_limited_{0};
  std::atomic<std::uint64_t> logging_failed_{0};
  std::atomic<std::uint64_t> upload_requests_{0};
  std::atomic<std::uint64_t> upload_bytes_{0};
};

// An HttpClient that forwards to `inner` and counts into `counters`: a request whose URL path
// ends in /entries:list is a Logging read (its status counted), a POST or PUT whose path starts
// with /upload/storage/ is an upload (its body's bytes counted). `counters` null: `inner`.
std::shared_ptr<HttpClient> make_counting_http_client(std::shared_ptr<HttpClient> inner,
                                                      std::shared_ptr<FabricCounters> counters);

}  // namespace falcon
