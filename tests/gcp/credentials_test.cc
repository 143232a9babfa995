// Credentials: each ADC source, the search order, the token cache (DESIGN D7, gcp.md section 3).
#include "gcp/credentials.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "gcp/jwt.h"
#include "gcp/token_sources.h"
#include "support/fake_clock.h"
#include "support/fake_http_client.h"
#include "support/temp_dir.h"
#include "util/base64.h"

namespace falcon::gcp {
namespace {

using nlohmann::json;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::FakeClock;
using testing::FakeHttpClient;
using ::testing::HasSubstr;
using testing::json_response;
using ::testing::Not;
using testing::TempDir;

// ---------------------------------------------------------------------------------------------
// Helpers

// A fresh 2048-bit RSA key pair; the private half as PEM (PKCS#8), the public half kept to check
// signatures.
class TestKey {
 public:
  TestKey() : key_(EVP_RSA_gen(2048)) {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, key_, nullptr, nullptr, 0, nullptr, nullptr);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    pem_.assign(data, static_cast<std::size_t>(n));
    BIO_free(bio);
  }
  ~TestKey() { EVP_PKEY_free(key_); }
  const std::string& pem() const { return pem_; }

  bool verify(const std::string& signing_input, const std::string& signature) const {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    bool ok = EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key_) == 1 &&
              EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                               signature.size(),
                               reinterpret_cast<const unsigned char*>(signing_input.data()),
                               signing_input.size()) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
  }

 private:
  EVP_PKEY* key_;
  std::string pem_;
};

const TestKey& test_key() {
  static const TestKey key;
  return key;
}

std::string service_account_json(const std::string& token_uri) {
  return json{{"type", "service_account"},
              {"project_id", "proj"},
              {"private_key_id", "key-id-1"},
              {"private_key", test_key().pem()},
              {"client_email", "sa@proj.iam.gserviceaccount.com"},
              {"client_id", "1234"},
              {"token_uri", token_uri}}
      .dump();
}

std::string authorized_user_json(const std::string& quota_project = "") {
  json info = {{"type", "authorized_user"},
               {"client_id", "client-1.apps.googleusercontent.com"},
               {"client_secret", "s3cret"},
               {"refresh_token", "1//refresh-abc"}};
  if (!quota_project.empty()) info["quota_project_id"] = quota_project;
  return info.dump();
}

std::map<std::string, std::string> parse_form(const std::string& body) {
  auto decode = [](const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '%' && i + 2 < text.size()) {
        out.push_back(static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16)));
        i += 2;
      } else {
        out.push_back(text[i] == '+' ? ' ' : text[i]);
      }
    }
    return out;
  };
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    const auto end = std::min(body.find('&', start), body.size());
    const std::string pair = body.substr(start, end - start);
    const auto eq = pair.find('=');
    if (eq != std::string::npos) out[decode(pair.substr(0, eq))] = decode(pair.substr(eq + 1));
    start = end + 1;
  }
  return out;
}

HttpResponse token_response(const std::string& token, int expires_in = 3600) {
  return json_response(
      200,
      json{{"access_token", token}, {"expires_in", expires_in}, {"token_type", "Bearer"}}.dump());
}

GcpEndpoints test_endpoints() {
  GcpEndpoints endpoints;
  endpoints.token = "https://oauth.test/token";
  endpoints.metadata_host = "metadata.test";
  return endpoints;
}

std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.status(), "UNAUTHENTICATED") << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected LogRetrievalError";
  return "";
}

// A source that counts fetches and can be told to fail or to block.
class ScriptedSource final : public TokenSource {
 public:
  explicit ScriptedSource(seconds lifetime = seconds(3600)) : lifetime_(lifetime) {}
  AccessToken fetch() override {
    const int n = ++fetches;
    if (before_fetch) before_fetch();
    if (fail_next) {
      fail_next = false;
      throw LogRetrievalError("token endpoint down", 503, "UNAVAILABLE");
    }
    return {"token-" + std::to_string(n), lifetime_};
  }
  std::string description() const override { return "scripted"; }
  std::atomic<int> fetches{0};
  std::atomic<bool> fail_next{false};
  std::function<void()> before_fetch;

