// Shared by the CloudLogRetriever tests: realistic GKE container log entries (the labels and
// names of reference/xpk.md sections 4.2-4.3) and a local Google-protocol server wired to a
// retriever with fixed credentials, a fake clock (the server's too) and a private rate limiter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/http_client.h"
#include "falcon/log_retriever.h"
#include "falcon/model.h"
#include "gcp/credentials.h"
#include "gcp/rate_limiter.h"
#include "gcp/storage_client.h"
#include "gcp_server/gcp_server.h"
#include "logs/retriever_options.h"
#include "support/fake_clock.h"
#include "util/time_format.h"

namespace falcon::testing {

// 2026-04-13T07:00:00Z: an hour before FakeClock's start, inside the default 24-hour window.
inline constexpr std::int64_t kLogStartNanos = 1776063600LL * 1'000'000'000;

// Where a workload's pods run.
struct GkePlace {
  std::string project = "falcon-bench";
  std::string location = "us-central2-b";
  std::string cluster_id = "tpu-v4-cluster";
  std::string namespace_ = "default";
  std::string workload = "llama-bench";
};

enum class PodLabels {
  kGke,       // the pod labels as the managed GKE agent writes them (dots turned into '_')
  kNone,      // no pod labels at all: only the pod name says which rank it is
  kDotted,    // label keys with their dots kept (another agent): the pod name must decide
  kNoJobset,  // the job-index and completion-index labels, but not the jobset name
};

struct EntrySpec {
  int slice = 0;
  int worker = 0;
  std::int64_t timestamp_nanos = kLogStartNanos;
  std::string text;
  PodLabels labels = PodLabels::kGke;
  bool stderr_stream = false;
  bool json_payload = false;  // {"message": text, ...} instead of textPayload
  std::string insert_id;      // empty: derived from the other fields
};

// Five lowercase characters for a pod's random suffix, stable per (slice, worker).
inline std::string pod_suffix(int slice, int worker) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uint32_t h = 2166136261u ^ static_cast<std::uint32_t>(slice * 7919 + worker * 104729 + 17);
  std::string out;
  for (int i = 0; i < 5; ++i) {
    h = h * 16777619u + 0x9e3779b9u;
    out += kChars[(h >> 11) % 36];
  }
  return out;
}

inline std::string pod_name(const GkePlace& place, int slice, int worker) {
  return fmt::format("{}-slice-job-{}-{}-{}", place.workload, slice, worker,
                     pod_suffix(slice, worker));
}

// One k8s_container entry as GKE's logging agent writes it for a pod xpk created.
inline nlohmann::json gke_entry(const GkePlace& place, const EntrySpec& spec) {
  using nlohmann::json;
  const std::string pod = pod_name(place, spec.slice, spec.worker);
  const std::string job = fmt::format("{}-slice-job-{}", place.workload, spec.slice);
  json labels = {{"compute.googleapis.com/resource_name",
                  fmt::format("gke-{}-np-{}-{}", place.cluster_id, spec.slice, spec.worker)},
                 {"logging.gke.io/top_level_controller_name", place.workload},
                 {"logging.gke.io/top_level_controller_type", "JobSet"}};
  const std::string sep = spec.labels == PodLabels::kDotted ? "." : "_";
  const auto key = [&](const std::string& group, const std::string& name) {
    std::string g = group;
    if (sep == "_") std::replace(g.begin(), g.end(), '.', '_');
    return fmt::format("k8s-pod/{}/{}", g, name);
  };
  if (spec.labels != PodLabels::kNone) {
    if (spec.labels != PodLabels::kNoJobset) {
      labels[key("jobset.sigs.k8s.io", "jobset-name")] = place.workload;
    }
    labels[key("jobset.sigs.k8s.io", "jobset-uid")] = "5b3c1f0e-7d2a-4c3e-9a61-0d8f2f6b9e11";
    labels[key("jobset.sigs.k8s.io", "replicatedjob-name")] = "slice-job";
    labels[key("jobset.sigs.k8s.io", "replicatedjob-replicas")] = "2";
    labels[key("jobset.sigs.k8s.io", "restart-attempt")] = "0";
    labels[key("jobset.sigs.k8s.io", "job-index")] = std::to_string(spec.slice);
    labels[key("jobset.sigs.k8s.io", "job-global-index")] = std::to_string(spec.slice);
    labels[key("jobset.sigs.k8s.io", "job-key")] = "4f0a9d6c1b7e2a5d8c3f6e9b0a1d4c7f";
    labels[key("batch.kubernetes.io", "job-completion-index")] = std::to_string(spec.worker);
    labels[key("batch.kubernetes.io", "job-name")] = job;
    labels[key("batch.kubernetes.io", "controller-uid")] = "0c6b5a4e-3d2f-4b1a-8e9d-7c6b5a4e3d2f";
    labels["k8s-pod/job-name"] = job;
    labels["k8s-pod/controller-uid"] = "0c6b5a4e-3d2f-4b1a-8e9d-7c6b5a4e3d2f";
    labels[key("xpk.google.com", "workload")] = place.workload;
    labels[key("kueue.x-k8s.io", "podset")] = "slice-job";
  }
  json entry = {
      {"logName",
       fmt::format("projects/{}/logs/{}", place.project, spec.stderr_stream ? "stderr" : "stdout")},
      {"resource",
       {{"type", "k8s_container"},
        {"labels",
         {{"project_id", place.project},
          {"location", place.location},
          {"cluster_name", place.cluster_id},
          {"namespace_name", place.namespace_},
          {"pod_name", pod},
          {"container_name", "jax-tpu"}}}}},
      {"timestamp", format_rfc3339_nanos(spec.timestamp_nanos)},
      {"severity", spec.stderr_stream ? "ERROR" : "INFO"},
      {"labels", labels},
      {"insertId",
       spec.insert_id.empty()
           ? fmt::format("{}-{:x}-{:x}", pod_suffix(spec.slice, spec.worker), spec.timestamp_nanos,
                         std::hash<std::string>{}(place.project + '/' + place.cluster_id + '/' +
                                                  place.namespace_ + '/' + pod + '\n' + spec.text))
           : spec.insert_id}};
  if (spec.json_payload) {
    entry["jsonPayload"] = {{"message", spec.text}, {"step", 1}, {"logger", "train"}};
  } else {
    entry["textPayload"] = spec.text;
  }
  return entry;
}

