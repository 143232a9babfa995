#include "falcon/gcs_uri.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "falcon/values.h"
#include "util/names.h"

namespace falcon {
namespace {

bool is_bucket_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}
bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool is_dotted_ipv4(std::string_view name) {
  int parts = 0;
  while (true) {
    const auto dot = name.find('.');
    const std::string_view part = name.substr(0, dot);
    if (part.empty() || part.size() > 3 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    ++parts;
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  return parts == 4;
}

// What is wrong with a bucket name, or "" when nothing.
std::string bucket_problem(std::string_view name) {
  const bool dotted = name.find('.') != std::string_view::npos;
  if (name.size() < 3 || name.size() > (dotted ? 222u : 63u)) {
    return dotted ? "must be 3 to 222 characters long" : "must be 3 to 63 characters long";
  }
  if (!std::all_of(name.begin(), name.end(), is_bucket_char)) {
    return "may contain only lowercase letters, digits, '-', '_' and '.'";
  }
  if (!is_alnum(name.front()) || !is_alnum(name.back())) {
    return "must start and end with a letter or a digit";
  }
  for (std::string_view rest = name;;) {
    const auto dot = rest.find('.');
    if (rest.substr(0, dot).size() > 63) return "has a dot-separated part longer than 63";
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  if (is_dotted_ipv4(name)) return "must not be an IP address";
  if (name.starts_with("goog")) return "must not start with 'goog'";
  std::string folded(name);
  std::replace(folded.begin(), folded.end(), '0', 'o');
  if (folded.find("google") != std::string::npos) {
    return "must not contain 'google' or a look-alike of it";
  }
  return "";
}

// What is wrong with an object name (or prefix), or "" when nothing.
std::string object_problem(std::string_view name) {
  if (name.size() > kGcsObjectNameMaxBytes) {
    return fmt::format("is {} bytes long; Cloud Storage allows at most {}", name.size(),
                       kGcsObjectNameMaxBytes);
  }
  for (std::size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7F) return "contains a control character";
    const std::size_t n = utf8_sequence_length(name, i);
    if (n == 0) return "is not valid UTF-8";
    i += n;
  }
  for (std::string_view rest = name;;) {
    const auto slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    if (part == "." || part == "..") return "must not have '.' or '..' as a path part";
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (name.starts_with(".well-known/acme-challenge/")) {
    return "must not start with '.well-known/acme-challenge/'";
  }
  return "";
}

}  // namespace

GcsUri parse_gcs_uri(std::string_view uri) {
  constexpr std::string_view kScheme = "gs://";
  if (!uri.starts_with(kScheme)) {
    throw std::invalid_argument(
        fmt::format("{} is not a gs:// URI (gs://BUCKET/PATH)", quote_value(uri)));
  }
  const std::string_view rest = uri.substr(kScheme.size());
  const auto slash = rest.find('/');
  const std::string_view bucket = rest.substr(0, slash);
  const std::string_view object =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (bucket.empty()) {
    throw std::invalid_argument(fmt::format("{} names no bucket", quote_value(uri)));
  }
  if (const std::string p = bucket_problem(bucket); !p.empty()) {
    throw std::invalid_argument(
        fmt::format("{}: the bucket name {} {}", quote_value(uri), quote_value(bucket), p));
  }
  if (const std::string p = object_problem(object); !p.empty()) {
    throw std::invalid_argument(
        fmt::format("{}: the object name {} {}", quote_value(uri), quote_value(object), p));
  }
  return GcsUri{std::string(bucket), std::string(object)};
}

}  // namespace falcon
