// Base64 (RFC 4648), the layer's one codec: the standard alphabet (`+/`, padded) for
// Kubernetes' certificate data, Cloud Storage's hashes and the stored explanations, the URL
// alphabet (`-_`, unpadded) for JSON Web Tokens. OpenSSL does the work.
//
//   base64_encode("foo")                        -> "Zm9v"
//   base64_encode("\xfb\xff", Base64::kUrl)     -> "-_8"
//   base64_decode("Zm8=")                       -> "fo"
//   base64_decode("Zm8", Base64::kUrl)          -> "fo"   (padding optional in either alphabet)
//   base64_decode("Zm9v!")                      -> nullopt
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace falcon {

enum class Base64 {
  kStandard,  // A-Z a-z 0-9 + /, padded with '=' when encoding
  kUrl,       // A-Z a-z 0-9 - _, unpadded when encoding
};

std::string base64_encode(std::string_view bytes, Base64 alphabet = Base64::kStandard);

// The bytes `text` encodes, or nullopt when it is not base64 of `alphabet`: a character outside
// the alphabet, '=' anywhere but at the end, more than two of them, or a length that leaves a
// dangling character. Line breaks and spaces (as in PEM-style wrapped data) are skipped when
// `skip_whitespace`.
std::optional<std::string> base64_decode(std::string_view text, Base64 alphabet = Base64::kStandard,
                                         bool skip_whitespace = false);

}  // namespace falcon
