// LineSpool (issue 11, --tail of a million lines): lines pushed newest first come back oldest
// first, and beyond the memory budget they wait in an unlinked temporary file.
#include "logs/line_spool.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace falcon::logs {
namespace {

std::string line_of(int i) {  // lines of varied lengths, empty ones included
  return i % 7 == 0 ? std::string() : "line " + std::to_string(i) + std::string(i % 300, 'x');
}

TEST(LineSpool, SmallTailsStayInMemory) {
  LineSpool spool(1 << 20);
  for (int i = 0; i < 100; ++i) spool.push(line_of(i));
  EXPECT_FALSE(spool.spilled());
  for (int i = 99; i >= 0; --i) ASSERT_EQ(spool.pop(), line_of(i));
  EXPECT_EQ(spool.pop(), std::nullopt);
}

TEST(LineSpool, LongTailsKeepMemoryWithinTheBudgetAndComeBackInOrder) {
  constexpr std::size_t kBudget = 16 << 10;
  constexpr int kLines = 50'000;  // about 8 MB of lines
  LineSpool spool(kBudget);
  std::size_t most = 0;
  for (int i = 0; i < kLines; ++i) {
    spool.push(line_of(i));
    most = std::max(most, spool.memory_bytes());
  }
  EXPECT_TRUE(spool.spilled());
  EXPECT_EQ(spool.size(), static_cast<std::size_t>(kLines));
  EXPECT_LE(most, kBudget + 400);  // the budget, and at most one line more
  for (int i = kLines - 1; i >= 0; --i) ASSERT_EQ(spool.pop(), line_of(i)) << "line " << i;
  EXPECT_EQ(spool.pop(), std::nullopt);
}

}  // namespace
}  // namespace falcon::logs
