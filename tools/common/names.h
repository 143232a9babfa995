// The name rules the stand-ins for xpk and gcloud enforce, so that the fleet refuses what the
// real tools refuse.
//
//   falcon::tools::is_xpk_name("llama-8b-01");              // true
//   falcon::tools::gcp_location_kind("us-central2-b");      // LocationKind::kZone
//   falcon::tools::region_of("us-central2-b");              // "us-central2"
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace falcon::tools {

// xpk's `name_type` (src/xpk/parser/validators.py), which --cluster and --workload go through:
// the whole value matches `[a-z]([-a-z0-9]*[a-z0-9])?` and is at most 40 characters long.
inline constexpr std::size_t kXpkNameMaxLength = 40;
bool is_xpk_name(std::string_view name);

// The text of xpk's refusal (argparse prefixes `argument --cluster: `).
std::string xpk_name_error(std::string_view name);

// The two shapes of a Compute Engine location: a region is `<area>-<direction><number>`
// (`us-central1`, `northamerica-northeast2`, `europe-west12`), a zone is a region, `-` and a
// suffix of a lower-case letter and up to 3 more letters or digits (`us-central2-b`,
// `us-central1-ai1a`). At most 63 characters. nullopt for anything else ("Mars", "us", "z").
enum class LocationKind { kRegion, kZone };
std::optional<LocationKind> gcp_location_kind(std::string_view location);

// The region a location is in: a zone without its suffix, a region itself. Anything that is
// neither (see gcp_location_kind) is returned unchanged.
std::string region_of(std::string_view location);

}  // namespace falcon::tools
