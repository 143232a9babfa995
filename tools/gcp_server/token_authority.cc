#include "gcp_server/token_authority.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "common/base64.h"
#include "gcp_server/wire.h"

namespace falcon::fake {

using nlohmann::json;

namespace {

constexpr std::string_view kJwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer";
constexpr std::string_view kGoogleTokenUrl = "https://oauth2.googleapis.com/token";

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

std::string bio_string(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(len));
}

PkeyPtr read_public_key(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return PkeyPtr(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
}

bool verify_rs256(const std::string& pem, std::string_view signed_part,
                  const std::string& signature) {
  PkeyPtr key = read_public_key(pem);
  if (!key) return false;
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1) {
    return false;
  }
  return EVP_DigestVerify(
             ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
             reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size()) == 1;
}

OAuthError invalid_grant(const std::string& description) {
  return OAuthError(400, "invalid_grant", description);
}

}  // namespace

TokenAuthority::TokenAuthority(std::shared_ptr<Clock> clock, bool strict)
    : clock_(std::move(clock)), strict_(strict) {}

std::int64_t TokenAuthority::now_seconds() const {
  return std::chrono::duration_cast<std::chrono::seconds>(clock_->now().time_since_epoch()).count();
}

std::string TokenAuthority::issue_locked(std::chrono::seconds lifetime) {
  std::string token = "ya29.falcon-fake." + random_hex(24);
  issued_[token] = now_seconds() + lifetime.count();
  return token;
}

std::string TokenAuthority::issue(std::chrono::seconds lifetime) {
  std::lock_guard lock(mutex_);
  return issue_locked(lifetime);
}

void TokenAuthority::add_fixed(const std::string& token) {
  std::lock_guard lock(mutex_);
  fixed_.insert(token);
}

bool TokenAuthority::valid(const std::string& token) const {
  std::lock_guard lock(mutex_);
  if (fixed_.count(token)) return true;
  auto it = issued_.find(token);
  return it != issued_.end() && it->second > now_seconds();
}

void TokenAuthority::clear_issued() {
  std::lock_guard lock(mutex_);
  issued_.clear();
}

json TokenAuthority::metadata_token() {
  return json{
      {"access_token", issue()}, {"expires_in", kLifetime.count()}, {"token_type", "Bearer"}};
}

json TokenAuthority::grant(const std::map<std::string, std::string>& form,
                           const std::vector<std::string>& token_urls) {
  auto field = [&](const std::string& name) -> std::string {
    auto it = form.find(name);
    return it == form.end() ? std::string() : it->second;
  };
  const std::string grant_type = field("grant_type");
  if (grant_type.empty()) {
    throw OAuthError(400, "invalid_request", "Missing required parameter: grant_type");
  }
  if (grant_type == kJwtBearer) {
    const std::string assertion = field("assertion");
    if (assertion.empty()) {
      throw OAuthError(400, "invalid_request", "Missing required parameter: assertion");
    }
    return jwt_bearer(assertion, token_urls);
  }
  if (grant_type == "refresh_token") {
    for (const char* required : {"client_id", "client_secret", "refresh_token"}) {
      if (field(required).empty()) {
        throw OAuthError(400, "invalid_request",
                         fmt::format("Missing required parameter: {}", required));
      }
    }
    std::lock_guard lock(mutex_);
    if (strict_ && !refresh_tokens_.count(field("refresh_token"))) {
      throw invalid_grant("Bad Request");
    }
    return json{{"access_token", issue_locked(kLifetime)},
                {"expires_in", kLifetime.count()},
                {"token_type", "Bearer"},
                {"scope", "https://www.googleapis.com/auth/cloud-platform"}};
  }
  throw OAuthError(400, "unsupported_grant_type", "Invalid grant_type: " + grant_type);
}

