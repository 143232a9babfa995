// What a device type means to the simulator: whether xpk accepts it, TPU, GPU or CPU, how many
// pods (VMs) one slice has, and what the pods' main container is called. The facts come from the
// fleet's own table of xpk's accelerator types (common/xpk_accelerators.h, xpk 1.13.1), so the
// fleet refuses exactly what real xpk refuses; the number of pods is overridable per device type
// from the fleet file (`workers_per_slice:`).
//
//   v4-64 / tpu-v4-64      TPU, 8 workers per slice (the table's VMs per slice)
//   h100-80gb-8            GPU, one pod per node (--num-nodes)
//   n2-standard-32-4       CPU, 4 VMs
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/xpk_accelerators.h"

namespace falcon::fleet {

// xpk's classes of device: kTpu, kGpu, kCpu; to_string gives "tpu", "gpu", "cpu".
using tools::DeviceClass;

// Whether real xpk's `--tpu-type` accepts `value` (its TPU names only: "v4-64", not
// "tpu-v4-64").
bool is_xpk_tpu_type(std::string_view value);
// Whether real xpk's `--device-type` accepts `value` (every name of the table).
bool is_xpk_device_type(std::string_view value);

// What argparse says about `value` given to `flag` when xpk refuses it, in xpk's words:
//   invalid choice: 'tpu-v4-128' (closest matches: tpu7-128, v4-128, tpu7x-128, v4-1280, ...)
// (the caller prefixes `argument --tpu-type: `). nullopt when the value is accepted, or `flag`
// is neither --tpu-type nor --device-type.
std::optional<std::string> xpk_accelerator_choice_error(std::string_view flag,
                                                        std::string_view value);

// The class of `device_type`. `given_as_tpu_type`: it came from --tpu-type, which is always TPU.
// Names outside xpk's table (the spec's "tpu-" spelling included) are classified by their shape.
DeviceClass classify_device(std::string_view device_type, bool given_as_tpu_type);

// Pods per slice: `overrides` (exact name, then without a "tpu-" prefix, then "default") before
// xpk's table (VMs per slice) and, for names outside it, rules by shape; at least 1.
int workers_per_slice(std::string_view device_type, DeviceClass device_class,
                      const std::map<std::string, int>& overrides);

// Accelerators per VM, for Kueue's "N more needed" message (TPU and GPU: xpk's table, else 4 or
// the trailing count; CPU: 0).
int chips_per_vm(std::string_view device_type, DeviceClass device_class);

// The Kubernetes resource a pod set requests: google.com/tpu, nvidia.com/gpu or cpu.
const char* accelerator_resource(DeviceClass device_class);

// The main container's name: `docker_name` (xpk's --docker-name, default jax-tpu), or
// gpu-image on GPU, as xpk's templates do.
std::string container_name(DeviceClass device_class, const std::string& docker_name);

}  // namespace falcon::fleet
