#include "util/quote.h"

#include <fmt/format.h>

#include "util/names.h"

namespace falcon {

std::string quote_value(std::string_view value, std::size_t max_bytes) {
  std::string out = "'";
  std::size_t i = 0;
  std::size_t shown = 0;  // bytes of `value` shown so far
  while (i < value.size()) {
    const auto c = static_cast<unsigned char>(value[i]);
    std::size_t step = 1;
    std::string piece;
    if (c == '\n') {
      piece = "\\n";
    } else if (c == '\r') {
      piece = "\\r";
    } else if (c == '\t') {
      piece = "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      piece = fmt::format("\\x{:02x}", c);
    } else if (const std::size_t n = utf8_sequence_length(value, i); n > 0) {
      step = n;
      const bool c1_control =
          n == 2 && c == 0xC2 && static_cast<unsigned char>(value[i + 1]) < 0xA0;
      piece = c1_control ? fmt::format("\\u{:04x}", static_cast<unsigned char>(value[i + 1]))
                         : std::string(value.substr(i, n));
    } else {
      piece = fmt::format("\\x{:02x}", c);
    }
    if (shown + step > max_bytes) break;
    out += piece;
    shown += step;
    i += step;
  }
  out += "'";
  if (i < value.size()) {
    out.insert(out.size() - 1, "...");
    out += fmt::format(" ({} bytes)", value.size());
  }
  return out;
}

}  // namespace falcon
