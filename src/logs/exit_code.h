// The exit code of a finished workload, from its logs. xpk's container script ends every
// worker's log with `EXIT_CODE=<n>` (reference xpk.md section 4.2): it runs the command in the
// background, forwards SIGTERM to it, then prints `EXIT_CODE=$?` and exits with that code. When a
// JobSet fails, the workers that did not fail are stopped with SIGTERM and print
// `EXIT_CODE=143`, so the failure's own code is the first non-zero one that is not a
// termination by signal.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "gcp/logging_client.h"

namespace falcon::logs {

// The LQL expression that keeps the non-zero `EXIT_CODE=` lines.
inline constexpr const char* kNonZeroExitCodeGrep = R"(textPayload=~"^EXIT_CODE=[1-9]")";

// n for a line `EXIT_CODE=<n>` (decimal, 0 to 255, trailing whitespace allowed), else nullopt.
std::optional<int> parse_exit_code_line(std::string_view line);

// From the non-zero EXIT_CODE lines of `entries` (oldest first) that belong to `workload`: the
// first that is not 143 or 137 (SIGTERM, SIGKILL: workers stopped because another one failed),
// else the first. nullopt when there is none.
std::optional<int> failure_exit_code(const std::vector<gcp::LogEntry>& entries,
                                     std::string_view workload);

}  // namespace falcon::logs
