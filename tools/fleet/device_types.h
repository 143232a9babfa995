// What a device type means to the simulator: TPU, GPU or CPU, how many pods (VMs) one slice
// has, and what the pods' main container is called. A small built-in table plus rules for the
// usual names, overridable per device type from the fleet file (`workers_per_slice:`).
//
//   tpu-v4-64 / v4-64      TPU, 8 workers per slice (v4 and v5p: N/8; v5e/v6e: N/4 above 8)
//   nvidia-a100-80g        GPU, one pod per node (--num-nodes)
//   n2-standard-32-4       CPU, 4 VMs (the trailing count)
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace falcon::fleet {

enum class DeviceClass { kTpu, kGpu, kCpu };

const char* to_string(DeviceClass device_class);  // "tpu" | "gpu" | "cpu"

// The class of `device_type`. `given_as_tpu_type`: it came from --tpu-type, which is always TPU.
DeviceClass classify_device(std::string_view device_type, bool given_as_tpu_type);

// Pods per slice: `overrides` (exact name, then without a "tpu-" prefix, then "default") before
// the built-in rules; at least 1.
int workers_per_slice(std::string_view device_type, DeviceClass device_class,
                      const std::map<std::string, int>& overrides);

// Accelerators per VM, for Kueue's "N more needed" message (TPU: 4, GPU: the trailing count or
// 8, CPU: 0).
int chips_per_vm(std::string_view device_type, DeviceClass device_class);

// The Kubernetes resource a pod set requests: google.com/tpu, nvidia.com/gpu or cpu.
const char* accelerator_resource(DeviceClass device_class);

// The main container's name: `docker_name` (xpk's --docker-name, default jax-tpu), or
// gpu-image on GPU, as xpk's templates do.
std::string container_name(DeviceClass device_class, const std::string& docker_name);

}  // namespace falcon::fleet
