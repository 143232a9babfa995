// Hand-written checks of the names the layer accepts: Kubernetes and xpk names, GCP project ids
// and locations. No std::regex here: its matcher recurses once per character and overflows the
// stack on long input, and these rules are simple enough to state as loops.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace falcon {

// A DNS label as Kubernetes uses it (namespaces): [a-z0-9]([-a-z0-9]*[a-z0-9])?, 1..max_length.
bool is_dns_label(std::string_view s, std::size_t max_length = 63);

// xpk's rule for --cluster and --workload: [a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters.
inline constexpr std::size_t kXpkNameMaxLength = 40;
bool is_xpk_name(std::string_view s);

// A GCP project id: [a-z]([-a-z0-9]*[a-z0-9])?, at most 30 characters, optionally after a
// domain (`example.com:my-project`, the legacy domain-scoped form). Google's lower bound of 6
// characters is not checked.
bool is_gcp_project_id(std::string_view s);

// The two shapes of a GCP location: a region (`us-central1`, `northamerica-northeast2`) is
// `<letters>-<letters><digits>`; a zone (`us-central2-b`) is a region, `-` and a short suffix
// of lowercase letters and digits starting with a letter.
enum class LocationKind { kRegion, kZone };
inline constexpr std::size_t kGcpLocationMaxLength = 63;
std::optional<LocationKind> gcp_location_kind(std::string_view s);

// The region of a location: a zone without its suffix (`us-central2-b` -> `us-central2`), a
// region itself. Meant for values gcp_location_kind accepts; anything else is returned whole.
std::string region_of(std::string_view location);

// The length of the UTF-8 sequence that starts at `s[i]` (1 for ASCII, 2..4 otherwise), or 0
// when the bytes there are not a well-formed one (overlong forms and surrogates included).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

}  // namespace falcon
