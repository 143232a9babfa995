// Tokens: bearer checks on the APIs, the OAuth token endpoint (JWT-bearer and refresh-token
// grants) and the metadata server.
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <atomic>

#include "common/base64.h"
#include "gcp_server/wire.h"
#include "server_fixture.h"

namespace falcon::fake::testing {
namespace {

// A clock the test moves by hand.
class ManualClock final : public Clock {
 public:
  std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::time_point(std::chrono::seconds(seconds_.load()));
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    return std::chrono::steady_clock::time_point(std::chrono::seconds(seconds_.load()));
  }
  void sleep_for(std::chrono::nanoseconds d) const override {
    seconds_ += std::chrono::duration_cast<std::chrono::seconds>(d).count();
  }
  void advance(std::chrono::seconds s) { seconds_ += s.count(); }

 private:
  mutable std::atomic<std::int64_t> seconds_{1'714'521'600};
};

std::string sign_rs256(const std::string& private_key_pem, const std::string& input) {
  BIO* bio = BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EXPECT_NE(key, nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::size_t len = 0;
  EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key);
  EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                 input.size());
  std::string sig(len, '\0');
  EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                 reinterpret_cast<const unsigned char*>(input.data()), input.size());
  sig.resize(len);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return sig;
}

std::string make_jwt(const json& key, json claims,
                     json header = {{"alg", "RS256"}, {"typ", "JWT"}}) {
  header["kid"] = key["private_key_id"];
  const std::string input =
      tools::base64url_encode(header.dump()) + "." + tools::base64url_encode(claims.dump());
  return input + "." + tools::base64url_encode(sign_rs256(key["private_key"], input));
}

std::string form_escape(const std::string& s) { return percent_encode(s); }

class Auth : public ServerTest {
 protected:
  Auth() : ServerTest(options(clock_)) {}
  static GcpServerOptions options(const std::shared_ptr<ManualClock>& clock) {
    GcpServerOptions o;
    o.clock = clock;
    return o;
  }

  HttpResult token_request(const std::string& form) {
    return to_result(client_->Post("/token", form, "application/x-www-form-urlencoded"));
  }
  HttpResult jwt_grant(const std::string& jwt) {
    return token_request(
        "grant_type=" + form_escape("urn:ietf:params:oauth:grant-type:jwt-bearer") +
        "&assertion=" + form_escape(jwt));
  }
  json claims(const json& key) const {
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(clock_->now().time_since_epoch()).count();
    return json{{"iss", key["client_email"]},
                {"scope", "https://www.googleapis.com/auth/cloud-platform"},
                {"aud", key["token_uri"]},
                {"iat", now},
                {"exp", now + 3600}};
  }
  // Lists entries with `token`; returns the HTTP status.
  int list_with(const std::string& token) {
    httplib::Headers h{{"Authorization", "Bearer " + token}};
    auto r = client_->Post("/v2/entries:list", h, R"({"resourceNames":["projects/p"]})",
                           "application/json");
    return r ? r->status : 0;
  }