 private:
  seconds lifetime_;
};

// ---------------------------------------------------------------------------------------------
// Access-token file

TEST(AccessTokenFile, ReadsTheTrimmedTokenAndAuthorizes) {
  TempDir dir;
  const auto path = dir.write("token", "  ya29.file-token\n");
  auto clock = std::make_shared<FakeClock>();
  Credentials credentials(make_access_token_file_source(path.string(), "gcp.access_token_file"),
                          clock);
  HttpHeaders headers;
  credentials.authorize(headers);
  EXPECT_EQ(headers.get("authorization"), "Bearer ya29.file-token");
  EXPECT_FALSE(headers.get("x-goog-user-project"));
}

TEST(AccessTokenFile, PicksUpATokenRotatedOnDiskWithinAboutAMinute) {
  TempDir dir;
  const auto path = dir.write("token", "first");
  auto clock = std::make_shared<FakeClock>();
  Credentials credentials(make_access_token_file_source(path.string(), "FALCON_ACCESS_TOKEN_FILE"),
                          clock);
  EXPECT_EQ(credentials.token(), "first");
  dir.write("token", "second");
  clock->advance(seconds(30));
  EXPECT_EQ(credentials.token(), "first");
  clock->advance(seconds(31));
  EXPECT_EQ(credentials.token(), "second");
}

TEST(AccessTokenFile, MissingOrEmptyFileIsAClearError) {
  TempDir dir;
  const auto missing = (dir.path() / "nope").string();
  EXPECT_THAT(
      error_text([&] { make_access_token_file_source(missing, "gcp.access_token_file")->fetch(); }),
      HasSubstr(missing + " cannot be read"));
  const auto empty = dir.write("empty", " \n");
  EXPECT_THAT(error_text([&] {
                make_access_token_file_source(empty.string(), "gcp.access_token_file")->fetch();
              }),
              HasSubstr("is empty"));
}

// ---------------------------------------------------------------------------------------------
// Service account keys

TEST(ServiceAccountKey, SignsAnRs256JwtAndExchangesItAtTheKeysTokenUri) {
  auto clock = std::make_shared<FakeClock>();
  auto http = std::make_shared<FakeHttpClient>();
  HttpRequest seen;
  http->on("POST", "https://sa-token.test/token", [&](const HttpRequest& request) {
    seen = request;
    return token_response("ya29.sa-token");
  });
  auto source = make_credentials_json_source(service_account_json("https://sa-token.test/token"),
                                             "test", test_endpoints(), http, clock);
  const AccessToken token = source->fetch();
  EXPECT_EQ(token.value, "ya29.sa-token");
  EXPECT_EQ(token.lifetime, seconds(3600));

  EXPECT_EQ(seen.headers.get("Content-Type"), "application/x-www-form-urlencoded");
  const auto form = parse_form(seen.body);
  EXPECT_EQ(form.at("grant_type"), "urn:ietf:params:oauth:grant-type:jwt-bearer");
  const std::string& jwt = form.at("assertion");
  const auto dot1 = jwt.find('.');
  const auto dot2 = jwt.rfind('.');
  ASSERT_NE(dot1, dot2);
  const json header = json::parse(*base64_decode(jwt.substr(0, dot1), Base64::kUrl));
  const json claims =
      json::parse(*base64_decode(jwt.substr(dot1 + 1, dot2 - dot1 - 1), Base64::kUrl));
  EXPECT_EQ(header, (json{{"alg", "RS256"}, {"typ", "JWT"}, {"kid", "key-id-1"}}));
  const auto now = std::chrono::duration_cast<seconds>(clock->now().time_since_epoch()).count();
  EXPECT_EQ(claims, (json{{"iss", "sa@proj.iam.gserviceaccount.com"},
                          {"scope", "https://www.googleapis.com/auth/cloud-platform"},
                          {"aud", "https://sa-token.test/token"},
                          {"iat", now},
                          {"exp", now + 3600}}));
  // The signature verifies with the public key, and not over other bytes.
  const std::string signature = *base64_decode(jwt.substr(dot2 + 1), Base64::kUrl);
  EXPECT_TRUE(test_key().verify(jwt.substr(0, dot2), signature));
  EXPECT_FALSE(test_key().verify(jwt.substr(0, dot2) + "x", signature));
  EXPECT_EQ(jwt.find('='), std::string::npos);  // base64url without padding
}

