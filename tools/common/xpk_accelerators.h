// The accelerator types xpk 1.13.1 accepts, as the fleet's own table: the names of
// `UserFacingNameToSystemCharacteristics` (src/xpk/core/system_characteristics.py), which
// argparse offers as the choices of `--tpu-type` (its TPU names) and `--device-type` (all), with
// what the fleet needs of each. Written from xpk's rules, not from the layer's table
// (src/model/), so that a slip in one is caught by the other.
//
//   find_xpk_system("v4-64")       // TPU v4, 8 VMs of 4 chips, tpu-v4-podslice
//   find_xpk_system("v4-2x4x4")    // the same slice named by its topology
//   find_xpk_system("h100-80gb-8") // GPU, 1 VM of 8 GPUs, nvidia-h100-80gb
//   xpk_name_for("tpu-v4-64")      // "v4-64": the spec's spelling of a TPU type
//   xpk_closest_matches("tpu-v4-128", DeviceClass::kTpu)
//       // {"tpu7-128", "v4-128", "tpu7x-128", "v4-1280", "tpu7x-1280"}
//
// TPU names come in two forms per slice shape: `<prefix>-<topology>` (`v5p-4x4x8`) and
// `<prefix>-<TensorCores>` (`v5p-256`), where TensorCores = chips x cores per chip (2 for v4,
// v5p, tpu7 and tpu7x; 1 for v5litepod and v6e). A slice of one chip is one VM; otherwise a VM
// holds 4 chips. The topologies per generation:
//   tpu7       1x1x1; 2x2x1, 2x2x2, 2x2x4, 2x4x4 and cubes up to 4 (see below)
//   tpu7x      1x1x1; the same with cubes up to 144
//   v6e        1x1; 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16
//   v5p        2x2x1, 2x2x2, 2x2x4, 2x4x4 and cubes up to 140
//   v5litepod  2x4, 4x4, 4x8, 8x8, 8x16, 16x16
//   v4         2x2x1, 2x2x2, 2x2x4, 2x4x4 and cubes up to 64, in any order of the sides
// where "cubes up to N" is every AxBxC of multiples of 4 from 4 to 256 with
// (A/4)(B/4)(C/4) <= N and A <= B <= C (v4: any order). Several topologies share a TensorCore
// count (v4-2x2x4 and v4-2x4x2 are both v4-32); they have the same VMs and chips per VM.
// xpk 1.13.1 has no v2, v3 or v5e names, and no a100-80gb type.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace falcon::tools {

// The version of xpk whose table this is.
inline constexpr std::string_view kXpkTableVersion = "1.13.1";

// xpk's AcceleratorType.
enum class DeviceClass { kTpu, kGpu, kCpu };
const char* to_string(DeviceClass device_class);  // "tpu" | "gpu" | "cpu"

// One name of xpk's table.
struct XpkSystem {
  std::string name;  // "v4-64", "v4-2x4x4", "h100-80gb-8", "n2-standard-32-4"
  DeviceClass device_class = DeviceClass::kTpu;
  int vms_per_slice = 1;        // VMs (one pod each) of one slice
  int chips_per_vm = 1;         // TPU chips or GPUs of one VM; vCPUs of a CPU machine
  std::string gke_accelerator;  // the GKE node label value ("tpu-v4-podslice",
                                // "nvidia-h100-80gb"); empty for CPU, where xpk writes "N/A"
};

// The whole table in xpk's order (GPU, TPU, CPU). Built on first use, then never changed;
// safe to call from any thread.
const std::vector<XpkSystem>& xpk_systems();

// The entry named exactly `name`, or nullptr.
const XpkSystem* find_xpk_system(std::string_view name);

// The names argparse accepts: of class `only`, or all (`--tpu-type` takes the TPU names,
// `--device-type` all of them).
std::vector<std::string_view> xpk_system_names(std::optional<DeviceClass> only);

// The xpk name a type stands for: `type` itself when the table has it, else the spec's spelling
// of a TPU type, a `tpu-` prefix before xpk's TPU name (`tpu-v4-64` -> `v4-64`), with Cloud
// TPU's `v5e` for xpk's `v5litepod` (`tpu-v5e-256` -> `v5litepod-256`). nullopt when it stands
// for no TPU name of the table (`tpu-v4-48`, `tpu-h100-80gb-8`).
std::optional<std::string> xpk_name_for(std::string_view type);

// What argparse suggests for a refused value: up to `n` names (of class `only`, or all),
// closest first (common/closest_matches.h).
std::vector<std::string> xpk_closest_matches(std::string_view value,
                                             std::optional<DeviceClass> only, std::size_t n = 5);

}  // namespace falcon::tools
