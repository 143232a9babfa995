// "Did you mean": difflib's ranking (as argparse words xpk's "closest matches") and the
// edit-distance-first suggestions shown by `falcon config validate`.
#include "util/closest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace falcon {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string_view> views(const std::vector<std::string>& names) {
  return {names.begin(), names.end()};
}

// Expected values computed with Python 3's difflib.get_close_matches(word, names, n, 0).
TEST(ClosestMatches, RanksAsDifflibDoes) {
  const std::vector<std::string> names = {"apple", "ape", "peach", "puppy", "apply"};
  EXPECT_THAT(closest_matches("appel", views(names), 3), ElementsAre("apply", "apple", "ape"));
  EXPECT_THAT(closest_matches("wheel", views({"while", "wheat", "help", "hello"}), 4),
              ElementsAre("help", "while", "wheat", "hello"));
}

TEST(ClosestMatches, EqualRatiosPutTheLargerNameFirst) {
  // "ab" against "ax" and "ay": one matched character each; difflib then prefers "ay".
  EXPECT_THAT(closest_matches("ab", views({"ax", "ay"}), 2), ElementsAre("ay", "ax"));
}

TEST(ClosestMatches, NoMoreThanAskedOrAvailable) {
  EXPECT_THAT(closest_matches("x", views({"a", "b"}), 5), ElementsAre("b", "a"));
  EXPECT_THAT(closest_matches("x", views({"a", "b"}), 0), IsEmpty());
  EXPECT_THAT(closest_matches("x", {}, 3), IsEmpty());
}

TEST(ClosestMatches, LongWordsDoNotBlowUp) {
  const std::string word(100'000, 'a');
  EXPECT_THAT(closest_matches(word, views({"aaa", "b"}), 1), ElementsAre("aaa"));
}

TEST(SuggestNames, OneEditAwayComesFirst) {
  // difflib alone ranks v4-6656 above v4-64 for v4-65.
  const std::vector<std::string> names = {"v4-6656", "v4-6528", "v4-64", "v4-16", "v4-8"};
  EXPECT_EQ(closest_matches("v4-65", views(names), 1), std::vector<std::string>{"v4-6656"});
  EXPECT_THAT(suggest_names("v4-65", views(names), 3), ElementsAre("v4-64", "v4-6656", "v4-6528"));
}

TEST(SuggestNames, FarWordsKeepDifflibOrder) {
  const std::vector<std::string> names = {"l4-1", "h100-80gb-8", "a100-40gb-8"};
  EXPECT_THAT(suggest_names("nvidia-a100-80g", views(names), 2),
              ElementsAre("h100-80gb-8", "a100-40gb-8"));
}

TEST(NearestByEditDistance, FindsATypoOrNothing) {
  const std::vector<std::string> keys = {"zone", "project", "max_queue_depth"};
  EXPECT_EQ(nearest_by_edit_distance("max_queue_dept", keys), "max_queue_depth");
  EXPECT_EQ(nearest_by_edit_distance("colour", keys), "");
  EXPECT_EQ(nearest_by_edit_distance(std::string(50'000, 'z'), keys), "");
}

}  // namespace
}  // namespace falcon