  static inline std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

TEST_F(Auth, LoggingWithoutTokenIs401WithRpcStatus) {
  auto r = to_result(
      client_->Post("/v2/entries:list", R"({"resourceNames":["projects/p"]})", "application/json"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body["error"]["status"], "UNAUTHENTICATED");
  EXPECT_EQ(r.body["error"]["code"], 401);
  EXPECT_EQ(list_with("not-a-token"), 401);
  EXPECT_EQ(list_with(server_.valid_token()), 200);
}

TEST_F(Auth, StorageWithoutTokenIs401WithLegacyErrors) {
  auto r = to_result(client_->Get("/storage/v1/b/bkt/o"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body["error"]["errors"][0]["reason"], "required");
  // The upload body is drained, so the connection stays usable.
  httplib::Client keep("127.0.0.1", server_.port());
  keep.set_keep_alive(true);
  auto up = keep.Post("/upload/storage/v1/b/bkt/o?uploadType=media&name=a",
                      std::string(100000, 'x'), "text/plain");
  ASSERT_TRUE(up);
  EXPECT_EQ(up->status, 401);
  auto again = keep.Get("/_fake/health");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

TEST_F(Auth, AddedTokensAreAccepted) {
  EXPECT_EQ(list_with("fixed-token"), 401);
  server_.add_token("fixed-token");
  EXPECT_EQ(list_with("fixed-token"), 200);
  auto r = client_->Post("/_fake/tokens", R"({"token":"over-http"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(list_with("over-http"), 200);
}

TEST_F(Auth, MetadataServerNeedsTheFlavorHeader) {
  const std::string path = "/computeMetadata/v1/instance/service-accounts/default/token";
  auto denied = client_->Get(path.c_str());
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403);
  auto r = client_->Get(path.c_str(), {{"Metadata-Flavor", "Google"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Metadata-Flavor"), "Google");
  const json body = json::parse(r->body);
  EXPECT_EQ(body["token_type"], "Bearer");
  EXPECT_GT(body["expires_in"].get<int>(), 3000);
  EXPECT_EQ(list_with(body["access_token"]), 200);
  auto info = client_->Get("/computeMetadata/v1/instance/service-accounts/default/?recursive=true",
                           {{"Metadata-Flavor", "Google"}});
  ASSERT_TRUE(info);
  EXPECT_EQ(json::parse(info->body)["aliases"], json::array({"default"}));
  auto project =
      client_->Get("/computeMetadata/v1/project/project-id", {{"Metadata-Flavor", "Google"}});
  ASSERT_TRUE(project);
  EXPECT_EQ(project->body, "falcon-local");
}

TEST_F(Auth, IssuedTokensExpire) {
  auto r = client_->Get("/computeMetadata/v1/instance/service-accounts/default/token",
                        {{"Metadata-Flavor", "Google"}});
  ASSERT_TRUE(r);
  const std::string token = json::parse(r->body)["access_token"];
  EXPECT_EQ(list_with(token), 200);
  clock_->advance(std::chrono::seconds(3600));
  EXPECT_EQ(list_with(token), 401);
  EXPECT_EQ(list_with(server_.valid_token()), 200);
}

TEST_F(Auth, JwtBearerGrantWithASignedAssertion) {
  const json key =
      json::parse(server_.create_service_account_key("sa@proj.iam.gserviceaccount.com"));
  EXPECT_EQ(key["type"], "service_account");
  EXPECT_EQ(key["token_uri"], server_.base_url() + "/token");
  EXPECT_NE(key["private_key"].get<std::string>().find("BEGIN PRIVATE KEY"), std::string::npos);
  const HttpResult r = jwt_grant(make_jwt(key, claims(key)));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["token_type"], "Bearer");
  EXPECT_GT(r.body["expires_in"].get<int>(), 3000);
  EXPECT_EQ(list_with(r.body["access_token"]), 200);
}

TEST_F(Auth, JwtBearerRejectsBadAssertions) {
  const json key =
      json::parse(server_.create_service_account_key("sa@proj.iam.gserviceaccount.com"));
  const json other =
      json::parse(server_.create_service_account_key("other@proj.iam.gserviceaccount.com"));
  auto expect_grant_error = [&](const std::string& jwt, const std::string& error) {
    const HttpResult r = jwt_grant(jwt);
    EXPECT_EQ(r.status, 400) << r.raw;
    EXPECT_EQ(r.body.value("error", ""), error) << r.raw;
    EXPECT_TRUE(r.body.contains("error_description"));
  };
  // Signed by another registered key.
  json forged = claims(key);
  expect_grant_error(make_jwt(other, forged), "invalid_grant");
  // Tampered payload.
  std::string jwt = make_jwt(key, claims(key));
  const auto dot = jwt.find('.');
  json tampered = claims(key);
  tampered["scope"] = "https://www.googleapis.com/auth/devstorage.full_control";
  expect_grant_error(jwt.substr(0, dot + 1) + tools::base64url_encode(tampered.dump()) +
                         jwt.substr(jwt.rfind('.')),
                     "invalid_grant");
  // Wrong algorithm, expired, wrong audience, too long-lived, no scope, malformed.
  expect_grant_error(make_jwt(key, claims(key), {{"alg", "HS256"}}), "invalid_grant");
  json expired = claims(key);
  expired["exp"] = expired["iat"].get<std::int64_t>() - 1;
  expect_grant_error(make_jwt(key, expired), "invalid_grant");
  json aud = claims(key);
  aud["aud"] = "https://example.com/token";
  expect_grant_error(make_jwt(key, aud), "invalid_grant");
  json long_lived = claims(key);
  long_lived["exp"] = long_lived["iat"].get<std::int64_t>() + 7200;
  expect_grant_error(make_jwt(key, long_lived), "invalid_grant");
  json no_scope = claims(key);
  no_scope.erase("scope");
  expect_grant_error(make_jwt(key, no_scope), "invalid_scope");
  expect_grant_error("not-a-jwt", "invalid_grant");
  expect_grant_error("a.b.c", "invalid_grant");
  // Google's own audience is accepted too (Python's google-auth always sends it).
  json google_aud = claims(key);
  google_aud["aud"] = "https://oauth2.googleapis.com/token";
  EXPECT_EQ(jwt_grant(make_jwt(key, google_aud)).status, 200);
}

TEST_F(Auth, RefreshTokenGrant) {
  const json user = json::parse(server_.create_authorized_user());
  EXPECT_EQ(user["type"], "authorized_user");
  const std::string form = "grant_type=refresh_token&client_id=" + form_escape(user["client_id"]) +
                           "&client_secret=" + form_escape(user["client_secret"]) +
                           "&refresh_token=" + form_escape(user["refresh_token"]);
  const HttpResult r = token_request(form);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(list_with(r.body["access_token"]), 200);
  EXPECT_EQ(token_request("grant_type=refresh_token&client_id=x&refresh_token=y").body["error"],
            "invalid_request");
  EXPECT_EQ(token_request("grant_type=password").body["error"], "unsupported_grant_type");
  EXPECT_EQ(token_request("").body["error"], "invalid_request");
}

class StrictAuth : public ServerTest {
 protected:
  StrictAuth() : ServerTest(options()) {}
  static GcpServerOptions options() {
    GcpServerOptions o;
    o.strict_credentials = true;
    return o;
  }
};

TEST_F(StrictAuth, UnknownRefreshTokensAndIssuersAreRejected) {
  auto r = to_result(client_->Post(
      "/token", "grant_type=refresh_token&client_id=a&client_secret=b&refresh_token=made-up",
      "application/x-www-form-urlencoded"));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"], "invalid_grant");

  // A well-formed, well-signed assertion from a key this server never registered.
  GcpServer elsewhere({});
  const json key = json::parse(elsewhere.create_service_account_key("x@p.iam.gserviceaccount.com"));
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  const json claims{{"iss", key["client_email"]},
                    {"scope", "https://www.googleapis.com/auth/cloud-platform"},
                    {"aud", server_.base_url() + "/token"},
                    {"iat", now},
                    {"exp", now + 3600}};
  r = to_result(
      client_->Post("/token",
                    "grant_type=" + form_escape("urn:ietf:params:oauth:grant-type:jwt-bearer") +
                        "&assertion=" + form_escape(make_jwt(key, claims)),
                    "application/x-www-form-urlencoded"));
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"], "invalid_grant");
}

TEST(AuthDisabled, NoTokenNeeded) {
  GcpServerOptions o;
  o.require_auth = false;
  GcpServer server(o);
  server.start();
  httplib::Client c("127.0.0.1", server.port());
  auto r = c.Post("/v2/entries:list", R"({"resourceNames":["projects/p"]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace falcon::fake::testing
