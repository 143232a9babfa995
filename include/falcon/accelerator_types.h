// The accelerator types xpk accepts, in one table with the xpk version it was read from.
//
// xpk's `--tpu-type` takes its TPU names (`v4-64`, `v4-2x4x4`, `v5p-8`, `v5litepod-16`,
// `v6e-256`, `tpu7x-128`, ...) and `--device-type` every name of the table, TPU, GPU
// (`h100-80gb-8`, `a100-40gb-8`, `l4-1`, ...) and CPU (`n2-standard-32-4`, ...); argparse refuses
// anything else. The spec writes TPU types with a `tpu-` prefix (`tpu-v4-64`); both spellings are
// accepted wherever the layer takes an accelerator type, and the xpk name is the canonical one:
// the model (AcceleratorSlot::type) and xpk's command line use it.
//
//   falcon::canonical_accelerator_type("tpu-v4-64");   // "v4-64"
//   falcon::canonical_accelerator_type("v4-64");       // "v4-64"
//   falcon::canonical_accelerator_type("tpu-v5e-256"); // "v5litepod-256"
//   falcon::canonical_accelerator_type("tpu-v4-48");   // nullopt
//   falcon::closest_xpk_accelerator_types("tpu-v4-128", falcon::DeviceClass::kTpu);
//       // {"tpu7-128", "v4-128", "tpu7x-128", "v4-1280", "tpu7x-1280"}, as xpk's argparse says
//
// Update the table (src/model/accelerator_types.cc) and kXpkAcceleratorTableVersion together
// when the supported xpk version moves.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/model.h"

namespace falcon {

// The xpk release whose `src/xpk/core/system_characteristics.py` the table reproduces.
inline constexpr std::string_view kXpkAcceleratorTableVersion = "1.13.1";

// One name xpk accepts and what it stands for.
struct XpkAcceleratorType {
  std::string name;  // xpk's name: "v4-64", "v4-2x4x4", "h100-80gb-8", "n2-standard-32-4"
  DeviceClass device_class = DeviceClass::kTpu;
  int vms_per_slice = 1;        // VMs (one pod each) in one slice
  int chips_per_vm = 1;         // TPU chips or GPUs per VM; vCPUs for a CPU machine
  std::string gke_accelerator;  // GKE's accelerator label value ("tpu-v4-podslice",
                                // "nvidia-h100-80gb"); empty for CPU
};

// The whole table, sorted by name. Built on first use; never changes afterwards.
const std::vector<XpkAcceleratorType>& xpk_accelerator_types();

// The entry named exactly `xpk_name`, or nullptr. No other spelling is looked up.
const XpkAcceleratorType* find_xpk_accelerator_type(std::string_view xpk_name);

// The canonical (xpk) name of an accelerator type given in either spelling: `name` itself when
// it is in the table, else the TPU name of the table that the spec's spelling stands for:
// without a leading "tpu-", and with Cloud TPU's "v5e-" read as xpk's "v5litepod-"
// ("tpu-v5e-256" -> "v5litepod-256"). nullopt otherwise: xpk would refuse it.
std::optional<std::string> canonical_accelerator_type(std::string_view name);

// Up to `n` names of the table (of class `only`, or all) closest to `name`, best first, ranked
// as xpk's argparse ranks its "closest matches" (difflib, see util/closest.h). `only` = kTpu
// gives what `--tpu-type` would suggest, nullopt what `--device-type` would.
std::vector<std::string> closest_xpk_accelerator_types(std::string_view name,
                                                       std::optional<DeviceClass> only,
                                                       std::size_t n = 5);

// Up to `n` names of the table (of class `only`, or all) for a person who mistyped `name`: the
// names within two edits first (`v4-65` -> `v4-64`), then xpk's own ranking as above. What
// `falcon config validate` suggests.
std::vector<std::string> suggest_xpk_accelerator_types(std::string_view name,
                                                       std::optional<DeviceClass> only,
                                                       std::size_t n = 5);

}  // namespace falcon
