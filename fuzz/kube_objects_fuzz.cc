// What a cluster's Kubernetes API and its kubeconfig hand falcon, read by src/kube/: a
// WorkloadList page (the kube probe backend), a ClusterQueueList (capacity), a manager Workload
// and the MultiKueue wiring (the dispatcher), an exec plugin's ExecCredential and a kubeconfig.
// Each reader either returns or throws the one exception type its header documents; the list
// parser that keeps only what workload_row reads gives the same rows as the whole document.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gcp/json_fields.h"
#include "kube/cluster_queues.h"
#include "kube/exec_credential.h"
#include "kube/kubeconfig.h"
#include "kube/multikueue.h"
#include "kube/workload_objects.h"

namespace {

using falcon::gcp::member_or_null;
using nlohmann::json;

// parse_workload_list keeps only what workload_row reads: each kept item gives the row of the
// whole item, and the kept list classifies (or fails) as the whole would.
void workload_list(const std::string& body, const json& whole) {
  json kept;
  try {
    kept = falcon::kube::parse_workload_list(body);
  } catch (const std::invalid_argument&) {
    if (!whole.is_discarded()) __builtin_trap();  // JSON the server sent is never refused
    return;
  }
  const json& kept_items = member_or_null(kept, "items");
  const json& whole_items = member_or_null(whole, "items");
  if (kept_items.is_array() && whole_items.is_array()) {
    if (kept_items.size() != whole_items.size()) __builtin_trap();
    for (std::size_t i = 0; i < kept_items.size(); ++i) {
      if (!(falcon::kube::workload_row(kept_items[i]) ==
            falcon::kube::workload_row(whole_items[i]))) {
        __builtin_trap();
      }
    }
  }
  try {
    (void)falcon::kube::classify_workload_list(kept);
    const auto now = std::chrono::system_clock::time_point(std::chrono::hours(494'000));
    (void)falcon::kube::admission_delay_s(kept, now);
  } catch (const std::invalid_argument&) {
    if (kept_items.is_array()) __builtin_trap();  // thrown only for a list without items
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  workload_list(text, j);
  (void)falcon::kube::parse_quantity(text);
  try {
    (void)falcon::kube::parse_exec_credential(text);
  } catch (const std::runtime_error&) {
  }
  try {
    (void)falcon::kube::parse_kubeconfig(text, "fuzz");
  } catch (const std::runtime_error&) {
  }
  if (j.is_discarded()) return 0;
  for (const json* object : {&j, &member_or_null(j, "object")}) {
    try {
      (void)falcon::kube::parse_cluster_queues(*object);
    } catch (const std::invalid_argument&) {
    }
    try {
      (void)falcon::kube::parse_manager_workload(*object);
    } catch (const std::invalid_argument&) {
    }
  }
  (void)falcon::kube::parse_multikueue_wiring(member_or_null(j, "admissionChecks"),
                                              member_or_null(j, "configs"),
                                              member_or_null(j, "clusters"));
  return 0;
}
