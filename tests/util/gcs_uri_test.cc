// The one gs:// parser: what it splits, and every rule of Cloud Storage it enforces.
#include "falcon/gcs_uri.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace falcon {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& uri) {
  try {
    parse_gcs_uri(uri);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected invalid_argument for " << uri;
  return "";
}

TEST(GcsUri, SplitsBucketAndObject) {
  EXPECT_EQ(parse_gcs_uri("gs://falcon-logs/runs/llama/"), (GcsUri{"falcon-logs", "runs/llama/"}));
  EXPECT_EQ(parse_gcs_uri("gs://falcon-logs"), (GcsUri{"falcon-logs", ""}));
  EXPECT_EQ(parse_gcs_uri("gs://falcon-logs/"), (GcsUri{"falcon-logs", ""}));
  EXPECT_EQ(parse_gcs_uri("gs://a.b_c-d/x"), (GcsUri{"a.b_c-d", "x"}));
  EXPECT_EQ(parse_gcs_uri("gs://bkt/zürich/日本"), (GcsUri{"bkt", "zürich/日本"}));
}

TEST(GcsUri, SchemeAndBucketPresence) {
  EXPECT_THAT(error_of("s3://b/o"), HasSubstr("'s3://b/o' is not a gs:// URI"));
  EXPECT_THAT(error_of("GS://bkt"), HasSubstr("is not a gs:// URI"));
  EXPECT_THAT(error_of("gs://"), HasSubstr("names no bucket"));
  EXPECT_THAT(error_of("gs:///o"), HasSubstr("names no bucket"));
}

TEST(GcsUri, BucketNameRules) {
  EXPECT_THAT(error_of("gs://ab"), HasSubstr("the bucket name 'ab' must be 3 to 63 characters"));
  EXPECT_THAT(error_of("gs://" + std::string(64, 'a')), HasSubstr("must be 3 to 63 characters"));
  EXPECT_NO_THROW(parse_gcs_uri("gs://" + std::string(63, 'a')));
  EXPECT_NO_THROW(parse_gcs_uri("gs://" + std::string(63, 'a') + "." + std::string(63, 'b')));
  EXPECT_THAT(error_of("gs://" + std::string(64, 'a') + ".b"),
              HasSubstr("dot-separated part longer than 63"));
  EXPECT_THAT(error_of("gs://Falcon"), HasSubstr("may contain only lowercase letters"));
  EXPECT_THAT(error_of("gs://fal con"), HasSubstr("may contain only lowercase letters"));
  EXPECT_THAT(error_of("gs://-falcon"), HasSubstr("must start and end with a letter or a digit"));
  EXPECT_THAT(error_of("gs://falcon_"), HasSubstr("must start and end with a letter or a digit"));
  EXPECT_THAT(error_of("gs://192.168.5.4"), HasSubstr("must not be an IP address"));
  EXPECT_NO_THROW(parse_gcs_uri("gs://192.168.5.a"));
  EXPECT_THAT(error_of("gs://goog-logs"), HasSubstr("must not start with 'goog'"));
  EXPECT_THAT(error_of("gs://my-g00gle-logs"), HasSubstr("'google' or a look-alike"));
}

TEST(GcsUri, ObjectNameRules) {
  EXPECT_THAT(error_of("gs://bkt/a\nb"), HasSubstr("contains a control character"));
  EXPECT_THAT(error_of("gs://bkt/a\rb"), HasSubstr("contains a control character"));
  EXPECT_THAT(error_of("gs://bkt/a\x7f"), HasSubstr("contains a control character"));
  EXPECT_THAT(error_of("gs://bkt/\xff"), HasSubstr("is not valid UTF-8"));
  EXPECT_THAT(error_of("gs://bkt/a/../b"), HasSubstr("'.' or '..' as a path part"));
  EXPECT_THAT(error_of("gs://bkt/."), HasSubstr("'.' or '..' as a path part"));
  EXPECT_NO_THROW(parse_gcs_uri("gs://bkt/a..b/.c"));
  EXPECT_THAT(error_of("gs://bkt/.well-known/acme-challenge/x"),
              HasSubstr("'.well-known/acme-challenge/'"));
  EXPECT_NO_THROW(parse_gcs_uri("gs://bkt/" + std::string(kGcsObjectNameMaxBytes, 'o')));
  EXPECT_THAT(error_of("gs://bkt/" + std::string(kGcsObjectNameMaxBytes + 1, 'o')),
              HasSubstr("is 1025 bytes long; Cloud Storage allows at most 1024"));
}

TEST(GcsUri, MessagesQuoteAShortPrefixOnOneLine) {
  const std::string huge = "gs://bkt/" + std::string(100'000, 'x') + "\n";
  const std::string e = error_of(huge);
  EXPECT_LT(e.size(), 300u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_THAT(e, HasSubstr("(100010 bytes)"));
  EXPECT_THAT(error_of("gs://bkt/a\nb"), HasSubstr("'a\\nb'"));
}

}  // namespace
}  // namespace falcon
