// Endpoint resolution (DESIGN D8), URL helpers and base64url.
#include "gcp/endpoints.h"

#include <gtest/gtest.h>

#include "gcp/jwt.h"
#include "gcp/url.h"

namespace falcon::gcp {
namespace {

TEST(Endpoints, DefaultsAreGooglesHosts) {
  const GcpEndpoints e = resolve_endpoints(GcpSettings{}, Environment{});
  EXPECT_EQ(e.logging, "https://logging.googleapis.com");
  EXPECT_EQ(e.storage, "https://storage.googleapis.com");
  EXPECT_EQ(e.token, "https://oauth2.googleapis.com/token");
  EXPECT_EQ(e.metadata_host, "metadata.google.internal");
  EXPECT_FALSE(e.metadata_host_explicit);
}

TEST(Endpoints, EnvironmentOverridesDefaults) {
  const Environment env{{"FALCON_LOGGING_ENDPOINT", "http://127.0.0.1:9000/"},
                        {"STORAGE_EMULATOR_HOST", "127.0.0.1:9001"},
                        {"FALCON_TOKEN_ENDPOINT", "http://127.0.0.1:9002/token"},
                        {"GCE_METADATA_HOST", "127.0.0.1:9003"}};
  const GcpEndpoints e = resolve_endpoints(GcpSettings{}, env);
  EXPECT_EQ(e.logging, "http://127.0.0.1:9000");
  EXPECT_EQ(e.storage, "http://127.0.0.1:9001");  // host:port means plain http
  EXPECT_EQ(e.token, "http://127.0.0.1:9002/token");
  EXPECT_EQ(e.metadata_host, "127.0.0.1:9003");
  EXPECT_TRUE(e.metadata_host_explicit);
}

TEST(Endpoints, StorageEmulatorHostMayBeAFullUrl) {
  const GcpEndpoints e =
      resolve_endpoints(GcpSettings{}, {{"STORAGE_EMULATOR_HOST", "https://gcs.local:4443/"}});
  EXPECT_EQ(e.storage, "https://gcs.local:4443");
}

TEST(Endpoints, MetadataRootIsTheFallbackForMetadataHost) {
  EXPECT_EQ(resolve_endpoints(GcpSettings{}, {{"GCE_METADATA_ROOT", "10.0.0.1"}}).metadata_host,
            "10.0.0.1");
  EXPECT_EQ(resolve_endpoints(GcpSettings{}, {{"GCE_METADATA_ROOT", "10.0.0.1"},
                                              {"GCE_METADATA_HOST", "10.0.0.2"}})
                .metadata_host,
            "10.0.0.2");
  EXPECT_EQ(resolve_endpoints(GcpSettings{}, {{"GCE_METADATA_HOST", "http://10.0.0.3:80/x"}})
                .metadata_host,
            "10.0.0.3:80");
}

TEST(Endpoints, ConfigOverridesEnvironment) {
  GcpSettings settings;
  settings.logging_endpoint = "http://config-logging";
  settings.storage_endpoint = "http://config-storage";
  settings.token_endpoint = "http://config-token/token";
  settings.metadata_host = "config-metadata:80";
  const Environment env{{"FALCON_LOGGING_ENDPOINT", "http://env"},
                        {"STORAGE_EMULATOR_HOST", "env:1"},
                        {"FALCON_TOKEN_ENDPOINT", "http://env/token"},
                        {"GCE_METADATA_HOST", "env:2"}};
  const GcpEndpoints e = resolve_endpoints(settings, env);
  EXPECT_EQ(e.logging, "http://config-logging");
  EXPECT_EQ(e.storage, "http://config-storage");
  EXPECT_EQ(e.token, "http://config-token/token");
  EXPECT_EQ(e.metadata_host, "config-metadata:80");
}

TEST(Endpoints, CurrentEnvironmentIsASnapshotOfTheProcess) {
  setenv("FALCON_GCP_ENDPOINTS_TEST", "a=b", 1);
  EXPECT_EQ(env_value(current_environment(), "FALCON_GCP_ENDPOINTS_TEST"), "a=b");
  unsetenv("FALCON_GCP_ENDPOINTS_TEST");
  EXPECT_EQ(env_value(current_environment(), "FALCON_GCP_ENDPOINTS_TEST"), "");
}

TEST(Url, PercentEncodesEverythingButUnreservedCharacters) {
  EXPECT_EQ(percent_encode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(percent_encode("logs/rank-0.log"), "logs%2Frank-0.log");
  EXPECT_EQ(percent_encode(" \"#$%&+,/:;<=>?@[\\]^`{|}"),
            "%20%22%23%24%25%26%2B%2C%2F%3A%3B%3C%3D%3E%3F%40%5B%5C%5D%5E%60%7B%7C%7D");
  EXPECT_EQ(percent_encode("é"), "%C3%A9");
}

TEST(Url, FormEncodesFields) {
  EXPECT_EQ(form_encode({{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
                         {"assertion", "a.b+c"}}),
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b%2Bc");
}

TEST(Url, StripsQueriesForMessages) {
  EXPECT_EQ(without_query("http://h/upload?upload_id=secret#f"), "http://h/upload");
  EXPECT_EQ(without_query("http://h/p"), "http://h/p");
}

TEST(GcsUri, SplitsBucketAndObject) {
  const GcsUri uri = parse_gcs_uri("gs://falcon-tpu/profiles/s1/logs/");
  EXPECT_EQ(uri.bucket, "falcon-tpu");
  EXPECT_EQ(uri.object, "profiles/s1/logs/");
  EXPECT_EQ(parse_gcs_uri("gs://bkt").object, "");
  EXPECT_EQ(format_gcs_uri("b", "a/c.log"), "gs://b/a/c.log");
  EXPECT_THROW(parse_gcs_uri("s3://b/o"), std::invalid_argument);
  EXPECT_THROW(parse_gcs_uri("gs:///o"), std::invalid_argument);
}

TEST(Jwt, RejectsAKeyThatIsNotPem) {
  EXPECT_THROW(check_rsa_private_key("not a key"), std::invalid_argument);
  EXPECT_THROW(sign_rs256("not a key", "data"), std::invalid_argument);
}

}  // namespace
}  // namespace falcon::gcp
