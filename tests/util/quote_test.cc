// Values quoted in messages stay short, on one line, and valid UTF-8.
#include "falcon/values.h"

#include <gtest/gtest.h>

#include <string>

namespace falcon {
namespace {

TEST(QuoteValue, ShortValuesAreQuotedWhole) {
  EXPECT_EQ(quote_value("us-central2-b"), "'us-central2-b'");
  EXPECT_EQ(quote_value(""), "''");
}

TEST(QuoteValue, LongValuesAreCutAndTheirSizeIsSaid) {
  const std::string q = quote_value(std::string(50'000, 'a'));
  EXPECT_EQ(q, "'" + std::string(kQuotedPrefixBytes, 'a') + "...' (50000 bytes)");
  EXPECT_EQ(quote_value("abcdef", 3), "'abc...' (6 bytes)");
}

TEST(QuoteValue, ControlCharactersAreEscaped) {
  EXPECT_EQ(quote_value("a\nb\tc\rd"), "'a\\nb\\tc\\rd'");
  EXPECT_EQ(quote_value(std::string("x\0y", 3)), "'x\\x00y'");
  EXPECT_EQ(quote_value("\x1b[31m"), "'\\x1b[31m'");
  EXPECT_EQ(quote_value("\x7f"), "'\\x7f'");
  EXPECT_EQ(quote_value("\xc2\x85"), "'\\u0085'");  // C1 control NEL
}

TEST(QuoteValue, Utf8IsKeptAndBadBytesEscaped) {
  EXPECT_EQ(quote_value("zürich"), "'zürich'");
  EXPECT_EQ(quote_value("\xff\xfe"), "'\\xff\\xfe'");
  EXPECT_EQ(quote_value("\xc3"), "'\\xc3'");  // truncated sequence
}

TEST(QuoteValue, CutsOnACharacterBoundary) {
  // Two-byte characters: a limit of 3 bytes shows one character, never half of the second.
  EXPECT_EQ(quote_value("ééé", 3), "'é...' (6 bytes)");
}

}  // namespace
}  // namespace falcon
