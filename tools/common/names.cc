#include "common/names.h"

#include <re2/re2.h>

namespace falcon::tools {
namespace {

constexpr std::size_t kLocationMaxLength = 63;

const RE2& xpk_name_pattern() {
  static const RE2 pattern("[a-z]([-a-z0-9]*[a-z0-9])?");
  return pattern;
}

// Group 1 is the region of either shape.
const RE2& region_pattern() {
  static const RE2 pattern("([a-z]+-[a-z]+[0-9]+)");
  return pattern;
}
const RE2& zone_pattern() {
  static const RE2 pattern("([a-z]+-[a-z]+[0-9]+)-[a-z][a-z0-9]{0,3}");
  return pattern;
}

re2::StringPiece piece(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

bool is_xpk_name(std::string_view name) {
  return name.size() <= kXpkNameMaxLength && RE2::FullMatch(piece(name), xpk_name_pattern());
}

std::string xpk_name_error(std::string_view name) {
  return "Name must be less than 40 characters and match the pattern "
         "`[a-z]([-a-z0-9]*[a-z0-9])?` Name is currently " +
         std::string(name);
}

std::optional<LocationKind> gcp_location_kind(std::string_view location) {
  if (location.size() > kLocationMaxLength) return std::nullopt;
  if (RE2::FullMatch(piece(location), region_pattern())) return LocationKind::kRegion;
  if (RE2::FullMatch(piece(location), zone_pattern())) return LocationKind::kZone;
  return std::nullopt;
}

std::string region_of(std::string_view location) {
  std::string region;
  if (location.size() <= kLocationMaxLength &&
      RE2::FullMatch(piece(location), zone_pattern(), &region)) {
    return region;
  }
  return std::string(location);
}

}  // namespace falcon::tools
