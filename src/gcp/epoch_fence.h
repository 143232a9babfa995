// The epoch object of a managed workload's storage fence (docs/self-healing.md#storage-fencing):
// one small Cloud Storage object whose text is a decimal epoch, advanced only by conditional
// writes (ifGenerationMatch), so that two supervisors (a leader and a deposed one) can never
// both believe they wrote the same epoch.
//
//   const std::int64_t epoch = advance_epoch(storage, "gs://b/fence/train/epoch");
//   ... start the copy with FALCON_FENCE_EPOCH=epoch ...
//   read_epoch(storage, uri) > my_epoch  // a newer copy exists: this one must not write
#pragma once

#include <cstdint>
#include <string>

#include "gcp/storage_client.h"

namespace falcon::gcp {

// The epoch `uri` (gs://BUCKET/OBJECT) holds; 0 when the object does not exist. Throws
// LogRetrievalError when it cannot be read or does not hold an epoch (naming the object).
std::int64_t read_epoch(const StorageClient& storage, const std::string& uri);

// Writes the epoch after the one `uri` holds (1 when none) on condition that nobody wrote it
// since it was read, reading again on a lost race (at most 100 times); returns the epoch written.
// Never goes backwards: a write that landed but whose answer was lost only makes the next epoch
// one higher. Throws LogRetrievalError when it cannot read or write the object.
std::int64_t advance_epoch(const StorageClient& storage, const std::string& uri);

}  // namespace falcon::gcp
