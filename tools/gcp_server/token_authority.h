// Access tokens of the local GCP server: issues them (OAuth token endpoint, metadata server),
// checks them on API calls, and verifies what clients present to get one.
//
// OAuth grants (POST /token, form-encoded, as Google's token endpoint takes them):
//   - `urn:ietf:params:oauth:grant-type:jwt-bearer` with `assertion`: a JWT whose header says
//     alg RS256, whose claims carry `iss`, `scope`, `aud` (this server's /token URL or Google's
//     https://oauth2.googleapis.com/token), `iat` and `exp` (in the future, at most an hour after
//     iat). When `iss` has a registered public key (create_service_account does that), the
//     RS256 signature must verify. Unregistered issuers are accepted after the structural
//     checks unless `strict` is set.
//   - `refresh_token` with `client_id`, `client_secret`, `refresh_token`: registered refresh
//     tokens (create_authorized_user) always work; others only when not `strict`.
// Errors are OAuthError carrying the RFC 6749 code (`invalid_grant`, `invalid_request`, ...).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "falcon/clock.h"

namespace falcon::fake {

class OAuthError : public std::runtime_error {
 public:
  OAuthError(int http_status, std::string code, const std::string& description)
      : std::runtime_error(description), http_status_(http_status), code_(std::move(code)) {}
  int http_status() const { return http_status_; }
  const std::string& code() const { return code_; }

 private:
  int http_status_;
  std::string code_;
};

class TokenAuthority {
 public:
  static constexpr std::chrono::seconds kLifetime{3599};

  TokenAuthority(std::shared_ptr<Clock> clock, bool strict);

  // A new access token valid for `lifetime`.
  std::string issue(std::chrono::seconds lifetime = kLifetime);
  // Accepts `token` forever.
  void add_fixed(const std::string& token);
  bool valid(const std::string& token) const;

  // {"access_token","expires_in","token_type":"Bearer"} for a grant, or throws OAuthError.
  // `token_urls` lists the audiences accepted for JWT assertions.
  nlohmann::json grant(const std::map<std::string, std::string>& form,
                       const std::vector<std::string>& token_urls);
  // {"access_token","expires_in","token_type"} as the metadata server returns it.
  nlohmann::json metadata_token();

  // A new RSA-2048 service account registered with this authority; returns its key file
  // (type service_account, PKCS#8 private_key, client_email, token_uri, ...).
  nlohmann::json create_service_account(const std::string& client_email,
                                        const std::string& token_uri);
  // Registers a public key (PEM SubjectPublicKeyInfo) for JWTs issued by `client_email`.
  // Throws std::invalid_argument when the PEM cannot be read.
  void register_public_key(const std::string& client_email, const std::string& public_key_pem);
  // A new authorized_user credentials file with a registered refresh token.
  nlohmann::json create_authorized_user(const std::string& token_uri);

  void clear_issued();

 private:
  std::string issue_locked(std::chrono::seconds lifetime);
  nlohmann::json jwt_bearer(const std::string& assertion,
                            const std::vector<std::string>& token_urls);
  std::int64_t now_seconds() const;

  std::shared_ptr<Clock> clock_;
  bool strict_;
  mutable std::mutex mutex_;
  std::map<std::string, std::int64_t> issued_;  // token -> expiry (seconds since the epoch)
  std::set<std::string> fixed_;
  std::map<std::string, std::string> public_keys_;  // client_email -> PEM
  std::set<std::string> refresh_tokens_;
};

}  // namespace falcon::fake
