#include "util/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace falcon {
namespace {

using namespace std::string_literals;

TEST(Base64, EncodesRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("\xfb\xff"), "+/8=");
}

TEST(Base64, TheUrlAlphabetIsUnpadded) {
  EXPECT_EQ(base64_encode("f", Base64::kUrl), "Zg");
  EXPECT_EQ(base64_encode("fo", Base64::kUrl), "Zm8");
  EXPECT_EQ(base64_encode("foo", Base64::kUrl), "Zm9v");
  EXPECT_EQ(base64_encode("\xfb\xff", Base64::kUrl), "-_8");
}

TEST(Base64, RoundTripsBinaryInBothAlphabets) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (const std::string& s : {""s, "a"s, "ab"s, "abc"s, "abcd"s, "\x00\xff\x10 binary"s, all}) {
    EXPECT_EQ(base64_decode(base64_encode(s)), s);
    EXPECT_EQ(base64_decode(base64_encode(s, Base64::kUrl), Base64::kUrl), s);
  }
}

TEST(Base64, PaddingIsOptionalOnInput) {
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64_decode("Zg"), "f");
  EXPECT_EQ(base64_decode("Zm8"), "fo");
  EXPECT_EQ(base64_decode("Zg==", Base64::kUrl), "f");
  EXPECT_EQ(base64_decode("-_8", Base64::kUrl), "\xfb\xff");
}

TEST(Base64, RefusesWhatIsNotBase64) {
  EXPECT_FALSE(base64_decode("Z!"));
  EXPECT_FALSE(base64_decode("Zm9v!"));
  EXPECT_FALSE(base64_decode("Z"));      // a dangling sextet
  EXPECT_FALSE(base64_decode("Zm9vZ"));  // the same after a quad
  EXPECT_FALSE(base64_decode("Zg=a"));   // data after padding
  EXPECT_FALSE(base64_decode("Zg="));    // padding that does not finish the quad
  EXPECT_FALSE(base64_decode("Zm8=="));  // too much of it
  EXPECT_FALSE(base64_decode("Zg==="));  // three
  EXPECT_FALSE(base64_decode("-_8"));    // the URL alphabet where the standard one is due
  EXPECT_FALSE(base64_decode("+/8=", Base64::kUrl));  // and the other way round
  EXPECT_FALSE(base64_decode(" Zm9v"));               // whitespace only when asked to skip it
}

TEST(Base64, SkipsLineBreaksWhenAsked) {
  EXPECT_EQ(base64_decode("Zm9v\nYmFy\r\n", Base64::kStandard, true), "foobar");
  EXPECT_EQ(base64_decode(" Zm8= ", Base64::kStandard, true), "fo");
}

}  // namespace
}  // namespace falcon
