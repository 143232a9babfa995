#include "fleet/device_types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "common/xpk_accelerators.h"

namespace falcon::fleet {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// The number after the last '-', when it is all digits.
std::optional<int> trailing_count(std::string_view s) {
  const auto dash = s.rfind('-');
  if (dash == std::string_view::npos || dash + 1 >= s.size()) return std::nullopt;
  const std::string_view digits = s.substr(dash + 1);
  if (digits.size() > 7) return std::nullopt;
  int value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

std::string_view strip_tpu_prefix(std::string_view s) {
  return starts_with(s, "tpu-") ? s.substr(4) : s;
}

int builtin_tpu_workers(std::string_view type) {
  const std::string_view t = strip_tpu_prefix(type);
  const int n = trailing_count(t).value_or(0);
  if (n <= 0) return 1;
  if (starts_with(t, "v5litepod") || starts_with(t, "v5e") || starts_with(t, "v6e")) {
    return n <= 8 ? 1 : n / 4;
  }
  // v2/v3/v4/v5p/tpu7x count TensorCores: 2 per chip, 4 chips per host.
  return std::max(1, n / 8);
}

// The table's entry for `device_type` in either spelling, or nullptr.
const tools::XpkSystem* table_entry(std::string_view device_type) {
  const auto name = tools::xpk_name_for(device_type);
  return name ? tools::find_xpk_system(*name) : nullptr;
}

}  // namespace

bool is_xpk_tpu_type(std::string_view value) {
  const tools::XpkSystem* t = tools::find_xpk_system(value);
  return t != nullptr && t->device_class == DeviceClass::kTpu;
}

bool is_xpk_device_type(std::string_view value) { return tools::find_xpk_system(value) != nullptr; }

std::optional<std::string> xpk_accelerator_choice_error(std::string_view flag,
                                                        std::string_view value) {
  std::optional<DeviceClass> only;
  if (flag == "--tpu-type") {
    if (is_xpk_tpu_type(value)) return std::nullopt;
    only = DeviceClass::kTpu;
  } else if (flag == "--device-type") {
    if (is_xpk_device_type(value)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return fmt::format("invalid choice: '{}' (closest matches: {})", value,
                     fmt::join(tools::xpk_closest_matches(value, only), ", "));
}

DeviceClass classify_device(std::string_view device_type, bool given_as_tpu_type) {
  if (given_as_tpu_type) return DeviceClass::kTpu;
  if (const tools::XpkSystem* t = table_entry(device_type)) return t->device_class;
  const std::string_view t = device_type;
  if (starts_with(t, "tpu") || starts_with(t, "v2-") || starts_with(t, "v3-") ||
      starts_with(t, "v4-") || starts_with(t, "v5") || starts_with(t, "v6e")) {
    return DeviceClass::kTpu;
  }
  for (std::string_view gpu :
       {"nvidia", "gpu", "a100", "h100", "h200", "b200", "gb200", "l4-", "a3-", "a4-"}) {
    if (contains(t, gpu)) return DeviceClass::kGpu;
  }
  return DeviceClass::kCpu;
}

int workers_per_slice(std::string_view device_type, DeviceClass device_class,
                      const std::map<std::string, int>& overrides) {
  for (std::string_view key : {device_type, strip_tpu_prefix(device_type)}) {
    if (auto it = overrides.find(std::string(key)); it != overrides.end()) {
      return std::max(1, it->second);
    }
    if (device_class == DeviceClass::kTpu) {
      // "v4-64" in the file also covers "tpu-v4-64" on the command line, and the other way.
      const std::string with_prefix = "tpu-" + std::string(strip_tpu_prefix(key));
      if (auto it = overrides.find(with_prefix); it != overrides.end()) {
        return std::max(1, it->second);
      }
    }
  }
  if (auto it = overrides.find("default"); it != overrides.end()) return std::max(1, it->second);
  if (const tools::XpkSystem* t = table_entry(device_type)) {
    if (device_class == DeviceClass::kGpu) return 1;
    return std::max(1, t->vms_per_slice);
  }
  switch (device_class) {
    case DeviceClass::kTpu:
      return builtin_tpu_workers(device_type);
    case DeviceClass::kGpu:
      return 1;
    case DeviceClass::kCpu:
      return std::max(1, trailing_count(device_type).value_or(1));
  }
  return 1;
}

int chips_per_vm(std::string_view device_type, DeviceClass device_class) {
  const tools::XpkSystem* t = table_entry(device_type);
  if (t != nullptr && device_class != DeviceClass::kCpu) return t->chips_per_vm;
  switch (device_class) {
    case DeviceClass::kTpu:
      return 4;
    case DeviceClass::kGpu: {
      const int n = trailing_count(device_type).value_or(8);
      return n >= 1 && n <= 16 ? n : 8;
    }
    case DeviceClass::kCpu:
      return 0;
  }
  return 0;
}

const char* accelerator_resource(DeviceClass device_class) {
  switch (device_class) {
    case DeviceClass::kTpu:
      return "google.com/tpu";
    case DeviceClass::kGpu:
      return "nvidia.com/gpu";
    case DeviceClass::kCpu:
      return "cpu";
  }
  return "cpu";
}

std::string container_name(DeviceClass device_class, const std::string& docker_name) {
  if (device_class == DeviceClass::kGpu) return "gpu-image";
  return docker_name.empty() ? "jax-tpu" : docker_name;
}

}  // namespace falcon::fleet
