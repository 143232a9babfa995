// One line of text for a log stream, as the fast bulk-write path takes it.
#pragma once

#include <cstdint>
#include <string>

namespace falcon::fake {

struct LogLine {
  std::int64_t timestamp_ns = 0;  // nanoseconds since the epoch
  std::string text;               // becomes textPayload
};

}  // namespace falcon::fake
