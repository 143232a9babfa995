// The one base64 of the tools (common/base64.h): RFC 4648's test vectors in both alphabets,
// round trips of every byte, and what is not base64.
#include <gtest/gtest.h>

#include "common/base64.h"

namespace falcon::tools {
namespace {

TEST(Base64, EncodesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(Base64, UrlSafeAlphabetHasNoPadding) {
  EXPECT_EQ(base64url_encode("f"), "Zg");
  EXPECT_EQ(base64url_encode("fo"), "Zm8");
  EXPECT_EQ(base64_encode("\xfb\xff\xbf"), "+/+/");
  EXPECT_EQ(base64url_encode("\xfb\xff\xbf"), "-_-_");
}

TEST(Base64, RoundTripsEveryByteAndLength) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (std::size_t n = 0; n <= all.size(); ++n) {
    const std::string bytes = all.substr(256 - n);
    EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes) << n;
    EXPECT_EQ(base64url_decode(base64url_encode(bytes)), bytes) << n;
  }
}

TEST(Base64, PaddingIsOptional) {
  EXPECT_EQ(base64_decode("Zg"), "f");
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64url_decode("Zm8="), "fo");
  EXPECT_EQ(base64url_decode("Zm8"), "fo");
}

TEST(Base64, RefusesWhatIsNotBase64) {
  for (const char* text : {"Z", "Zm9vY", "Zg=", "Zg===", "Zm8==", "Z===", "====", "=",
                           "Zg==Zg==", "Zm=9", "Zm9v\n", " Zm9v", "Zm9v!", "Zm9v-_", "\xc3\xa9"}) {
    EXPECT_FALSE(base64_decode(text)) << text;
  }
  EXPECT_FALSE(base64url_decode("+/+/"));  // the standard alphabet's two characters
  EXPECT_FALSE(base64url_decode("Zg="));
  EXPECT_EQ(base64_decode(""), "");
}

}  // namespace
}  // namespace falcon::tools
