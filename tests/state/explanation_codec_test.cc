// How a decision's explanation is stored: packed, read back whole, plain JSON of older rows as
// it is, and a damaged value refused with a reason.
#include "state/explanation_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

namespace falcon::testing {
namespace {

using state::pack_explanation;
using state::unpack_explanation;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// An explanation of `n` candidates, the shape the selector writes (every candidate's terms).
std::string explanation(int n) {
  std::string out = R"({"accelerator":"tpu-v4-64","scores":[)";
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    out += fmt::format(
        R"({{"cluster":"c{0}","eligible":true,"priority":{1},"signals":{{"queue_depth":{2},)"
        R"("latency_ms":{3}.0}},"terms":[{{"signal":"priority","value":{1}.0,"weight":1.0}},)"
        R"({{"signal":"queue","value":{2}.0,"weight":0.0}}],"verdict":"lost: priority {1}"}})",
        i, 1 + i % 3, i % 7, 40 + i * 13 % 200);
  }
  return out + R"(],"reason":"selected c0: naïve \"quoted\"\n"})";
}

TEST(ExplanationCodec, APackedExplanationReadsBackWholeAndIsManyTimesSmaller) {
  const std::string json = explanation(100);
  const std::string packed = pack_explanation(json);
  EXPECT_THAT(packed, StartsWith("z1:"));
  EXPECT_EQ(unpack_explanation(packed), json);
  EXPECT_LT(packed.size() * 5, json.size()) << packed.size() << " of " << json.size();
}

TEST(ExplanationCodec, EveryLengthRoundTrips) {
  // Every remainder of base64's quads, and the empty text.
  std::string json;
  for (int i = 0; i < 70; ++i) {
    EXPECT_EQ(unpack_explanation(pack_explanation(json)), json) << i;
    json += static_cast<char>('a' + i % 26);
  }
  const std::string binary("\0\xff\x80{", 4);
  EXPECT_EQ(unpack_explanation(pack_explanation(binary)), binary);
}

TEST(ExplanationCodec, PlainJsonOfOlderRowsAndARepeatsEmptyTextReadAsTheyAre) {
  EXPECT_EQ(unpack_explanation(R"({"reason":"old"})"), R"({"reason":"old"})");
  EXPECT_EQ(unpack_explanation(""), "");
}

TEST(ExplanationCodec, ADamagedValueIsRefusedSayingHow) {
  const std::string packed = pack_explanation(explanation(20));
  auto error_of = [](const std::string& stored) -> std::string {
    try {
      unpack_explanation(stored);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  };
  // A character outside the alphabet, padding before the end, a dangling character: not base64
  // (util/base64.h, the layer's one codec, checks the text).
  EXPECT_THAT(error_of(packed.substr(0, 3) + "!!!!" + packed.substr(7)), HasSubstr("not base64"));
  EXPECT_THAT(error_of("z1:ab=c"), HasSubstr("not base64"));
  EXPECT_THAT(error_of("z1:ab==dddd"), HasSubstr("not base64"));
  EXPECT_THAT(error_of("z1:abcde"), HasSubstr("not base64"));
  // Cut anywhere else: valid base64 of a stream that stops early.
  EXPECT_THAT(error_of(packed.substr(0, 3 + (packed.size() - 3) / 8 * 4)), HasSubstr("cut short"));
  EXPECT_THAT(error_of("z1:////"), HasSubstr("does not inflate"));  // a reserved block type
}

}  // namespace
}  // namespace falcon::testing
