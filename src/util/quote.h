// Quoting a value the user gave inside an error message, safely: however long or strange the
// value, the message stays one short line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace falcon {

// The longest part of a value that messages quote.
inline constexpr std::size_t kQuotedPrefixBytes = 48;

// `value` in single quotes for a message. Control characters and bytes that are not UTF-8 are
// shown escaped (`\n`, `\t`, `\x01`), so a value never breaks the message across lines. A value
// longer than `max_bytes` is cut (on a UTF-8 character boundary) and its size is said:
//   quote_value("us-central2-b")           -> 'us-central2-b'
//   quote_value(std::string(50000, 'a'))   -> 'aaaa…aaaa...' (50000 bytes)
std::string quote_value(std::string_view value, std::size_t max_bytes = kQuotedPrefixBytes);

}  // namespace falcon
