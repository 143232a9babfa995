// xpk 1.13.1's accelerator names (UserFacingNameToSystemCharacteristics in
// src/xpk/core/system_characteristics.py), written as the rules that produce them.
//
// TPU: each family has a set of topologies; every topology gives two names, `<prefix>-<topology>`
// (`v4-2x4x4`) and `<prefix>-<TensorCores>` (`v4-64`, TensorCores = chips x cores per chip). A
// slice has one VM when it has one chip, else chips / 4 VMs of 4 chips. The 3-D families use
// xpk's generated topologies: 2x2x1, 2x2x2, 2x2x4, 2x4x4, and every AxBxC with A, B, C multiples
// of 4 up to 256 and (A/4)(B/4)(C/4) at most a per-family number of 4x4x4 cubes (A <= B <= C
// except for v4).
#include <algorithm>
#include <map>

#include "falcon/accelerator_types.h"
#include "util/closest.h"

namespace falcon {
namespace {

struct TpuFamily {
  const char* prefix;
  int cores_per_chip;
  const char* gke_accelerator;
  std::vector<const char*> topologies;  // listed topologies
  int max_cubes;                        // > 0: also xpk's generated 3-D topologies
  bool nondecreasing;                   // generated ones have A <= B <= C
};

const std::vector<TpuFamily>& tpu_families() {
  static const std::vector<TpuFamily> kFamilies = {
      {"tpu7", 2, "tpu7", {"1x1x1"}, 4, true},
      {"tpu7x", 2, "tpu7x", {"1x1x1"}, 144, true},
      {"v6e",
       1,
       "tpu-v6e-slice",
       {"1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"},
       0,
       true},
      {"v5p", 2, "tpu-v5p-slice", {}, 140, true},
      {"v5litepod",
       1,
       "tpu-v5-lite-podslice",
       {"2x4", "4x4", "4x8", "8x8", "8x16", "16x16"},
       0,
       true},
      {"v4", 2, "tpu-v4-podslice", {}, 64, false},
  };
  return kFamilies;
}

// GPU and CPU machines, one name each. CPU names are <machine type>-<VMs>; their "chips" are
// vCPUs.
std::vector<XpkAcceleratorType> fixed_types() {
  constexpr auto kGpu = DeviceClass::kGpu;
  constexpr auto kCpu = DeviceClass::kCpu;
  std::vector<XpkAcceleratorType> t = {
      {"l4-1", kGpu, 1, 1, "nvidia-l4"},
      {"l4-2", kGpu, 1, 2, "nvidia-l4"},
      {"l4-4", kGpu, 1, 4, "nvidia-l4"},
      {"l4-8", kGpu, 1, 8, "nvidia-l4"},
      {"a100-40gb-1", kGpu, 1, 1, "nvidia-tesla-a100"},
      {"a100-40gb-2", kGpu, 1, 2, "nvidia-tesla-a100"},
      {"a100-40gb-4", kGpu, 1, 4, "nvidia-tesla-a100"},
      {"a100-40gb-8", kGpu, 1, 8, "nvidia-tesla-a100"},
      {"gb200-4", kGpu, 1, 4, "nvidia-gb200"},
      {"gb200-4-nolssd", kGpu, 1, 4, "nvidia-gb200"},
      {"b200-8", kGpu, 1, 8, "nvidia-b200"},
      {"h200-141gb-8", kGpu, 1, 8, "nvidia-h200-141gb"},
      {"h100-80gb-8", kGpu, 1, 8, "nvidia-h100-80gb"},
      {"h100-mega-80gb-8", kGpu, 1, 8, "nvidia-h100-mega-80gb"},
      {"m1-megamem-96-1", kCpu, 1, 96, ""},
      {"n2-standard-64-1", kCpu, 1, 64, ""},
  };
  for (int vms = 1; vms <= 256; vms *= 2) {
    t.push_back({"n2-standard-4-" + std::to_string(vms), kCpu, vms, 4, ""});
  }
  for (int vms = 1; vms <= 2048; vms *= 2) {
    t.push_back({"n2-standard-32-" + std::to_string(vms), kCpu, vms, 32, ""});
  }
  return t;
}

std::vector<std::string> topologies_of(const TpuFamily& family) {
  std::vector<std::string> out(family.topologies.begin(), family.topologies.end());
  if (family.max_cubes > 0) {
    for (const char* small : {"2x2x1", "2x2x2", "2x2x4", "2x4x4"}) out.emplace_back(small);
    for (int x = 4; x <= 256; x += 4) {
      for (int y = family.nondecreasing ? x : 4; y <= 256; y += 4) {
        for (int z = family.nondecreasing ? y : 4; z <= 256; z += 4) {
          if ((x / 4) * (y / 4) * (z / 4) <= family.max_cubes) {
            out.push_back(std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z));
          }
        }
      }
    }
  }
  return out;
}

int chips_in(const std::string& topology) {
  int product = 1;
  std::size_t start = 0;
  while (start <= topology.size()) {
    const auto x = topology.find('x', start);
    product *= std::stoi(topology.substr(start, x - start));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return product;
}

std::vector<XpkAcceleratorType> build_table() {
  std::map<std::string, XpkAcceleratorType> by_name;
  for (const TpuFamily& family : tpu_families()) {
    for (const std::string& topology : topologies_of(family)) {
      const int chips = chips_in(topology);
      XpkAcceleratorType t;
      t.device_class = DeviceClass::kTpu;
      t.chips_per_vm = chips == 1 ? 1 : 4;
      t.vms_per_slice = chips / t.chips_per_vm;
      t.gke_accelerator = family.gke_accelerator;
      for (const std::string& name :
           {std::string(family.prefix) + "-" + topology,
            std::string(family.prefix) + "-" + std::to_string(chips * family.cores_per_chip)}) {
        t.name = name;
        by_name.emplace(name, t);
      }
    }
  }
  for (XpkAcceleratorType& t : fixed_types()) by_name.emplace(t.name, std::move(t));
  std::vector<XpkAcceleratorType> out;
  out.reserve(by_name.size());
  for (auto& [name, type] : by_name) out.push_back(std::move(type));
  return out;
}

}  // namespace

const std::vector<XpkAcceleratorType>& xpk_accelerator_types() {
  static const std::vector<XpkAcceleratorType> kTable = build_table();
  return kTable;
}

const XpkAcceleratorType* find_xpk_accelerator_type(std::string_view xpk_name) {
  const auto& table = xpk_accelerator_types();
  const auto it = std::lower_bound(
      table.begin(), table.end(), xpk_name,
      [](const XpkAcceleratorType& t, std::string_view name) { return t.name < name; });
  return it != table.end() && it->name == xpk_name ? &*it : nullptr;
}

std::optional<std::string> canonical_accelerator_type(std::string_view name) {
  if (find_xpk_accelerator_type(name) != nullptr) return std::string(name);
  // The spec's spellings: a "tpu-" prefix, and Cloud TPU's product name "v5e" for what xpk
  // calls "v5litepod" (tpu-v5e-256 is xpk's v5litepod-256).
  constexpr std::string_view kSpecPrefix = "tpu-";
  constexpr std::string_view kV5e = "v5e-";
  std::string rest(name.starts_with(kSpecPrefix) ? name.substr(kSpecPrefix.size()) : name);
  if (rest.starts_with(kV5e)) rest = "v5litepod-" + rest.substr(kV5e.size());
  if (rest == name) return std::nullopt;
  const XpkAcceleratorType* t = find_xpk_accelerator_type(rest);
  if (t != nullptr && t->device_class == DeviceClass::kTpu) return rest;
  return std::nullopt;
}

std::vector<std::string> closest_xpk_accelerator_types(std::string_view name,
                                                       std::optional<DeviceClass> only,
                                                       std::size_t n) {
  std::vector<std::string_view> names;
  for (const XpkAcceleratorType& t : xpk_accelerator_types()) {
    if (!only || t.device_class == *only) names.push_back(t.name);
  }
  return closest_matches(name, names, n);
}

std::vector<std::string> suggest_xpk_accelerator_types(std::string_view name,
                                                       std::optional<DeviceClass> only,
                                                       std::size_t n) {
  std::vector<std::string_view> names;
  for (const XpkAcceleratorType& t : xpk_accelerator_types()) {
    if (!only || t.device_class == *only) names.push_back(t.name);
  }
  return suggest_names(name, names, n);
}

}  // namespace falcon
