// Turning a failed xpk (or gcloud) run into text a person can act on.
//
// Real xpk reports most failures on stdout, as `[XPK] ` lines (`... request returned ERROR 1`,
// `XPK failed, error code N`, `Error: ...`), with a captured child's output as a Python bytes
// repr (`[XPK] b'error: ...\n'`) between rows of `*`. stderr carries argparse errors, Python
// tracebacks and the stderr of streamed children (kubectl's `Error from server (NotFound)`).
#pragma once

#include <string>
#include <string_view>

#include "falcon/command_runner.h"

namespace falcon::xpk {

struct FailureText {
  std::string summary;  // "exit code 1", "timed out after 15s", "killed by signal 9 (SIGKILL)"
  std::string details;  // the useful part of what was printed; may be empty
  // "<summary>: <details>", or the summary alone.
  std::string full() const;
};

// Describes a run that did not succeed (`!result.ok()`):
//   details = the last lines of stderr (at most ~20 lines / 2000 characters), then xpk's error
//   lines from stdout: `[XPK] ` lines that report an error, a failure, a non-zero exit or a
//   NotFound, lines framed by rows of `*`, and bytes reprs decoded (`b'...\n'` -> its text).
//   Truncated output is noted. Never throws (beyond std::bad_alloc).
FailureText describe_failure(const CommandResult& result);

// The xpk error lines of `stdout_text` as described above, one per line (no prefix removed).
std::string xpk_error_lines(std::string_view stdout_text);

// Decodes a Python bytes repr `b'...'` / `b"..."` (escapes \n \t \r \\ \' \" \xNN); returns the
// input unchanged when it is not one.
std::string decode_bytes_repr(std::string_view text);

}  // namespace falcon::xpk