TEST(ServiceAccountKey, TokenEndpointRefusalIsReportedWithoutSecrets) {
  auto clock = std::make_shared<FakeClock>();
  auto http = std::make_shared<FakeHttpClient>();
  http->on("POST", "sa-token.test", [](const HttpRequest&) {
    return json_response(
        400, R"({"error":"invalid_grant","error_description":"Invalid JWT Signature."})");
  });
  auto source = make_credentials_json_source(service_account_json("https://sa-token.test/token"),
                                             "test", test_endpoints(), http, clock);
  try {
    source->fetch();
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_THAT(e.what(), HasSubstr("token exchange at https://sa-token.test/token for "
                                    "sa@proj.iam.gserviceaccount.com failed: HTTP 400"));
    EXPECT_THAT(e.what(), HasSubstr("Invalid JWT Signature."));
    EXPECT_THAT(e.what(), Not(HasSubstr("PRIVATE KEY")));
    EXPECT_THAT(e.what(), Not(HasSubstr("eyJ")));  // no JWT
  }
  EXPECT_EQ(http->count("POST"), 1u);  // 400 is not retried
}

TEST(ServiceAccountKey, TokenEndpointOutageIsRetried) {
  auto clock = std::make_shared<FakeClock>();
  auto http = std::make_shared<FakeHttpClient>();
  http->enqueue("POST", "sa-token.test", json_response(503, "{}"));
  http->on("POST", "sa-token.test", [](const HttpRequest&) { return token_response("ya29.ok"); });
  auto source = make_credentials_json_source(service_account_json("https://sa-token.test/token"),
                                             "test", test_endpoints(), http, clock);
  EXPECT_EQ(source->fetch().value, "ya29.ok");
  EXPECT_EQ(http->count("POST"), 2u);
}

// expires_in as Google never sends it: no lifetime past Google's 12 hours (a number no clock can
// add to a time converted to seconds was undefined behaviour), none below 0.
TEST(ServiceAccountKey, AStatedLifetimeIsReadWithinTwelveHours) {
  const std::pair<const char*, long> cases[] = {{"1e300", 43200},
                                                {"99999999999999999999", 43200},
                                                {"\"99999999999999999999\"", 43200},
                                                {"-5", 0},
                                                {"3599.9", 3599},
                                                {"\"3599\"", 3599},
                                                {"true", 3600}};
  for (const auto& [expires_in, lifetime] : cases) {
    auto http = std::make_shared<FakeHttpClient>();
    const std::string body =
        std::string(R"({"access_token":"ya29.t","expires_in":)") + expires_in + "}";
    http->on("POST", "sa-token.test", [&](const HttpRequest&) { return json_response(200, body); });
    auto source =
        make_credentials_json_source(service_account_json("https://sa-token.test/token"), "test",
                                     test_endpoints(), http, std::make_shared<FakeClock>());
    EXPECT_EQ(source->fetch().lifetime, seconds(lifetime)) << expires_in;
  }
}

TEST(ServiceAccountKey, ResponseWithoutATokenIsAnErrorThatDoesNotEchoTheBody) {
  auto clock = std::make_shared<FakeClock>();
  auto http = std::make_shared<FakeHttpClient>();
  http->on("POST", "sa-token.test", [](const HttpRequest&) {
    return json_response(200, R"({"id_token":"ya29.do-not-print","expires_in":3600})");
  });
  auto source = make_credentials_json_source(service_account_json("https://sa-token.test/token"),
                                             "test", test_endpoints(), http, clock);
  const std::string text = error_text([&] { source->fetch(); });
  EXPECT_THAT(text, HasSubstr("returned no access_token"));
  EXPECT_THAT(text, Not(HasSubstr("do-not-print")));
}

