#include "kube/multikueue.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/accelerator_types.h"
#include "gcp/json_fields.h"

namespace falcon::kube {
namespace {

using gcp::integer_field;
using gcp::member_or_null;
using gcp::string_field;
using nlohmann::json;

// Chips in a TPU topology "2x2x4" (0 when it is not one).
int topology_chips(const std::string& topology) {
  int chips = 1;
  std::size_t start = 0;
  while (start <= topology.size()) {
    const std::size_t x = topology.find('x', start);
    const std::string part = topology.substr(start, x == std::string::npos ? x : x - start);
    if (part.empty() || part.size() > 4 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return 0;
    }
    chips *= std::stoi(part);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return chips;
}

// The xpk name of the first pod set's accelerator, from its node selector; "" and `why` when
// there is none to read.
std::string accelerator_from_pod_set(const json& spec, std::string& why) {
  const json& pod_sets = member_or_null(spec, "podSets");
  if (!pod_sets.is_array() || pod_sets.empty()) {
    why = "spec.podSets is empty";
    return "";
  }
  const json& selector = member_or_null(
      member_or_null(member_or_null(pod_sets[0], "template"), "spec"), "nodeSelector");
  const std::string tpu = string_field(selector, "cloud.google.com/gke-tpu-accelerator");
  const std::string gpu = string_field(selector, "cloud.google.com/gke-accelerator");
  if (tpu.empty() && gpu.empty()) {
    why = fmt::format(
        "neither the label {} nor a TPU or GPU node selector (cloud.google.com/"
        "gke-tpu-accelerator, cloud.google.com/gke-accelerator) on spec.podSets[0]",
        kAcceleratorLabel);
    return "";
  }
  const std::string label = tpu.empty() ? gpu : tpu;
  const std::string topology = string_field(selector, "cloud.google.com/gke-tpu-topology");
  const int chips = tpu.empty() ? 0 : topology_chips(topology);
  if (!tpu.empty() && chips == 0) {
    why = fmt::format(
        "spec.podSets[0] selects {} without a topology (cloud.google.com/"
        "gke-tpu-topology) to size the slice",
        tpu);
    return "";
  }
  // The shortest name of that label and size: "v4-32" rather than "v4-2x2x4".
  std::string best;
  for (const XpkAcceleratorType& t : xpk_accelerator_types()) {
    if (t.gke_accelerator != label) continue;
    if (!tpu.empty() && t.vms_per_slice * t.chips_per_vm != chips) continue;
    if (best.empty() || t.name.size() < best.size()) best = t.name;
  }
  if (best.empty()) {
    why = tpu.empty() ? fmt::format("no accelerator type of xpk's table is {}", gpu)
                      : fmt::format("no accelerator type of xpk's table is {} with {} chips ({})",
                                    tpu, chips, topology);
  }
  return best;
}

bool condition_true(const json& status, const char* type) {
  const json& conditions = member_or_null(status, "conditions");
  if (!conditions.is_array()) return false;
  for (const json& c : conditions) {
    if (string_field(c, "type") == type) return string_field(c, "status") == "True";
  }
  return false;
}

}  // namespace

std::string ManagerWorkload::check_state(const std::string& check) const {
  for (const auto& [name, state] : checks) {
    if (name == check) return state;
  }
  return "";
}

ManagerWorkload parse_manager_workload(const json& object) {
  ManagerWorkload w;
  const json& meta = member_or_null(object, "metadata");
  w.uid = string_field(meta, "uid");
  w.name = string_field(meta, "name");
  w.namespace_ = string_field(meta, "namespace");
  if (w.uid.empty() || w.name.empty() || w.namespace_.empty()) {
    throw std::invalid_argument(
        "a Workload without metadata.name, metadata.namespace or metadata.uid");
  }
  w.resource_version = string_field(meta, "resourceVersion");
  w.created = string_field(meta, "creationTimestamp");
  w.deleting = member_or_null(meta, "deletionTimestamp").is_string();
  const json& spec = member_or_null(object, "spec");
  if (member_or_null(spec, "priority").is_number_integer()) {
    w.priority = integer_field(spec, "priority", 0);  // Kubernetes keeps it in an int32
  }
  w.priority_class = string_field(spec, "priorityClassName");
  const std::string labelled = string_field(member_or_null(meta, "labels"), kAcceleratorLabel);
  if (!labelled.empty()) {
    if (const auto canonical = canonical_accelerator_type(labelled)) {
      w.accelerator = *canonical;
    } else {
      w.accelerator_problem = fmt::format("label {}: '{}' is not an accelerator type xpk knows",
                                          kAcceleratorLabel, labelled.substr(0, 64));
    }
  } else {
    w.accelerator = accelerator_from_pod_set(spec, w.accelerator_problem);
  }
  const json& status = member_or_null(object, "status");
  if (const json& checks = member_or_null(status, "admissionChecks"); checks.is_array()) {
    for (const json& c : checks)
      w.checks.emplace_back(string_field(c, "name"), string_field(c, "state"));
  }
  w.quota_reserved = condition_true(status, "QuotaReserved");
  w.finished = condition_true(status, "Finished");
  if (const json& c = member_or_null(status, "clusterName"); c.is_string()) {
    w.cluster_name = c.get<std::string>();
  }
  if (const json& n = member_or_null(status, "nominatedClusterNames"); n.is_array()) {
    for (const json& name : n) {
      if (name.is_string()) w.nominated.push_back(name.get<std::string>());
    }
  }
  return w;
}

MultiKueueWiring parse_multikueue_wiring(const json& admission_checks, const json& configs,
                                         const json& clusters) {
  MultiKueueWiring out;
  std::map<std::string, std::vector<std::string>> config_clusters;
  if (const json& items = member_or_null(configs, "items"); items.is_array()) {
    for (const json& c : items) {
      auto& list = config_clusters[string_field(member_or_null(c, "metadata"), "name")];
      if (const json& names = member_or_null(member_or_null(c, "spec"), "clusters");
          names.is_array()) {
        for (const json& n : names) {
          if (n.is_string()) list.push_back(n.get<std::string>());
        }
      }
    }
  }
  if (const json& items = member_or_null(admission_checks, "items"); items.is_array()) {
    for (const json& ac : items) {
      const json& spec = member_or_null(ac, "spec");
      if (string_field(spec, "controllerName") != kMultiKueueController) continue;
      const json& params = member_or_null(spec, "parameters");
      const auto it = config_clusters.find(string_field(params, "name"));
      out.workers_by_check[string_field(member_or_null(ac, "metadata"), "name")] =
          string_field(params, "kind") == "MultiKueueConfig" && it != config_clusters.end()
              ? it->second
              : std::vector<std::string>{};
    }
  }
  if (const json& items = member_or_null(clusters, "items"); items.is_array()) {
    for (const json& c : items) {
      const std::string name = string_field(member_or_null(c, "metadata"), "name");
      out.clusters.push_back(name);
      std::string why = "no Active condition yet";
      if (const json& conds = member_or_null(member_or_null(c, "status"), "conditions");
          conds.is_array()) {
        for (const json& cond : conds) {
          if (string_field(cond, "type") != "Active") continue;
          why = string_field(cond, "status") == "True"
                    ? ""
                    : fmt::format("not Active ({}: {})", string_field(cond, "reason"),
                                  string_field(cond, "message").substr(0, 200));
        }
      }
      if (!why.empty()) out.inactive[name] = why;
    }
  }
  return out;
}

}  // namespace falcon::kube
