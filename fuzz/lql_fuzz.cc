// The local server's Logging query language, which reads filters from any HTTP client: parse
// either gives a filter or throws FilterError, and a parsed filter evaluates against GKE-shaped
// entries without crashing, matching only entries inside its own time_bounds().
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/rfc3339.h"
#include "gcp_server/lql.h"

namespace {

namespace lql = falcon::fake::lql;

const nlohmann::json& entries() {
  static const nlohmann::json all = nlohmann::json::parse(R"([
    {"textPayload": "[main] INFO Application - step 12 loss=0.25",
     "insertId": "r7iddfioc0p12ds0",
     "resource": {"type": "k8s_container",
       "labels": {"location": "us-east5-a", "cluster_name": "tpu-v4-dev",
                  "pod_name": "job-a-slice-job-0-1-x7k2p", "namespace_name": "default",
                  "project_id": "falcon-tpu", "container_name": "jax-tpu"}},
     "timestamp": "2026-04-13T08:00:00.064010148Z",
     "receiveTimestamp": "2026-04-13T08:00:04.819376748Z",
     "severity": "ERROR",
     "labels": {"k8s-pod/jobset_sigs_k8s_io/jobset-name": "job-a",
                "k8s-pod/jobset_sigs_k8s_io/job-index": "0",
                "k8s-pod/batch_kubernetes_io/job-completion-index": "1"},
     "logName": "projects/falcon-tpu/logs/stdout"},
    {"jsonPayload": {"message": "EXIT_CODE=1", "count": 3, "ok": false, "tags": ["a", "b"],
                     "nested": {"v": null}},
     "resource": {"type": "k8s_container", "labels": {"pod_name": "w-slice-job-0-0-abcde"}},
     "timestamp": "1970-01-01T00:00:00Z",
     "logName": "projects/p/logs/stderr"},
    {"textPayload": ""}
  ])");
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  lql::Filter filter;
  try {
    filter = lql::Filter::parse(text);
  } catch (const lql::FilterError& e) {
    if (e.position() > text.size()) __builtin_trap();
    return 0;
  }
  (void)filter.debug_string();
  const lql::TimeBounds bounds = filter.time_bounds();
  for (const auto& entry : entries()) {
    if (!filter.matches(lql::JsonEntryView(entry))) continue;
    const auto ts = entry.find("timestamp");
    if (ts == entry.end()) continue;
    const auto nanos = falcon::tools::parse_rfc3339_nanos(ts->get<std::string>());
    if (nanos && (*nanos < bounds.lo || *nanos > bounds.hi)) __builtin_trap();
  }
  return 0;
}