TEST(CredentialsFile, MalformedFilesAreClearErrorsThatKeepSecretsOut) {
  TempDir dir;
  auto clock = std::make_shared<FakeClock>();
  auto http = std::make_shared<FakeHttpClient>();
  auto load = [&](const std::string& name, const std::string& text) {
    const auto path = dir.write(name, text);
    return error_text([&] {
      make_credentials_file_source(path.string(), "GOOGLE_APPLICATION_CREDENTIALS",
                                   test_endpoints(), http, clock);
    });
  };
  EXPECT_THAT(load("a.json", "{ \"type\": \"service_account\", \"private_key\": \"-----BEGIN"),
              HasSubstr("are not a JSON object"));
  EXPECT_THAT(load("a.json", "{ \"type\": \"service_account\", \"private_key\": \"-----BEGIN"),
              Not(HasSubstr("BEGIN")));
  EXPECT_THAT(load("b.json", R"({"type":"service_account","client_email":"x@y"})"),
              HasSubstr("lacks private_key"));
  const std::string bad_pem = load(
      "c.json",
      R"({"type":"service_account","client_email":"x@y","private_key":"-----BEGIN PRIVATE KEY-----\nQUJD\n-----END PRIVATE KEY-----\n"})");
  EXPECT_THAT(bad_pem, HasSubstr("not a PEM private key"));
  EXPECT_THAT(bad_pem, Not(HasSubstr("QUJD")));
  EXPECT_THAT(load("d.json", R"({"type":"external_account","audience":"x"})"),
              HasSubstr("type \"external_account\"; supported: service_account, authorized_user"));
  EXPECT_THAT(load("e.json", R"({"client_id":"x"})"), HasSubstr("have no \"type\""));
  EXPECT_THAT(load("f.json", R"({"type":"authorized_user","client_id":"x"})"),
              HasSubstr("lack client_secret, refresh_token"));
  EXPECT_THAT(load("g.json", "{}"), HasSubstr(dir.path().string()));  // names the file
  EXPECT_EQ(http->count("*"), 0u);
}

// ---------------------------------------------------------------------------------------------
// Authorized user (gcloud auth application-default login)

TEST(AuthorizedUser, RefreshesAtTheTokenEndpointAndSendsTheQuotaProject) {
  auto clock = std::make_shared<FakeClock>();
  auto http = std::make_shared<FakeHttpClient>();
  HttpRequest seen;
  http->on("POST", "https://oauth.test/token", [&](const HttpRequest& request) {
    seen = request;
    return token_response("ya29.user");
  });
  Credentials credentials(make_credentials_json_source(authorized_user_json("billing-proj"), "test",
                                                       test_endpoints(), http, clock),
                          clock);
  HttpHeaders headers;
  credentials.authorize(headers);
  EXPECT_EQ(headers.get("Authorization"), "Bearer ya29.user");
  EXPECT_EQ(headers.get("X-Goog-User-Project"), "billing-proj");
  EXPECT_EQ(parse_form(seen.body), (std::map<std::string, std::string>{
                                       {"grant_type", "refresh_token"},
                                       {"client_id", "client-1.apps.googleusercontent.com"},
                                       {"client_secret", "s3cret"},
                                       {"refresh_token", "1//refresh-abc"}}));
}

