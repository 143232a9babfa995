// The stdout of `xpk workload list`, which comes from a subprocess falcon does not control:
// parse_workload_list never throws, and every row it returns maps to one of the five states.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "falcon/model.h"
#include "xpk/list_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const std::string_view line : falcon::xpk::split_output_lines(text)) {
    if (line.empty() || line.find_first_of("\r\n") != std::string_view::npos) __builtin_trap();
  }
  const auto list = falcon::xpk::parse_workload_list(text);
  if (!list) return 0;
  for (const auto& row : list->rows) {
    if (!falcon::is_valid_state(falcon::xpk::map_row_state(row))) __builtin_trap();
  }
  return 0;
}