// An HttpClient that records what is sent to entries:list (request and response bodies) and
// the order of every request, then passes it on.
class RecordingHttpClient final : public HttpClient {
 public:
  struct Exchange {
    std::string method;
    std::string url;
    std::string content_range;
    std::size_t request_bytes = 0;
    int status = 0;
    std::string range;          // the response's Range header (resumable upload status)
    std::string list_request;   // entries:list only
    std::string list_response;  // entries:list only
  };

  explicit RecordingHttpClient(std::shared_ptr<HttpClient> inner) : inner_(std::move(inner)) {}

  HttpResponse send(const HttpRequest& request) override {
    Exchange exchange{request.method, request.url,
                      request.headers.get("Content-Range").value_or(""), request.body.size()};
    const bool list = request.url.find("/v2/entries:list") != std::string::npos;
    if (list) exchange.list_request = request.body;
    try {
      HttpResponse response = inner_->send(request);
      exchange.status = response.status;
      exchange.range = response.headers.get("Range").value_or("");
      if (list) exchange.list_response = response.body;
      record(std::move(exchange));
      return response;
    } catch (...) {
      record(std::move(exchange));
      throw;
    }
  }

  std::vector<Exchange> exchanges() const {
    std::lock_guard lock(mutex_);
    return exchanges_;
  }
  // The parsed bodies of every entries:list request.
  std::vector<nlohmann::json> list_requests() const {
    std::vector<nlohmann::json> out;
    for (const Exchange& e : exchanges()) {
      if (!e.list_request.empty()) out.push_back(nlohmann::json::parse(e.list_request));
    }
    return out;
  }
  // How many entries the server sent back, over every entries:list response.
  std::size_t entries_received() const {
    std::size_t n = 0;
    for (const Exchange& e : exchanges()) {
      if (e.list_response.empty()) continue;
      const auto page = nlohmann::json::parse(e.list_response);
      if (page.contains("entries")) n += page["entries"].size();
    }
    return n;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    exchanges_.clear();
  }

 private:
  void record(Exchange exchange) {
    std::lock_guard lock(mutex_);
    exchanges_.push_back(std::move(exchange));
  }

  std::shared_ptr<HttpClient> inner_;
  mutable std::mutex mutex_;
  std::vector<Exchange> exchanges_;
};

// Sends every request on a new connection. libcurl silently replays a request whose reused
// connection died before any answer came; with no reuse, a cut connection reaches the caller.
class FreshConnectionHttpClient final : public HttpClient {
 public:
  HttpResponse send(const HttpRequest& request) override {
    return make_curl_http_client()->send(request);
  }
};

