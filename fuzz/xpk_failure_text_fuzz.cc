// What a failed xpk run printed, turned into an error message: describe_failure never throws,
// always has a summary, and full() starts with it.
//
// Input: one byte of flags (exit code, signal, timed out, truncation), then stdout, a NUL byte,
// then stderr. The seeds in fuzz/corpus/xpk_failure_text/ follow this layout.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "xpk/failure_text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t flags = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t nul = rest.find('\0');

  falcon::CommandResult result;
  result.stdout_text = std::string(rest.substr(0, nul));
  result.stderr_text = nul == std::string_view::npos ? "" : std::string(rest.substr(nul + 1));
  result.timed_out = (flags & 0x01) != 0;
  result.stdout_truncated = (flags & 0x02) != 0;
  result.stderr_truncated = (flags & 0x04) != 0;
  if ((flags & 0x08) != 0) {
    result.exit_code = -1;
    result.term_signal = flags >> 4;  // 0..15
  } else {
    result.exit_code = flags >> 4;
  }
  result.elapsed = std::chrono::milliseconds(flags * 100);

  const falcon::xpk::FailureText text = falcon::xpk::describe_failure(result);
  if (text.summary.empty()) __builtin_trap();
  if (text.full().rfind(text.summary, 0) != 0) __builtin_trap();
  (void)falcon::xpk::xpk_error_lines(result.stdout_text);
  (void)falcon::xpk::decode_bytes_repr(result.stdout_text);
  return 0;
}
