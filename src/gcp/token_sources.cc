#include "gcp/token_sources.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp/api_error.h"
#include "gcp/json_fields.h"
#include "gcp/jwt.h"
#include "gcp/retry.h"
#include "gcp/url.h"

namespace falcon::gcp {
namespace {

using nlohmann::json;
using std::chrono::seconds;

LogRetrievalError credentials_error(const std::string& message) {
  return LogRetrievalError(message, 0, "UNAUTHENTICATED");
}

// The whole file, or a reason it could not be read.
std::string read_whole_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw credentials_error(
        fmt::format("{} {} cannot be read: {}", what, path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw credentials_error(fmt::format("{} {} cannot be read", what, path));
  return std::move(text).str();
}

std::string trim(std::string text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// A successful token response: {"access_token": "...", "expires_in": 3599, ...}. The body is
// never quoted in errors: it holds a token.
AccessToken parse_token_response(const HttpResponse& response, const std::string& call) {
  const json body = json::parse(response.body, nullptr, false);
  if (!body.is_object()) {
    throw credentials_error(fmt::format("{} returned a body that is not a JSON object", call));
  }
  AccessToken token;
  token.value = string_field(body, "access_token");
  if (token.value.empty()) {
    throw credentials_error(fmt::format("{} returned no access_token", call));
  }
  // Google's access tokens live at most 12 hours: a longer stated lifetime, or one no clock can
  // add to a time, is read as 12 hours, a negative one as 0.
  constexpr std::int64_t kMaxLifetimeS = 12 * 3600;
  std::int64_t lifetime_s = token.lifetime.count();
  if (const json& v = member_or_null(body, "expires_in"); v.is_string()) {
    lifetime_s = std::strtoll(v.get<std::string>().c_str(), nullptr, 10);
  } else if (v.is_number()) {
    lifetime_s = integer_field<std::int64_t>(body, "expires_in", kMaxLifetimeS);
  }
  token.lifetime = seconds(std::clamp<std::int64_t>(lifetime_s, 0, kMaxLifetimeS));
  return token;
}

// POSTs a form to a token endpoint; returns the 2xx response (its body holds a token).
HttpResponse post_form(HttpClient& http, const Clock& clock, const std::string& url,
                       std::string form_body, const std::string& call) {
  HttpRequest request;
  request.method = "POST";
  request.url = url;
  request.headers.set("Content-Type", "application/x-www-form-urlencoded");
  request.headers.set("Accept", "application/json");
  request.body = std::move(form_body);
  request.timeout = std::chrono::seconds(30);
  RetryOptions options;
  options.policy = RetryPolicy::for_token();
  options.call = call;
  options.clock = &clock;
  return send_with_retry(http, std::move(request), options);
}

class AccessTokenFileSource final : public TokenSource {
 public:
  AccessTokenFileSource(std::string path, std::string origin)
      : path_(std::move(path)), origin_(std::move(origin)) {}

  AccessToken fetch() override {
    const std::string what = fmt::format("access token file ({})", origin_);
    std::string token = trim(read_whole_file(path_, what));
    if (token.empty()) throw credentials_error(fmt::format("{} {} is empty", what, path_));
    if (token.find_first_of(" \t\r\n") != std::string::npos) {
      throw credentials_error(
          fmt::format("{} {} must hold one token, without spaces or several lines", what, path_));
    }
    return {std::move(token), std::chrono::minutes(2)};
  }

  std::string description() const override {
    return fmt::format("access token file {} ({})", path_, origin_);
  }

 private:
  std::string path_;
  std::string origin_;
};

class ServiceAccountSource final : public TokenSource {
 public:
  ServiceAccountSource(const json& key, const std::string& origin, std::shared_ptr<HttpClient> http,
                       std::shared_ptr<Clock> clock)
      : http_(std::move(http)), clock_(std::move(clock)) {
    client_email_ = string_field(key, "client_email");
    private_key_ = string_field(key, "private_key");
    private_key_id_ = string_field(key, "private_key_id");
    token_uri_ = string_field(key, "token_uri");
    if (token_uri_.empty()) token_uri_ = kDefaultTokenEndpoint;
    std::vector<std::string> missing;
    if (client_email_.empty()) missing.push_back("client_email");
    if (private_key_.empty()) missing.push_back("private_key");
    if (!missing.empty()) {
      throw credentials_error(
          fmt::format("service account key from {} lacks {}", origin, fmt::join(missing, " and ")));
    }
    try {
      check_rsa_private_key(private_key_);
    } catch (const std::invalid_argument& e) {
      throw credentials_error(
          fmt::format("service account key from {} ({}): {}", origin, client_email_, e.what()));
    }
    description_ = fmt::format("service account {} (key from {})", client_email_, origin);
  }

  AccessToken fetch() override {
    const auto iat = std::chrono::duration_cast<seconds>(clock_->now().time_since_epoch()).count();
    json header = {{"alg", "RS256"}, {"typ", "JWT"}};
    if (!private_key_id_.empty()) header["kid"] = private_key_id_;
    const json claims = {{"iss", client_email_},
                         {"scope", kCloudPlatformScope},
                         {"aud", token_uri_},
                         {"iat", iat},
                         {"exp", iat + 3600}};
    const std::string assertion = make_signed_jwt(header.dump(), claims.dump(), private_key_);
    const std::string call =
        fmt::format("token exchange at {} for {}", without_query(token_uri_), client_email_);
    const HttpResponse response =
        post_form(*http_, *clock_, token_uri_,
                  form_encode({{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
                               {"assertion", assertion}}),
                  call);
    return parse_token_response(response, call);
  }

  std::string description() const override { return description_; }

 private:
  std::shared_ptr<HttpClient> http_;
  std::shared_ptr<Clock> clock_;
  std::string client_email_;
  std::string private_key_;
  std::string private_key_id_;
  std::string token_uri_;
  std::string description_;
};

class AuthorizedUserSource final : public TokenSource {
 public:
  AuthorizedUserSource(const json& info, const std::string& origin, std::string token_endpoint,
                       std::shared_ptr<HttpClient> http, std::shared_ptr<Clock> clock)
      : http_(std::move(http)), clock_(std::move(clock)), token_uri_(std::move(token_endpoint)) {
    client_id_ = string_field(info, "client_id");
    client_secret_ = string_field(info, "client_secret");
    refresh_token_ = string_field(info, "refresh_token");
    quota_project_ = string_field(info, "quota_project_id");
    std::vector<std::string> missing;
    if (client_id_.empty()) missing.push_back("client_id");
    if (client_secret_.empty()) missing.push_back("client_secret");
    if (refresh_token_.empty()) missing.push_back("refresh_token");
    if (!missing.empty()) {
      throw credentials_error(fmt::format("authorized_user credentials from {} lack {}", origin,
                                          fmt::join(missing, ", ")));
    }
    const std::string account = string_field(info, "account");
    description_ = account.empty()
                       ? fmt::format("user credentials from {}", origin)
                       : fmt::format("user credentials for {} from {}", account, origin);
  }

  AccessToken fetch() override {
    const std::string call =
        fmt::format("token refresh at {} for {}", without_query(token_uri_), description_);
    const HttpResponse response = post_form(*http_, *clock_, token_uri_,
                                            form_encode({{"grant_type", "refresh_token"},
                                                         {"client_id", client_id_},
                                                         {"client_secret", client_secret_},
                                                         {"refresh_token", refresh_token_}}),
                                            call);
    AccessToken token = parse_token_response(response, call);
    // The server may rotate the refresh token.
    const json body = json::parse(response.body, nullptr, false);
    if (const std::string rotated = string_field(body, "refresh_token"); !rotated.empty()) {
      refresh_token_ = rotated;
    }
    return token;
  }

  std::string description() const override { return description_; }
  std::string quota_project() const override { return quota_project_; }

 private:
  std::shared_ptr<HttpClient> http_;
  std::shared_ptr<Clock> clock_;
  std::string token_uri_;
  std::string client_id_;
  std::string client_secret_;
  std::string refresh_token_;
  std::string quota_project_;
  std::string description_;
};

class MetadataServerSource final : public TokenSource {
 public:
  MetadataServerSource(std::string host, std::shared_ptr<HttpClient> http,
                       std::shared_ptr<Clock> clock, bool quick_probe)
      : host_(std::move(host)),
        http_(std::move(http)),
        clock_(std::move(clock)),
        quick_probe_(quick_probe) {}

  AccessToken fetch() override {
    HttpRequest request;
    request.url =
        fmt::format("http://{}/computeMetadata/v1/instance/service-accounts/default/token", host_);
    request.headers.set("Metadata-Flavor", "Google");
    request.follow_redirects = true;
    RetryOptions options;
    options.policy = RetryPolicy::for_token();
    if (quick_probe_) {
      options.policy.max_attempts = 1;
      request.connect_timeout = std::chrono::seconds(1);
      request.timeout = std::chrono::seconds(3);
    } else {
      request.timeout = std::chrono::seconds(30);
    }
    options.call = fmt::format("metadata server {}", host_);
    options.clock = clock_.get();
    const HttpResponse response = send_with_retry(*http_, std::move(request), options);
    return parse_token_response(response, options.call);
  }

  std::string description() const override { return fmt::format("metadata server {}", host_); }

 private:
  std::string host_;
  std::shared_ptr<HttpClient> http_;
  std::shared_ptr<Clock> clock_;
  bool quick_probe_;
};

}  // namespace

std::unique_ptr<TokenSource> make_access_token_file_source(std::string path, std::string origin) {
  return std::make_unique<AccessTokenFileSource>(std::move(path), std::move(origin));
}

std::unique_ptr<TokenSource> make_credentials_json_source(const std::string& json_text,
                                                          const std::string& origin,
                                                          const GcpEndpoints& endpoints,
                                                          std::shared_ptr<HttpClient> http,
                                                          std::shared_ptr<Clock> clock) {
  // Parse without exceptions: nlohmann's messages quote the text around an error, which may be
  // key material.
  const json info = json::parse(json_text, nullptr, false);
  if (!info.is_object()) {
    throw credentials_error(fmt::format("credentials from {} are not a JSON object", origin));
  }
  const std::string type = string_field(info, "type");
  if (type == "service_account") {
    return std::make_unique<ServiceAccountSource>(info, origin, std::move(http), std::move(clock));
  }
  if (type == "authorized_user") {
    return std::make_unique<AuthorizedUserSource>(info, origin, endpoints.token, std::move(http),
                                                  std::move(clock));
  }
  if (type.empty()) {
    throw credentials_error(fmt::format("credentials from {} have no \"type\"", origin));
  }
  throw credentials_error(fmt::format(
      "credentials from {} have type \"{}\"; supported: service_account, authorized_user", origin,
      type));
}

std::unique_ptr<TokenSource> make_credentials_file_source(const std::string& path,
                                                          const std::string& origin,
                                                          const GcpEndpoints& endpoints,
                                                          std::shared_ptr<HttpClient> http,
                                                          std::shared_ptr<Clock> clock) {
  const std::string where = fmt::format("{} ({})", path, origin);
  const std::string text = read_whole_file(path, "credentials file from " + origin + ":");
  return make_credentials_json_source(text, where, endpoints, std::move(http), std::move(clock));
}

std::unique_ptr<TokenSource> make_metadata_server_source(std::string host,
                                                         std::shared_ptr<HttpClient> http,
                                                         std::shared_ptr<Clock> clock,
                                                         bool quick_probe) {
  return std::make_unique<MetadataServerSource>(std::move(host), std::move(http), std::move(clock),
                                                quick_probe);
}

}  // namespace falcon::gcp
