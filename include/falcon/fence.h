// Storage fencing of managed workloads (docs/self-healing.md#storage-fencing).
//
// A partition no control plane can see through can leave an old copy of a managed workload
// running while its replacement starts: two writers of one checkpoint. With
// `supervisor.fence: gs://BUCKET/PREFIX` in repos.yaml, falcon keeps one epoch object per managed
// workload, <fence>/<name>/epoch, advances it with a conditional write before it starts any copy
// (the first included), and starts the copy with
//
//   FALCON_FENCE_URI    gs://BUCKET/PREFIX/<name>/epoch
//   FALCON_FENCE_EPOCH  the epoch written for this copy
//
// in its environment. A copy that checks before each checkpoint write (`falcon fence check`,
// `falcon.fence.check()` in Python, or check_fence here) learns that it is superseded the moment
// a newer copy was started, wherever it runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "falcon/config.h"

namespace falcon {

inline constexpr const char* kFenceUriEnv = "FALCON_FENCE_URI";
inline constexpr const char* kFenceEpochEnv = "FALCON_FENCE_EPOCH";

// Where a copy's fence is and the epoch it was started with.
struct FenceTicket {
  std::string uri;  // gs://BUCKET/PREFIX/<name>/epoch
  std::int64_t epoch = 0;
  bool operator==(const FenceTicket&) const = default;
};

// The epoch object of managed workload `name` under `fence` (supervisor.fence:
// gs://BUCKET[/PREFIX]). Throws std::invalid_argument for a fence that is not a gs:// URI.
std::string fence_object_uri(const std::string& fence, const std::string& name);

// The ticket in this process's environment (FALCON_FENCE_URI and FALCON_FENCE_EPOCH); nullopt
// when neither is set (the copy was started without a fence). Throws std::invalid_argument
// naming the variable when only one is set or the epoch is not a number >= 1.
std::optional<FenceTicket> fence_ticket_from_environment();

// Reads the fence object and returns the epoch it holds when that is not newer than
// ticket.epoch. Throws FencedError when it is (a newer copy was started: this one must not
// write), LogRetrievalError when the object cannot be read (fail closed: a copy that cannot
// check should not write either), std::invalid_argument for a uri that is not gs:// or an
// epoch below 1.
// Credentials and endpoints as for log reads: Application Default Credentials (or
// FALCON_ACCESS_TOKEN_FILE), STORAGE_EMULATOR_HOST / settings.storage_endpoint.
std::int64_t check_fence(const FenceTicket& ticket, const GcpSettings& settings = {});

}  // namespace falcon
