// Shared helpers for the local GCP server's tests: a started server, a raw HTTP client, and
// builders for GKE-shaped log entries.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdint>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/rfc3339.h"
#include "gcp_server/gcp_server.h"

namespace falcon::fake::testing {

using nlohmann::json;

struct HttpResult {
  int status = 0;  // 0: no response (connection error)
  json body;       // parsed body, or null when empty / not JSON
  std::string raw;
  httplib::Headers headers;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has_header(const std::string& name) const { return headers.count(name) > 0; }
};

inline HttpResult to_result(const httplib::Result& r) {
  HttpResult out;
  if (!r) return out;
  out.status = r->status;
  out.raw = r->body;
  out.headers = r->headers;
  out.body = json::parse(r->body, nullptr, false);
  if (out.body.is_discarded()) out.body = nullptr;
  return out;
}

// GKE container entry for `workload`, rank (slice 0, `worker`), at `nanos` since the epoch.
inline json gke_entry(const std::string& project, const std::string& workload, int worker,
                      std::int64_t nanos, const std::string& text,
                      const std::string& stream = "stdout") {
  const std::string pod = fmt::format("{}-slice-job-0-{}-abcde", workload, worker);
  return json{
      {"logName", fmt::format("projects/{}/logs/{}", project, stream)},
      {"resource",
       {{"type", "k8s_container"},
        {"labels",
         {{"project_id", project},
          {"location", "us-central2-b"},
          {"cluster_name", "tpu-cluster"},
          {"namespace_name", "default"},
          {"pod_name", pod},
          {"container_name", "jax-tpu"}}}}},
      {"labels",
       {{"k8s-pod/jobset_sigs_k8s_io/jobset-name", workload},
        {"k8s-pod/jobset_sigs_k8s_io/job-index", "0"},
        {"k8s-pod/batch_kubernetes_io/job-completion-index", std::to_string(worker)},
        {"compute.googleapis.com/resource_name", "gke-tpu-node-" + std::to_string(worker)}}},
      {"severity", stream == "stderr" ? "ERROR" : "INFO"},
      {"timestamp", tools::format_rfc3339_nanos(nanos)},
      {"textPayload", text}};
}

// A running server (auth required, in memory) and a client for it.
class ServerTest : public ::testing::Test {
 protected:
  explicit ServerTest(GcpServerOptions options = {}) : server_(std::move(options)) {
    server_.start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
    client_->set_read_timeout(30, 0);
  }

  httplib::Headers auth() const { return {{"Authorization", "Bearer " + server_.valid_token()}}; }

  HttpResult post_json(const std::string& path, const json& body) {
    return to_result(client_->Post(path.c_str(), auth(), body.dump(), "application/json"));
  }
  HttpResult get(const std::string& path) { return to_result(client_->Get(path.c_str(), auth())); }

  // entries:list with the given request body; the resourceNames default to projects/p.
  HttpResult list(json request) {
    if (!request.contains("resourceNames")) request["resourceNames"] = {"projects/p"};
    return post_json("/v2/entries:list", request);
  }

  GcpServer server_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace falcon::fake::testing
