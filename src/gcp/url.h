// URL pieces the Google clients need: percent-encoding, form bodies and gs:// URIs.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "falcon/gcs_uri.h"

namespace falcon::gcp {

// Percent-encodes every byte except RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~), so
// `/` becomes %2F. Right for GCS object names in paths and for any query value.
std::string percent_encode(std::string_view text);

// `application/x-www-form-urlencoded` body: `k1=v1&k2=v2`, keys and values percent-encoded.
std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields);

// `url` without its query string and fragment, for error messages: GCS session URIs carry the
// upload id in the query and act as credentials for that upload.
std::string without_query(std::string_view url);

// `base` without trailing slashes.
std::string trim_trailing_slashes(std::string_view base);

using GcsUri = falcon::GcsUri;

// falcon::parse_gcs_uri (falcon/gcs_uri.h): splits `gs://bucket/path/to/object`; throws
// std::invalid_argument when `uri` is not gs://, or names a bucket or object Cloud Storage
// forbids.
GcsUri parse_gcs_uri(std::string_view uri);

// `gs://bucket/object`.
std::string format_gcs_uri(const std::string& bucket, const std::string& object);

}  // namespace falcon::gcp
