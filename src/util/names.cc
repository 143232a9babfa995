#include "util/names.h"

#include <algorithm>

namespace falcon {
namespace {

bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_lower_or_digit(char c) { return is_lower(c) || is_digit(c); }

// [first]([-a-z0-9]*[a-z0-9])?: `first` checks the first character.
template <typename First>
bool is_label(std::string_view s, std::size_t max_length, First first) {
  if (s.empty() || s.size() > max_length || !first(s.front())) return false;
  if (!is_lower_or_digit(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_lower_or_digit(c) || c == '-'; });
}

}  // namespace

bool is_dns_label(std::string_view s, std::size_t max_length) {
  return is_label(s, max_length, is_lower_or_digit);
}

bool is_xpk_name(std::string_view s) { return is_label(s, kXpkNameMaxLength, is_lower); }

bool is_gcp_project_id(std::string_view s) {
  constexpr std::size_t kIdMax = 30, kDomainMax = 253;
  const auto colon = s.find(':');
  if (colon != std::string_view::npos) {
    std::string_view domain = s.substr(0, colon);
    if (domain.empty() || domain.size() > kDomainMax) return false;
    while (true) {
      const auto dot = domain.find('.');
      if (!is_dns_label(domain.substr(0, dot))) return false;
      if (dot == std::string_view::npos) break;
      domain.remove_prefix(dot + 1);
    }
    s.remove_prefix(colon + 1);
  }
  return is_label(s, kIdMax, is_lower);
}

std::optional<LocationKind> gcp_location_kind(std::string_view s) {
  if (s.empty() || s.size() > kGcpLocationMaxLength) return std::nullopt;
  // <letters>
  std::size_t i = 0;
  while (i < s.size() && is_lower(s[i])) ++i;
  if (i == 0 || i == s.size() || s[i] != '-') return std::nullopt;
  // -<letters><digits>
  std::size_t j = ++i;
  while (j < s.size() && is_lower(s[j])) ++j;
  if (j == i) return std::nullopt;
  std::size_t k = j;
  while (k < s.size() && is_digit(s[k])) ++k;
  if (k == j) return std::nullopt;
  if (k == s.size()) return LocationKind::kRegion;
  // -<letter><letters or digits>
  if (s[k] != '-' || k + 1 == s.size() || !is_lower(s[k + 1])) return std::nullopt;
  const std::string_view suffix = s.substr(k + 1);
  if (suffix.size() > 8 || !std::all_of(suffix.begin(), suffix.end(), is_lower_or_digit)) {
    return std::nullopt;
  }
  return LocationKind::kZone;
}

std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // at most U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

std::string region_of(std::string_view location) {
  if (gcp_location_kind(location) == LocationKind::kZone) {
    return std::string(location.substr(0, location.rfind('-')));
  }
  return std::string(location);
}

}  // namespace falcon
