// The rules for the values a caller gives the layer, in one place. The CLI's flags, the API's
// fields and query parameters and the Python module's arguments all reach these checks (the CLI
// and the API check before anything runs; ClusterFabric checks again, for library callers), so
// a bad value gets the same answer everywhere: InvalidValueError (exit 2, HTTP 400), naming the
// flag or field and the rule, with the value quoted short and escaped: a 100,000-character name
// is echoed as its first 48 bytes and its size, an escape sequence as `\x1b[2J`.
//
//   check_workload_name("workload", "Bad_Name")
//     -> InvalidValueError: workload: 'Bad_Name' is not a workload name: it must start with a
//        lower-case letter, ... ([a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters)
//   parse_index("--rank", "-1", kMaxRank)
//     -> InvalidValueError: --rank: '-1' is not a whole number from 0 to 100000
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "falcon/errors.h"

namespace falcon {

class InvalidValueError : public FalconError {
 public:
  // The message is "<field>: <problem>".
  InvalidValueError(std::string field, const std::string& problem);
  const std::string& field() const { return field_; }
  const char* type_name() const noexcept override { return "InvalidValueError"; }
  void add_details(nlohmann::json& out) const override;

 private:
  std::string field_;
};

// The largest worker index (rank) and slice index the layer reads: more VMs than any slice has
// and more slices than any workload (xpk's largest TPU slice has a few thousand VMs).
inline constexpr int kMaxRank = 100'000;
inline constexpr int kMaxSlice = 100'000;

// `value` in single quotes for a message, short and escaped: control characters and bytes that
// are not UTF-8 are shown as `\n`, `\x1b`; past `max_bytes` it is cut and its size said:
//   quote_value(std::string(50000, 'a')) -> 'aaaa...aaaa...' (50000 bytes)
inline constexpr std::size_t kQuotedPrefixBytes = 48;
std::string quote_value(std::string_view value, std::size_t max_bytes = kQuotedPrefixBytes);
// The same without the quotes, for text shown as it is (a table cell, a parser's message):
//   printable("a\nb") -> a\nb     printable(std::string(5000, 'x'), 8) -> xxxxxxxx... (5000 bytes)
std::string printable(std::string_view text, std::size_t max_bytes);

// xpk's rule for workload names: [a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters.
void check_workload_name(std::string_view field, std::string_view value);
// What check_workload_name says of `value` (without the field), or nullopt when it is a name.
std::optional<std::string> workload_name_problem(std::string_view value);
// The rule for cluster names in repos.yaml: a DNS label, [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most
// 63 characters. A name that keeps the rule but is not registered is UnknownClusterError.
void check_cluster_name(std::string_view field, std::string_view value);

// A whole number from 0 to `max`, as text ("0", "12"): its value.
int parse_index(std::string_view field, std::string_view text, int max);
// The same for a number already parsed (a JSON field, a Python int).
int check_index(std::string_view field, std::int64_t value, int max);

// A start time as the CLI and the API take it: an RFC 3339 time (2026-04-13T08:00:00Z) or an
// age before `now` (90s, 30m, 6h, 2d). Returns the time as RFC 3339. A well-formed time
// outside what the layer can hold (after 2262 or before 1677) is said to be out of range, not
// malformed; an age reaching back before 1970 likewise.
std::string check_since(std::string_view field, std::string_view text,
                        std::chrono::system_clock::time_point now);

}  // namespace falcon
