#include "falcon/values.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <utility>

#include "util/names.h"
#include "util/time_format.h"

namespace falcon {

InvalidValueError::InvalidValueError(std::string field, const std::string& problem)
    : FalconError(fmt::format("{}: {}", field, problem)), field_(std::move(field)) {}

void InvalidValueError::add_details(nlohmann::json& out) const { out["field"] = field_; }

namespace {

// The escaped form of `value`'s first `max_bytes` bytes (cut on a character boundary) and how
// many bytes of `value` it shows.
std::pair<std::string, std::size_t> escaped_prefix(std::string_view value, std::size_t max_bytes) {
  std::string out;
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
  return {out, i};
}

}  // namespace

std::string quote_value(std::string_view value, std::size_t max_bytes) {
  auto [shown, used] = escaped_prefix(value, max_bytes);
  if (used == value.size()) return "'" + shown + "'";
  return fmt::format("'{}...' ({} bytes)", shown, value.size());
}

std::string printable(std::string_view text, std::size_t max_bytes) {
  auto [shown, used] = escaped_prefix(text, max_bytes);
  if (used == text.size()) return shown;
  return fmt::format("{}... ({} bytes)", shown, text.size());
}

std::optional<std::string> workload_name_problem(std::string_view value) {
  if (is_xpk_name(value)) return std::nullopt;
  if (value.empty()) return "the workload name is empty";
  return fmt::format(
      "{} is not a workload name: it must start with a lower-case letter, contain only "
      "lower-case letters, digits and '-', end with a letter or digit, and have at most {} "
      "characters ([a-z]([-a-z0-9]*[a-z0-9])?, xpk's rule)",
      quote_value(value), kXpkNameMaxLength);
}

void check_workload_name(std::string_view field, std::string_view value) {
  if (auto problem = workload_name_problem(value)) {
    throw InvalidValueError(std::string(field), *problem);
  }
}

void check_cluster_name(std::string_view field, std::string_view value) {
  if (is_dns_label(value)) return;
  throw InvalidValueError(
      std::string(field),
      value.empty() ? std::string("the cluster name is empty")
                    : fmt::format("{} is not a cluster name: cluster names in repos.yaml are "
                                  "lower-case letters, digits and '-', start and end with a "
                                  "letter or digit, and have at most 63 characters",
                                  quote_value(value)));
}

int check_index(std::string_view field, std::int64_t value, int max) {
  if (value < 0 || value > max) {
    throw InvalidValueError(std::string(field),
                            fmt::format("{} is not a whole number from 0 to {}", value, max));
  }
  return static_cast<int>(value);
}

int parse_index(std::string_view field, std::string_view text, int max) {
  // At most 9 digits before any arithmetic: no overflow, whatever the text.
  const bool digits = !text.empty() && text.size() <= 9 &&
                      text.find_first_not_of("0123456789") == std::string_view::npos;
  std::int64_t value = -1;
  if (digits) {
    value = 0;
    for (const char c : text) value = value * 10 + (c - '0');
  }
  if (!digits || value > max) {
    throw InvalidValueError(std::string(field), fmt::format("{} is not a whole number from 0 to {}",
                                                            quote_value(text), max));
  }
  return static_cast<int>(value);
}

std::string check_since(std::string_view field, std::string_view text,
                        std::chrono::system_clock::time_point now) {
  const auto fail = [&](const std::string& problem) {
    return InvalidValueError(std::string(field), problem);
  };
  if (parse_rfc3339_nanos(text)) return std::string(text);
  if (is_rfc3339_form(text)) {
    throw fail(
        fmt::format("{} is out of range: times from 1677-09-22 to 2262-04-11 can be "
                    "read",
                    quote_value(text)));
  }
  const auto not_a_time = [&] {
    return fail(fmt::format(
        "{} is neither an RFC 3339 time (2026-04-13T08:00:00Z) nor an age like 90s, 30m, 6h, 2d",
        quote_value(text)));
  };
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits + 1 != text.size()) throw not_a_time();
  std::int64_t unit = 0;
  switch (text.back()) {
    case 's':
      unit = 1;
      break;
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86400;
      break;
    default:
      throw not_a_time();
  }
  const std::int64_t since_epoch =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  // No log is older than 1970; checking the digits first keeps the product from overflowing.
  std::int64_t amount = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    amount = amount * 10 + (text[i] - '0');
    if (amount > since_epoch / unit) {
      throw fail(
          fmt::format("the age {} reaches back before 1970; give a smaller age or an RFC 3339 time",
                      quote_value(text)));
    }
  }
  return format_iso8601(now - std::chrono::seconds(amount * unit));
}

}  // namespace falcon
