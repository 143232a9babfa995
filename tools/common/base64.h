// Base64 (RFC 4648) for the local fleet and the local Google-protocol server: the standard
// alphabet with padding (Cloud Storage's md5Hash, crc32c and etag, a kubeconfig's
// certificate-authority-data) and the URL-safe alphabet without it (JWTs, page tokens).
//
//   falcon::tools::base64_encode("ab");        // "YWI="
//   falcon::tools::base64url_encode("\xfb\xff");  // "-_8"
//   falcon::tools::base64_decode("YWI");       // "ab": padding is optional
//   falcon::tools::base64_decode("YW=I");      // nullopt
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace falcon::tools {

// `bytes` in the standard alphabet (`+`, `/`), padded with `=` to a multiple of 4 characters.
std::string base64_encode(std::string_view bytes);

// `bytes` in the URL-safe alphabet (`-`, `_`), without padding.
std::string base64url_encode(std::string_view bytes);

// The bytes `text` encodes in the standard alphabet, or nullopt when it is not base64: a
// character outside the alphabet (whitespace included), a length that leaves a single character
// in the last group, or padding that is not the last one or two characters of a text whose
// length it brings to a multiple of 4. Padding is optional; unused low bits of the last
// character are ignored.
std::optional<std::string> base64_decode(std::string_view text);

// The same in the URL-safe alphabet.
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace falcon::tools
