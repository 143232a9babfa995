// The JSON decoders of every model type (falcon/model.h), which read `--json` output and the
// submission record back: from_json either decodes or throws nlohmann::json::exception (the
// documented contract), and what it decodes encodes and decodes to the same value.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "falcon/model.h"

namespace {

template <typename T>
void decode(const nlohmann::json& j) {
  T value;
  try {
    value = j.get<T>();
  } catch (const nlohmann::json::exception&) {
    return;
  }
  const nlohmann::json encoded = value;
  if (encoded.get<T>() != value) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  decode<falcon::AcceleratorSlot>(j);
  decode<falcon::ClusterConfig>(j);
  decode<falcon::ClusterProbeResult>(j);
  decode<falcon::ClusterSelection>(j);
  decode<falcon::WorkloadSpec>(j);
  decode<falcon::WorkloadHandle>(j);
  decode<falcon::WorkloadStatus>(j);
  decode<falcon::WorkloadInfo>(j);
  decode<falcon::LogFilter>(j);
  decode<falcon::LogExportResult>(j);
  return 0;
}
