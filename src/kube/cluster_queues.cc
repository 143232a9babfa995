#include "kube/cluster_queues.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "falcon/accelerator_types.h"
#include "gcp/json_fields.h"

namespace falcon::kube {
namespace {

using gcp::array_field;
using gcp::member_or_null;
using gcp::string_field;
using nlohmann::json;

bool is_accelerator_resource(const std::string& name) {
  return name == "google.com/tpu" || name == "nvidia.com/gpu";
}

std::optional<double> quantity_of(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return parse_quantity(v.get<std::string>());
  return std::nullopt;
}

// What a flavor's name says: xpk's "<slices>x<type>", or a GKE accelerator label.
bool describe_flavor(const std::string& flavor, AcceleratorCapacity& out) {
  const auto x = flavor.find('x');
  if (x != std::string::npos && x > 0 &&
      std::all_of(flavor.begin(), flavor.begin() + static_cast<long>(x),
                  [](unsigned char c) { return std::isdigit(c) != 0; })) {
    const std::string type = flavor.substr(x + 1);
    if (const XpkAcceleratorType* t = find_xpk_accelerator_type(type)) {
      out.device_type = t->name;
      out.accelerator = t->gke_accelerator;
      return !out.accelerator.empty();
    }
  }
  for (const XpkAcceleratorType& t : xpk_accelerator_types()) {
    if (!t.gke_accelerator.empty() && t.gke_accelerator == flavor) {
      out.accelerator = flavor;
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<double> parse_quantity(std::string_view text) {
  static const std::map<std::string, double> kSuffix = {
      {"", 1},        {"m", 1e-3},       {"k", 1e3},           {"M", 1e6},
      {"G", 1e9},     {"T", 1e12},       {"P", 1e15},          {"E", 1e18},
      {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0}};
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                             (i == 0 && (text[i] == '+' || text[i] == '-')))) {
    ++i;
  }
  if (i == 0) return std::nullopt;
  const auto suffix = kSuffix.find(std::string(text.substr(i)));
  if (suffix == kSuffix.end()) return std::nullopt;
  try {
    std::size_t used = 0;
    const std::string number(text.substr(0, i));
    const double v = std::stod(number, &used);
    if (used != number.size() || !std::isfinite(v)) return std::nullopt;
    return v * suffix->second;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<AcceleratorCapacity> parse_cluster_queues(const json& list) {
  json items;
  if (list.is_object() && list.contains("items") && list["items"].is_array()) {
    items = list["items"];
  } else if (string_field(list, "kind") == "ClusterQueue") {
    items = json::array({list});
  } else {
    throw std::invalid_argument("not a ClusterQueueList: no items array");
  }
  std::vector<AcceleratorCapacity> out;
  auto entry = [&](const std::string& flavor, const std::string& resource) -> AcceleratorCapacity* {
    for (auto& c : out) {
      if (c.flavor == flavor && c.resource == resource) return &c;
    }
    AcceleratorCapacity c;
    c.flavor = flavor;
    c.resource = resource;
    if (!describe_flavor(flavor, c)) return nullptr;
    out.push_back(std::move(c));
    return &out.back();
  };
  for (const json& cq : items) {
    if (!cq.is_object()) continue;
    const json& spec = member_or_null(cq, "spec");
    const json& status = member_or_null(cq, "status");
    // Nominal quota per (flavor, resource).
    std::map<std::pair<std::string, std::string>, double> nominal;
    for (const json& group : array_field(spec, "resourceGroups")) {
      if (!group.is_object()) continue;
      for (const json& f : array_field(group, "flavors")) {
        if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
        for (const json& r : array_field(f, "resources")) {
          if (!r.is_object() || !r.contains("name") || !r["name"].is_string()) continue;
          const std::string resource = r["name"].get<std::string>();
          if (!is_accelerator_resource(resource)) continue;
          const auto q = r.contains("nominalQuota") ? quantity_of(r["nominalQuota"]) : 0.0;
          if (!q) continue;
          nominal[{f["name"].get<std::string>(), resource}] += *q;
        }
      }
    }
    auto totals = [&](const char* key) {
      std::map<std::pair<std::string, std::string>, double> used;
      for (const json& f : array_field(status, key)) {
        if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
        for (const json& r : array_field(f, "resources")) {
          if (!r.is_object() || !r.contains("name") || !r["name"].is_string()) continue;
          if (const auto t = r.contains("total") ? quantity_of(r["total"]) : std::nullopt) {
            used[{f["name"].get<std::string>(), r["name"].get<std::string>()}] += *t;
          }
        }
      }
      return used;
    };
    const auto usage = totals("flavorsUsage");
    const auto reservation = totals("flavorsReservation");
    // The published blocks per flavor, free runs and all blocks: the largest of each.
    const json& annotations = member_or_null(member_or_null(cq, "metadata"), "annotations");
    auto largest_of = [&](const char* annotation) {
      std::map<std::string, double> largest;
      if (!annotations.is_object() || !annotations.contains(annotation) ||
          !annotations[annotation].is_string()) {
        return largest;
      }
      const json blocks = json::parse(annotations[annotation].get<std::string>(), nullptr, false);
      if (!blocks.is_object()) return largest;
      for (auto it = blocks.begin(); it != blocks.end(); ++it) {
        if (!it.value().is_array()) continue;
        double best = 0;
        bool ok = true;
        for (const json& b : it.value()) {
          const auto q = quantity_of(b);
          if (!q)
            ok = false;
          else
            best = std::max(best, *q);
        }
        if (ok) largest[it.key()] = best;
      }
      return largest;
    };
    const auto largest_free = largest_of(kFreeBlocksAnnotation);
    const auto largest_block = largest_of(kBlocksAnnotation);
    for (const auto& [key, quota] : nominal) {
      AcceleratorCapacity* c = entry(key.first, key.second);
      if (!c) continue;
      c->nominal += quota;
      double used = 0;
      if (const auto u = usage.find(key); u != usage.end()) used = u->second;
      if (const auto r = reservation.find(key); r != reservation.end()) {
        used = std::max(used, r->second);
      }
      c->used += used;
      if (const auto l = largest_free.find(key.first); l != largest_free.end()) {
        c->largest_free_block = std::max(c->largest_free_block.value_or(0.0), l->second);
      }
      if (const auto l = largest_block.find(key.first); l != largest_block.end()) {
        c->largest_block = std::max(c->largest_block.value_or(0.0), l->second);
      }
    }
  }
  return out;
}

}  // namespace falcon::kube
