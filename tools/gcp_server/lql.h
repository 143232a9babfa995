// The Logging query language (LQL) of Cloud Logging `entries:list` filters: a parser and an
// evaluator over log entries.
//
// Supported, following the language reference and AIP-160:
//   - Booleans: `AND`, `OR`, `NOT` (uppercase only; lowercase words are search terms), `-` as
//     NOT, implicit AND between adjacent terms, parentheses. Precedence: NOT binds tightest,
//     then OR, then AND, so `a OR NOT b AND c OR d` is `(a OR (NOT b)) AND (c OR d)`.
//   - Comparisons `field OP value` with OP in `=` `!=` `:` `<` `<=` `>` `>=` `=~` `!~`.
//     `field:*` tests that the field exists. `NULL_VALUE` matches a JSON null.
//     Value lists: `field = ("a" OR "b")`, also with AND / NOT / implicit AND inside.
//   - Field paths: dotted segments, quoted segments for keys with special characters
//     (`labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"`). Arrays match when any element does.
//   - Values: double-quoted strings with `\"`, `\\` and the usual `\n \t \r` escapes; unquoted
//     words (`ERROR`, `k8s_container`, `42`).
//   - Bare terms (`"disk full"` or `timeout` alone): case-insensitive substring search across
//     every field of the entry.
//   - Functions: `SEARCH("text")` and `SEARCH(field, "text")` — case-insensitive and
//     token-based: every token of the text must appear as a token of the searched text; a
//     backtick-quoted phrase (``SEARCH("`exact phrase`")``) requires its tokens adjacent and in
//     order. `log_id("stdout")` matches entries whose logName ends in `/logs/<url-encoded id>`.
//   - `--` starts a comment that runs to the end of the line.
//
// Semantics chosen where the reference is silent (documented contract of this fake):
//   - `:` is a case-insensitive substring match; `=` and `!=` on strings are case-insensitive
//     too (the LQL overview says "string comparisons aren't case sensitive"); `=~`/`!~` are
//     case-sensitive regular-expression searches (unanchored).
//   - Regular expressions are RE2's, the engine Cloud Logging uses: its syntax (`(?i)` for
//     case-insensitive matching included) and its refusals (no backreferences, no lookaround).
//   - `timestamp` and `receiveTimestamp` compare as instants (nanosecond precision) against an
//     RFC 3339 value with `Z` or an offset, or a bare date (`2024-05-01` is midnight UTC). A
//     value that is not a timestamp is a filter error.
//   - `severity` compares by level (`severity >= WARNING` matches ERROR); values are level
//     names or numbers. An entry without a severity is DEFAULT.
//   - `<`, `<=`, `>`, `>=` compare numerically when both sides are numbers (or numeric
//     strings), otherwise lexicographically (case-insensitive).
//   - A missing field satisfies only `!=` and `!~` (and `NOT ...`).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace falcon::fake::lql {

// A filter that cannot be parsed. `position()` is the 0-based character offset in the filter
// text where the problem was found; what() reads "<problem> at line L, column C".
class FilterError : public std::runtime_error {
 public:
  FilterError(const std::string& message, std::size_t position)
      : std::runtime_error(message), position_(position) {}
  std::size_t position() const { return position_; }

 private:
  std::size_t position_;
};

// What the evaluator reads from a log entry. Implementations may store entries any way they
// like; the JSON values returned must stay valid while the view is alive.
class EntryView {
 public:
  virtual ~EntryView() = default;
  // The value at `path` (unquoted segments, e.g. {"labels", "k8s-pod/app"}), or nullptr when
  // absent. Not called for `timestamp` / `receiveTimestamp` (see time_field).
  virtual const nlohmann::json* find(const std::vector<std::string>& path) const = 0;
  // `timestamp` or `receiveTimestamp` in nanoseconds since the epoch, nullopt when absent.
  virtual std::optional<std::int64_t> time_field(std::string_view name) const = 0;
  // Calls `fn` with every string leaf, every number and boolean rendered as text, and the
  // timestamps rendered as RFC 3339; stops and returns true as soon as `fn` returns true.
  virtual bool any_text(const std::function<bool(std::string_view)>& fn) const = 0;
};

// An EntryView over a LogEntry held as JSON (as sent to entries:write).
class JsonEntryView final : public EntryView {
 public:
  explicit JsonEntryView(const nlohmann::json& entry) : entry_(entry) {}
  const nlohmann::json* find(const std::vector<std::string>& path) const override;
  std::optional<std::int64_t> time_field(std::string_view name) const override;
  bool any_text(const std::function<bool(std::string_view)>& fn) const override;

 private:
  const nlohmann::json& entry_;
};

// Inclusive bounds on `timestamp` implied by a filter: every entry the filter matches has
// lo <= timestamp <= hi. Unbounded sides are the int64 extremes.
struct TimeBounds {
  std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  bool empty() const { return lo > hi; }
};

struct Node;

// A parsed filter. Immutable and safe to evaluate from many threads at once.
//
//   auto f = lql::Filter::parse(R"(resource.type="k8s_container" severity>=WARNING)");
//   if (f.matches(lql::JsonEntryView(entry))) ...
class Filter {
 public:
  // Parses `text`; an empty or all-whitespace/comment filter matches everything.
  // Throws FilterError on a syntax error, an unknown function or a bad timestamp value.
  static Filter parse(std::string_view text);

  Filter();
  ~Filter();
  Filter(Filter&&) noexcept;
  Filter& operator=(Filter&&) noexcept;

  bool matches(const EntryView& entry) const;
  // Bounds on `timestamp` derived from the filter's structure (AND intersects, OR takes the
  // hull, NOT and other terms leave it unbounded). Used to binary-search sorted entries.
  TimeBounds time_bounds() const;
  // A canonical rendering of the parsed tree, for tests and debugging (fully parenthesised).
  std::string debug_string() const;

 private:
  std::unique_ptr<Node> root_;
};

// Severity level of a LogSeverity name (`"ERROR"` → 500) or number; nullopt if neither.
std::optional<int> severity_level(std::string_view text);
// The canonical name of a level (`500` → `"ERROR"`); nullopt for values not in the enum.
std::optional<std::string> severity_name(int level);

}  // namespace falcon::fake::lql