// A local Logging/Storage server on a free loopback port and what a retriever needs to use it.
class LogServerEnv {
 public:
  // The server runs on the same fake clock: its receiveTimestamps, its HTTP Date and its read
  // quota move with the client's waits.
  LogServerEnv() : LogServerEnv(fake::GcpServerOptions{}) {}
  // A server with these options (its clock is the env's fake clock), e.g. a read quota.
  explicit LogServerEnv(fake::GcpServerOptions server_options)
      : clock_(std::make_shared<FakeClock>()),
        server_(std::make_unique<fake::GcpServer>(with_clock(std::move(server_options), clock_))),
        http_(std::make_shared<RecordingHttpClient>(make_curl_http_client())),
        limiters_(std::make_shared<gcp::ProjectRateLimiters>(clock_)) {
    server_->start();
  }

  fake::GcpServer& server() { return *server_; }
  FakeClock& clock() { return *clock_; }
  std::shared_ptr<FakeClock> clock_ptr() { return clock_; }
  RecordingHttpClient& http() { return *http_; }

  // Real clients pointed at the server: the bearer token it issued, the fake clock (so backoffs
  // and the rate limiter never really wait), a limiter of this test's own.
  logs::RetrieverOptions options(int reads_per_minute = 6000) {
    logs::RetrieverOptions o;
    const auto credentials = gcp::make_fixed_credentials(server_->valid_token());
    o.logging.endpoint = server_->base_url();
    o.logging.http = http_;
    o.logging.credentials = credentials;
    o.logging.clock = clock_;
    o.logging.rate_limiters = limiters_;
    o.logging.reads_per_minute = reads_per_minute;
    o.logging.seed = 7;
    o.storage.endpoint = server_->base_url();
    o.storage.http = http_;
    o.storage.credentials = credentials;
    o.storage.clock = clock_;
    o.storage.seed = 7;
    o.clock = clock_;
    return o;
  }

  CloudLogRetriever retriever(int reads_per_minute = 6000) {
    return logs::make_retriever(options(reads_per_minute));
  }

  gcp::StorageClient storage() {
    gcp::StorageClientOptions o;
    o.endpoint = server_->base_url();
    o.http = make_curl_http_client();
    o.credentials = gcp::make_fixed_credentials(server_->valid_token());
    o.clock = clock_;
    return gcp::StorageClient(std::move(o));
  }

  static ClusterConfig cluster(const GkePlace& place = {}) {
    ClusterConfig c;
    c.name = "tpu-v4-prod";
    c.provider = "gke";
    c.project = place.project;
    c.zone = place.location;
    c.cluster_id = place.cluster_id;
    c.default_namespace = place.namespace_;
    return c;
  }

  // Stores entries in batches (as a logging agent would).
  void write(const std::vector<nlohmann::json>& entries) {
    constexpr std::size_t kBatch = 5000;
    for (std::size_t i = 0; i < entries.size(); i += kBatch) {
      const auto end =
          entries.begin() + static_cast<std::ptrdiff_t>(std::min(entries.size(), i + kBatch));
      server_->write_log_entries(
          std::vector<nlohmann::json>(entries.begin() + static_cast<std::ptrdiff_t>(i), end));
    }
  }

  // Bulk text lines of one pod through the server's fast path: the same logName, resource and
  // labels as gke_entry (stdout), insertIds generated by the server. For logs of 10^4+ lines.
  void write_text_lines(const GkePlace& place, int slice, int worker,
                        std::vector<fake::LogLine> lines) {
    nlohmann::json shared = gke_entry(place, {.slice = slice, .worker = worker});
    shared.erase("timestamp");
    shared.erase("textPayload");
    shared.erase("insertId");
    server_->write_text_entries(shared, std::move(lines));
  }

  std::int64_t count(const std::string& route) const {
    const auto counts = server_->request_counts();
    const auto it = counts.find(route);
    return it == counts.end() ? 0 : it->second;
  }
  std::int64_t list_requests() const { return count("logging.list"); }

 private:
  static fake::GcpServerOptions with_clock(fake::GcpServerOptions o, std::shared_ptr<Clock> c) {
    o.clock = std::move(c);
    return o;
  }

  std::shared_ptr<FakeClock> clock_;
  std::unique_ptr<fake::GcpServer> server_;
  std::shared_ptr<RecordingHttpClient> http_;
  std::shared_ptr<gcp::ProjectRateLimiters> limiters_;
};

// Reads a whole LogLines sequence.
inline std::vector<std::string> read_all(LogLines lines) {
  std::vector<std::string> out;
  for (const std::string& line : lines) out.push_back(line);
  return out;
}

}  // namespace falcon::testing
