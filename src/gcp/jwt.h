// JSON Web Tokens signed RS256 (RSASSA-PKCS1-v1_5 with SHA-256), as the OAuth 2.0 JWT-bearer
// grant for service-account keys needs them. OpenSSL does the signing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace falcon::gcp {

// Throws std::invalid_argument when `pem` is not a PEM RSA private key (the message never quotes
// the key). Use it to reject a bad key file before any token is asked for.
void check_rsa_private_key(std::string_view pem);

// The RS256 signature of `data` with `pem_private_key` (PKCS#8 or PKCS#1 PEM), raw bytes.
// Throws std::invalid_argument for a bad key, std::runtime_error if OpenSSL fails.
std::string sign_rs256(std::string_view pem_private_key, std::string_view data);

// `b64(header).b64(payload).b64(signature)`; header and payload are JSON texts.
std::string make_signed_jwt(std::string_view header_json, std::string_view payload_json,
                            std::string_view pem_private_key);

}  // namespace falcon::gcp
