// repos.yaml, as `falcon` reads it from disk: parse_fabric_config must either return a config or
// throw ClusterConfigError (the contract in falcon/config.h). Any other exception escapes and
// is reported as a crash, like a signal, a sanitizer error, a leak or a hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "falcon/config.h"
#include "falcon/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const falcon::FabricConfig config = falcon::parse_fabric_config(text, "fuzz.yaml");
    (void)config;
  } catch (const falcon::ClusterConfigError& e) {
    if (e.problems().empty()) __builtin_trap();  // an error must say what is wrong
  }
  return 0;
}