json TokenAuthority::jwt_bearer(const std::string& assertion,
                                const std::vector<std::string>& token_urls) {
  const auto dot1 = assertion.find('.');
  const auto dot2 = dot1 == std::string::npos ? dot1 : assertion.find('.', dot1 + 1);
  if (dot2 == std::string::npos || assertion.find('.', dot2 + 1) != std::string::npos) {
    throw invalid_grant("Invalid JWT: expected header.payload.signature");
  }
  const auto header_raw = tools::base64url_decode(std::string_view(assertion).substr(0, dot1));
  const auto claims_raw =
      tools::base64url_decode(std::string_view(assertion).substr(dot1 + 1, dot2 - dot1 - 1));
  const auto signature = tools::base64url_decode(std::string_view(assertion).substr(dot2 + 1));
  if (!header_raw || !claims_raw || !signature || signature->empty()) {
    throw invalid_grant("Invalid JWT: not base64url");
  }
  const json header = json::parse(*header_raw, nullptr, false);
  const json claims = json::parse(*claims_raw, nullptr, false);
  if (!header.is_object() || !claims.is_object()) {
    throw invalid_grant("Invalid JWT: header and claims must be JSON objects");
  }
  if (header.value("alg", "") != "RS256") {
    throw invalid_grant("Invalid JWT: the signing algorithm must be RS256");
  }
  const std::string iss = claims.value("iss", "");
  if (iss.empty()) throw invalid_grant("Invalid JWT: no iss claim");
  const std::string aud = claims.value("aud", "");
  if (aud != kGoogleTokenUrl &&
      std::find(token_urls.begin(), token_urls.end(), aud) == token_urls.end()) {
    throw invalid_grant(fmt::format("Invalid JWT audience: \"{}\"", aud));
  }
  if (!claims.contains("iat") || !claims["iat"].is_number() || !claims.contains("exp") ||
      !claims["exp"].is_number()) {
    throw invalid_grant("Invalid JWT: iat and exp claims are required");
  }
  const auto iat = claims["iat"].get<std::int64_t>();
  const auto exp = claims["exp"].get<std::int64_t>();
  const std::int64_t now = now_seconds();
  constexpr std::int64_t kSkew = 300;
  if (exp <= now || iat > now + kSkew || exp - iat > 3600 || exp <= iat) {
    throw invalid_grant(
        "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
        "timeframe. Check your iat and exp values in the JWT claim.");
  }
  if (claims.value("scope", "").empty()) {
    throw OAuthError(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.");
  }
  std::lock_guard lock(mutex_);
  auto key = public_keys_.find(iss);
  if (key != public_keys_.end()) {
    if (!verify_rs256(key->second, std::string_view(assertion).substr(0, dot2), *signature)) {
      throw invalid_grant("Invalid JWT Signature.");
    }
  } else if (strict_) {
    throw invalid_grant("Invalid JWT Signature.");
  }
  return json{{"access_token", issue_locked(kLifetime)},
              {"expires_in", kLifetime.count()},
              {"token_type", "Bearer"}};
}

void TokenAuthority::register_public_key(const std::string& client_email,
                                         const std::string& public_key_pem) {
  if (!read_public_key(public_key_pem)) {
    throw std::invalid_argument("not a PEM public key for " + client_email);
  }
  std::lock_guard lock(mutex_);
  public_keys_[client_email] = public_key_pem;
}

json TokenAuthority::create_service_account(const std::string& client_email,
                                            const std::string& token_uri) {
  PkeyPtr key(EVP_RSA_gen(2048));
  if (!key) throw std::runtime_error("RSA key generation failed");
  BioPtr priv(BIO_new(BIO_s_mem()));
  BioPtr pub(BIO_new(BIO_s_mem()));
  if (!priv || !pub ||
      PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(pub.get(), key.get()) != 1) {
    throw std::runtime_error("cannot export the generated RSA key");
  }
  const std::string public_pem = bio_string(pub.get());
  register_public_key(client_email, public_pem);
  const auto at = client_email.find('@');
  const std::string project =
      at == std::string::npos ? "falcon-local"
                              : client_email.substr(at + 1, client_email.find('.', at) - at - 1);
  return json{{"type", "service_account"},
              {"project_id", project},
              {"private_key_id", random_hex(20)},
              {"private_key", bio_string(priv.get())},
              {"client_email", client_email},
              {"client_id",
               fmt::format("1{}", std::hash<std::string>{}(client_email) % 100000000000000000ULL)},
              {"auth_uri", "https://accounts.google.com/o/oauth2/auth"},
              {"token_uri", token_uri},
              {"auth_provider_x509_cert_url", "https://www.googleapis.com/oauth2/v1/certs"},
              {"universe_domain", "googleapis.com"}};
}

json TokenAuthority::create_authorized_user(const std::string& token_uri) {
  std::lock_guard lock(mutex_);
  std::string refresh = "1//falcon-fake-" + random_hex(16);
  refresh_tokens_.insert(refresh);
  return json{{"type", "authorized_user"},
              {"client_id", "falcon-fake-client.apps.googleusercontent.com"},
              {"client_secret", "falcon-fake-secret"},
              {"refresh_token", refresh},
              {"token_uri", token_uri},
              {"universe_domain", "googleapis.com"}};
}

}  // namespace falcon::fake
