// gs://BUCKET[/OBJECT] URIs, checked against Cloud Storage's naming rules. The one parser of
// such URIs: the configuration loader (gcs_bucket), the log exporter and the CLI (--dest) all
// use it, so a name Cloud Storage would refuse is refused up front, with the same words.
//
//   falcon::parse_gcs_uri("gs://falcon-logs/runs/llama/");  // {"falcon-logs", "runs/llama/"}
//   falcon::parse_gcs_uri("gs://Falcon");                   // throws std::invalid_argument
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace falcon {

struct GcsUri {
  std::string bucket;
  std::string object;  // may be empty (the bucket itself) or end with '/' (a prefix)
  bool operator==(const GcsUri&) const = default;
};

inline constexpr std::size_t kGcsObjectNameMaxBytes = 1024;
// gs:// + the longest bucket name + / + the longest object name.
inline constexpr std::size_t kGcsUriMaxBytes = 5 + 222 + 1 + kGcsObjectNameMaxBytes;

// Splits `uri` into bucket and object name. Throws std::invalid_argument whose what() says what
// is wrong (quoting at most a short prefix of `uri`) when:
//  - it does not start with `gs://`, or names no bucket;
//  - the bucket name breaks Cloud Storage's rules: 3 to 63 characters (up to 222 when it has
//    dots, each dot-separated part at most 63), only lowercase letters, digits, `-`, `_` and
//    `.`, starting and ending with a letter or digit, not an IPv4 address in dotted-decimal form,
//    not starting with `goog`, not containing `google` or a look-alike such as `g00gle`;
//  - the object name breaks them: more than 1024 bytes, not valid UTF-8, a control character
//    (Cloud Storage forbids CR and LF; every C0 control and DEL is refused here, since no tool
//    shows such a name faithfully), `.` or `..` as the whole name or as a `/`-separated part of
//    it, or starting with `.well-known/acme-challenge/`.
// Pure; never blocks.
GcsUri parse_gcs_uri(std::string_view uri);

}  // namespace falcon