TEST(AuthorizedUser, UsesARotatedRefreshTokenNextTime) {
  auto clock = std::make_shared<FakeClock>();
  auto http = std::make_shared<FakeHttpClient>();
  http->enqueue(
      "POST", "oauth.test",
      json_response(200, R"({"access_token":"a","expires_in":3600,"refresh_token":"1//new"})"));
  http->on("POST", "oauth.test", [](const HttpRequest&) { return token_response("b"); });
  auto source =
      make_credentials_json_source(authorized_user_json(), "test", test_endpoints(), http, clock);
  EXPECT_EQ(source->fetch().value, "a");
  EXPECT_EQ(source->fetch().value, "b");
  EXPECT_EQ(parse_form(http->requests().at(1).body).at("refresh_token"), "1//new");
}

// ---------------------------------------------------------------------------------------------
// Metadata server

TEST(MetadataServer, AsksForTheDefaultAccountTokenWithTheMetadataFlavorHeader) {
  auto clock = std::make_shared<FakeClock>();
  auto http = std::make_shared<FakeHttpClient>();
  HttpRequest seen;
  http->on("GET", "", [&](const HttpRequest& request) {
    seen = request;
    return token_response("ya29.metadata", 1799);
  });
  auto source = make_metadata_server_source("127.0.0.1:8181", http, clock);
  const AccessToken token = source->fetch();
  EXPECT_EQ(token.value, "ya29.metadata");
  EXPECT_EQ(token.lifetime, seconds(1799));
  EXPECT_EQ(seen.url,
            "http://127.0.0.1:8181/computeMetadata/v1/instance/service-accounts/default/token");
  EXPECT_EQ(seen.headers.get("metadata-flavor"), "Google");
}

// ---------------------------------------------------------------------------------------------
// The ADC search

struct AdcFixture : ::testing::Test {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<FakeHttpClient> http = std::make_shared<FakeHttpClient>();
  TempDir home;
  GcpSettings settings;
  Environment env{{"HOME", home.path().string()}, {"GCE_METADATA_HOST", "metadata.test"}};

  AdcFixture() {
    settings.token_endpoint = "https://oauth.test/token";
    http->on("GET", "http://metadata.test/",
             [](const HttpRequest&) { return token_response("ya29.from-metadata"); });
    http->on("POST", "https://oauth.test/token",
             [](const HttpRequest&) { return token_response("ya29.from-user"); });
    http->on("POST", "https://sa-token.test/token",
             [](const HttpRequest&) { return token_response("ya29.from-sa"); });
  }

  std::string adc_token() {
    auto credentials = make_default_credentials(settings, env, http, clock);
    return credentials->token();
  }
};

TEST_F(AdcFixture, ResolvesLazilyOnTheFirstToken) {
  auto credentials = make_default_credentials(settings, env, http, clock);
  EXPECT_EQ(http->count("*"), 0u);
  EXPECT_EQ(credentials->token(), "ya29.from-metadata");
  EXPECT_EQ(credentials->description(), "metadata server metadata.test");
}

TEST_F(AdcFixture, ExplicitAccessTokenFileComesFirst) {
  home.write("gcloud/application_default_credentials.json", authorized_user_json());
  env["CLOUDSDK_CONFIG"] = (home.path() / "gcloud").string();
  env["GOOGLE_APPLICATION_CREDENTIALS"] =
      home.write("sa.json", service_account_json("https://sa-token.test/token")).string();
  env["FALCON_ACCESS_TOKEN_FILE"] = home.write("env-token", "from-env-file").string();
  EXPECT_EQ(adc_token(), "from-env-file");
  settings.access_token_file = home.write("config-token", "from-config-file").string();
  EXPECT_EQ(adc_token(), "from-config-file");
  EXPECT_EQ(http->count("*"), 0u);
}

TEST_F(AdcFixture, GoogleApplicationCredentialsComesBeforeTheWellKnownFile) {
  home.write(".config/gcloud/application_default_credentials.json", authorized_user_json());
  env["GOOGLE_APPLICATION_CREDENTIALS"] =
      home.write("sa.json", service_account_json("https://sa-token.test/token")).string();
  EXPECT_EQ(adc_token(), "ya29.from-sa");
}

TEST_F(AdcFixture, BadGoogleApplicationCredentialsFileDoesNotFallThrough) {
  home.write(".config/gcloud/application_default_credentials.json", authorized_user_json());
  env["GOOGLE_APPLICATION_CREDENTIALS"] = (home.path() / "missing.json").string();
  const std::string text = error_text([&] { adc_token(); });
  EXPECT_THAT(text, HasSubstr("GOOGLE_APPLICATION_CREDENTIALS"));
  EXPECT_THAT(text, HasSubstr("missing.json cannot be read"));
  EXPECT_EQ(http->count("*"), 0u);  // neither the user refresh nor the metadata server
}

TEST_F(AdcFixture, FindsTheGcloudWellKnownFileUnderCloudsdkConfig) {
  home.write("custom-gcloud/application_default_credentials.json",
             authorized_user_json("quota-proj"));
  env["CLOUDSDK_CONFIG"] = (home.path() / "custom-gcloud").string();
  auto credentials = make_default_credentials(settings, env, http, clock);
  HttpHeaders headers;
  credentials->authorize(headers);
  EXPECT_EQ(headers.get("Authorization"), "Bearer ya29.from-user");
  EXPECT_EQ(headers.get("x-goog-user-project"), "quota-proj");
  EXPECT_THAT(credentials->description(), HasSubstr("gcloud well-known file"));
}

TEST_F(AdcFixture, FindsTheGcloudWellKnownFileUnderHome) {
  home.write(".config/gcloud/application_default_credentials.json", authorized_user_json());
  EXPECT_EQ(adc_token(), "ya29.from-user");
}

TEST_F(AdcFixture, MalformedWellKnownFileIsAnError) {
  home.write(".config/gcloud/application_default_credentials.json", "not json");
  EXPECT_THAT(error_text([&] { adc_token(); }), HasSubstr("the gcloud well-known file"));
}

TEST_F(AdcFixture, WhenNothingWorksTheErrorListsEverySourceTried) {
  auto dead_http = std::make_shared<FakeHttpClient>();
  dead_http->on("GET", "", [](const HttpRequest&) -> HttpResponse {
    throw HttpTransportError(
        "GET http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/"
        "token: Could not resolve host: metadata.google.internal",
        false);
  });
  env.erase("GCE_METADATA_HOST");
  auto credentials = make_default_credentials(settings, env, dead_http, clock);
  const std::string text = error_text([&] { credentials->token(); });
  EXPECT_THAT(text, HasSubstr("no Google credentials found"));
  EXPECT_THAT(text, HasSubstr("1. access token file (gcp.access_token_file, "
                              "FALCON_ACCESS_TOKEN_FILE): not set"));
  EXPECT_THAT(text, HasSubstr("2. GOOGLE_APPLICATION_CREDENTIALS: not set"));
  EXPECT_THAT(text, HasSubstr("3. gcloud well-known file " + home.path().string() +
                              "/.config/gcloud/application_default_credentials.json: not found"));
  EXPECT_THAT(text, HasSubstr("4. metadata server metadata.google.internal failed"));
  EXPECT_THAT(text, HasSubstr("Could not resolve host"));
  // Not configured explicitly: one quick probe, not a patient retry loop.
  const auto requests = dead_http->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_LE(requests[0].timeout, seconds(3));
  EXPECT_EQ(clock->slept(), std::chrono::nanoseconds(0));
}

TEST_F(AdcFixture, ExplicitMetadataHostThatFailsIsListedWithItsStatus) {
  auto failing = std::make_shared<FakeHttpClient>();
  failing->on("GET", "", [](const HttpRequest&) { return json_response(404, "Not Found"); });
  auto credentials = make_default_credentials(settings, env, failing, clock);
  const std::string text = error_text([&] { credentials->token(); });
  EXPECT_THAT(text, HasSubstr("4. metadata server metadata.test failed: HTTP 404"));
}

// ---------------------------------------------------------------------------------------------
// The token cache

TEST(TokenCache, ReusesTheTokenUntilFiveMinutesBeforeExpiry) {
  auto clock = std::make_shared<FakeClock>();
  auto source = std::make_unique<ScriptedSource>(seconds(3600));
  ScriptedSource* scripted = source.get();
  Credentials credentials(std::move(source), clock);
  EXPECT_EQ(credentials.token(), "token-1");
  EXPECT_EQ(credentials.token(), "token-1");
  clock->advance(minutes(54) + seconds(59));
  EXPECT_EQ(credentials.token(), "token-1");
  EXPECT_EQ(scripted->fetches, 1);
  clock->advance(seconds(2));  // 55:01, inside the five-minute margin
  EXPECT_EQ(credentials.token(), "token-2");
  EXPECT_EQ(scripted->fetches, 2);
}

TEST(TokenCache, RefreshesAnExpiredToken) {
  auto clock = std::make_shared<FakeClock>();
  auto source = std::make_unique<ScriptedSource>(seconds(3600));
  Credentials credentials(std::move(source), clock);
  EXPECT_EQ(credentials.token(), "token-1");
  clock->advance(std::chrono::hours(2));
  EXPECT_EQ(credentials.token(), "token-2");
}

TEST(TokenCache, ShortLivedTokensAreRefreshedAtHalfTheirLifetime) {
  auto clock = std::make_shared<FakeClock>();
  Credentials credentials(std::make_unique<ScriptedSource>(seconds(120)), clock);
  EXPECT_EQ(credentials.token(), "token-1");
  clock->advance(seconds(59));
  EXPECT_EQ(credentials.token(), "token-1");
  clock->advance(seconds(2));
  EXPECT_EQ(credentials.token(), "token-2");
}

TEST(TokenCache, InvalidateForcesAFetch) {
  auto clock = std::make_shared<FakeClock>();
  Credentials credentials(std::make_unique<ScriptedSource>(), clock);
  EXPECT_EQ(credentials.token(), "token-1");
  credentials.invalidate();
  EXPECT_EQ(credentials.token(), "token-2");
}

TEST(TokenCache, AFailedRefreshIsReportedAndTheNextCallTriesAgain) {
  auto clock = std::make_shared<FakeClock>();
  auto source = std::make_unique<ScriptedSource>();
  source->fail_next = true;
  Credentials credentials(std::move(source), clock);
  EXPECT_THROW(credentials.token(), LogRetrievalError);
  EXPECT_EQ(credentials.token(), "token-2");
}

TEST(TokenCache, ManyThreadsNeedingATokenCauseOneRefresh) {
  constexpr int kThreads = 8;
  auto clock = std::make_shared<FakeClock>();
  auto source = std::make_unique<ScriptedSource>();
  ScriptedSource* scripted = source.get();
  std::atomic<int> arrived{0};
  std::mutex mutex;
  std::condition_variable all_arrived;
  // The refreshing thread holds on until every thread has asked (bounded, so a slow machine
  // cannot hang the test; the assertion holds either way).
  scripted->before_fetch = [&] {
    std::unique_lock lock(mutex);
    all_arrived.wait_for(lock, seconds(5), [&] { return arrived.load() == kThreads; });
  };
  Credentials credentials(std::move(source), clock);
  std::vector<std::string> tokens(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      {
        std::lock_guard lock(mutex);
        ++arrived;
      }
      all_arrived.notify_all();
      tokens[i] = credentials.token();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(scripted->fetches, 1);
  for (const auto& token : tokens) EXPECT_EQ(token, "token-1");
}

TEST(TokenCache, WaitersShareTheErrorOfTheRefreshTheyWaitedFor) {
  constexpr int kThreads = 4;
  auto clock = std::make_shared<FakeClock>();
  auto source = std::make_unique<ScriptedSource>();
  ScriptedSource* scripted = source.get();
  scripted->fail_next = true;
  std::atomic<int> arrived{0};
  std::mutex mutex;
  std::condition_variable all_arrived;
  scripted->before_fetch = [&] {
    std::unique_lock lock(mutex);
    all_arrived.wait_for(lock, seconds(5), [&] { return arrived.load() == kThreads; });
  };
  Credentials credentials(std::move(source), clock);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      {
        std::lock_guard lock(mutex);
        ++arrived;
      }
      all_arrived.notify_all();
      try {
        credentials.token();
      } catch (const LogRetrievalError&) {
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  // Each thread either waited for the failing refresh (and got its error) or came after it and
  // refreshed successfully itself; never more refreshes than threads, at least one failure.
  EXPECT_GE(failures.load(), 1);
  EXPECT_EQ(scripted->fetches.load(), 1 + (kThreads - failures.load() > 0 ? 1 : 0));
}

TEST(TokenCache, FixedCredentialsNeverChange) {
  auto credentials = make_fixed_credentials("fixed");
  EXPECT_EQ(credentials->token(), "fixed");
  credentials->invalidate();
  EXPECT_EQ(credentials->token(), "fixed");
}

}  // namespace
}  // namespace falcon::gcp
