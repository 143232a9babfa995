#include "common/xpk_accelerators.h"

#include <unordered_map>

#include "common/closest_matches.h"

namespace falcon::tools {
namespace {

using Topology = std::vector<int>;  // the sides, in chips: {2, 4, 4} is 2x4x4

std::string topology_name(const Topology& t) {
  // Appended piece by piece: GCC 12 flags `"x" + std::to_string(side)` with a false
  // -Wrestrict at -O2 and above.
  std::string out;
  for (int side : t) {
    if (!out.empty()) out += 'x';
    out += std::to_string(side);
  }
  return out;
}

// xpk's generate_tpu_topologies: four small shapes, then every AxBxC of multiples of 4 from 4
// to 256 made of at most `max_cubes` 4x4x4 cubes, with A <= B <= C when `sorted`.
std::vector<Topology> cube_topologies(int max_cubes, bool sorted) {
  std::vector<Topology> out = {{2, 2, 1}, {2, 2, 2}, {2, 2, 4}, {2, 4, 4}};
  constexpr int kMaxSide = 256;
  for (int a = 4; a <= kMaxSide; a += 4) {
    for (int b = sorted ? a : 4; b <= kMaxSide; b += 4) {
      for (int c = sorted ? b : 4; c <= kMaxSide; c += 4) {
        if ((a / 4) * (b / 4) * (c / 4) <= max_cubes) out.push_back({a, b, c});
      }
    }
  }
  return out;
}

// One generation's node pools of one machine type.
struct TpuShapes {
  std::string_view prefix;
  int cores_per_chip;
  std::string_view gke_accelerator;
  std::vector<Topology> topologies;
};

void add_tpu(std::vector<XpkSystem>& table, std::unordered_map<std::string, bool>& named,
             const TpuShapes& shapes) {
  for (const Topology& t : shapes.topologies) {
    int chips = 1;
    for (int side : t) chips *= side;
    XpkSystem s;
    s.device_class = DeviceClass::kTpu;
    s.chips_per_vm = chips == 1 ? 1 : 4;
    s.vms_per_slice = chips / s.chips_per_vm;
    s.gke_accelerator = std::string(shapes.gke_accelerator);
    // Named by its topology, and by its TensorCores unless an earlier shape took that name
    // (every shape of one TensorCore count has the same VMs and chips).
    for (std::string name :
         {std::string(shapes.prefix) + "-" + topology_name(t),
          std::string(shapes.prefix) + "-" + std::to_string(chips * shapes.cores_per_chip)}) {
      if (!named.emplace(name, true).second) continue;
      s.name = std::move(name);
      table.push_back(s);
    }
  }
}

void add(std::vector<XpkSystem>& table, std::string name, DeviceClass device_class, int vms,
         int chips, std::string gke_accelerator) {
  table.push_back({std::move(name), device_class, vms, chips, std::move(gke_accelerator)});
}

std::vector<XpkSystem> build_table() {
  std::vector<XpkSystem> table;
  constexpr DeviceClass kGpu = DeviceClass::kGpu;
  constexpr DeviceClass kCpu = DeviceClass::kCpu;

  // GPUs: <model>-<GPUs per VM>, one VM each (a slice is one node; xpk's --num-nodes repeats it).
  for (int gpus : {1, 2, 4, 8})
    add(table, "l4-" + std::to_string(gpus), kGpu, 1, gpus, "nvidia-l4");
  for (int gpus : {1, 2, 4, 8}) {
    add(table, "a100-40gb-" + std::to_string(gpus), kGpu, 1, gpus, "nvidia-tesla-a100");
  }
  add(table, "gb200-4", kGpu, 1, 4, "nvidia-gb200");
  add(table, "gb200-4-nolssd", kGpu, 1, 4, "nvidia-gb200");  // a4x-highgpu-4g without local SSD
  add(table, "b200-8", kGpu, 1, 8, "nvidia-b200");
  add(table, "h200-141gb-8", kGpu, 1, 8, "nvidia-h200-141gb");
  add(table, "h100-80gb-8", kGpu, 1, 8, "nvidia-h100-80gb");
  add(table, "h100-mega-80gb-8", kGpu, 1, 8, "nvidia-h100-mega-80gb");

  // TPUs.
  std::unordered_map<std::string, bool> named;
  const std::vector<Topology> one_chip_3d = {{1, 1, 1}};
  add_tpu(table, named, {"tpu7", 2, "tpu7", one_chip_3d});
  add_tpu(table, named, {"tpu7", 2, "tpu7", cube_topologies(4, true)});
  add_tpu(table, named, {"tpu7x", 2, "tpu7x", one_chip_3d});
  add_tpu(table, named, {"tpu7x", 2, "tpu7x", cube_topologies(144, true)});
  const std::vector<Topology> planes = {{2, 4}, {4, 4}, {4, 8}, {8, 8}, {8, 16}, {16, 16}};
  add_tpu(table, named, {"v6e", 1, "tpu-v6e-slice", {{1, 1}}});
  std::vector<Topology> v6e = {{2, 2}};
  v6e.insert(v6e.end(), planes.begin(), planes.end());
  add_tpu(table, named, {"v6e", 1, "tpu-v6e-slice", v6e});
  add_tpu(table, named, {"v5p", 2, "tpu-v5p-slice", cube_topologies(140, true)});
  add_tpu(table, named, {"v5litepod", 1, "tpu-v5-lite-podslice", planes});
  add_tpu(table, named, {"v4", 2, "tpu-v4-podslice", cube_topologies(64, false)});

  // CPUs: <machine type>-<VMs>; "chips" are the machine's vCPUs.
  add(table, "m1-megamem-96-1", kCpu, 1, 96, "");
  add(table, "n2-standard-64-1", kCpu, 1, 64, "");
  for (int vms = 1; vms <= 256; vms *= 2) {
    add(table, "n2-standard-4-" + std::to_string(vms), kCpu, vms, 4, "");
  }
  for (int vms = 1; vms <= 2048; vms *= 2) {
    add(table, "n2-standard-32-" + std::to_string(vms), kCpu, vms, 32, "");
  }
  return table;
}

struct Table {
  std::vector<XpkSystem> systems = build_table();
  std::unordered_map<std::string_view, const XpkSystem*> by_name = [this] {
    std::unordered_map<std::string_view, const XpkSystem*> index;
    for (const XpkSystem& s : systems) index.emplace(s.name, &s);
    return index;
  }();
};

const Table& table() {
  static const Table t;
  return t;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

const char* to_string(DeviceClass device_class) {
  switch (device_class) {
    case DeviceClass::kTpu:
      return "tpu";
    case DeviceClass::kGpu:
      return "gpu";
    case DeviceClass::kCpu:
      return "cpu";
  }
  return "tpu";
}

const std::vector<XpkSystem>& xpk_systems() { return table().systems; }

const XpkSystem* find_xpk_system(std::string_view name) {
  const auto& index = table().by_name;
  const auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

std::vector<std::string_view> xpk_system_names(std::optional<DeviceClass> only) {
  std::vector<std::string_view> names;
  for (const XpkSystem& s : xpk_systems()) {
    if (!only || s.device_class == *only) names.push_back(s.name);
  }
  return names;
}

std::optional<std::string> xpk_name_for(std::string_view type) {
  if (find_xpk_system(type) != nullptr) return std::string(type);
  constexpr std::string_view kSpecPrefix = "tpu-";
  if (!starts_with(type, kSpecPrefix)) return std::nullopt;
  std::string name(type.substr(kSpecPrefix.size()));
  if (starts_with(name, "v5e-")) name = "v5litepod-" + name.substr(4);
  const XpkSystem* s = find_xpk_system(name);
  if (s == nullptr || s->device_class != DeviceClass::kTpu) return std::nullopt;
  return name;
}

std::vector<std::string> xpk_closest_matches(std::string_view value,
                                             std::optional<DeviceClass> only, std::size_t n) {
  return closest_matches(value, xpk_system_names(only), n);
}

}  // namespace falcon::tools
