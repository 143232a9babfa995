// The supervisor's lease name: kept across restarts of one replica, never shared by two that run
// at once (serve/replica_identity.h).
#include "serve/replica_identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/temp_dir.h"

namespace falcon::serve {
namespace {

using ::testing::HasSubstr;

TEST(ReplicaIdentityTest, ARestartedReplicaKeepsItsNameAndASecondOneGetsNone) {
  testing::TempDir dir;
  std::string first_id;
  {
    const ReplicaIdentity first = ReplicaIdentity::acquire(dir.path() / "state");
    first_id = first.id();
    ASSERT_FALSE(first_id.empty()) << first.problem();
    // Another replica while the first runs: no kept name (it takes one for its run only).
    const ReplicaIdentity second = ReplicaIdentity::acquire(dir.path() / "state");
    EXPECT_EQ(second.id(), "");
    EXPECT_THAT(second.problem(), HasSubstr("held by another running replica"));
  }
  // The first has ended (a crash drops the lock just the same): the next takes its name.
  const ReplicaIdentity restarted = ReplicaIdentity::acquire(dir.path() / "state");
  EXPECT_EQ(restarted.id(), first_id);
}

TEST(ReplicaIdentityTest, AFileThatHoldsNoNameGetsANewOne) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "supervisor-holder") << std::string("\x01\x02 \n", 4);
  const ReplicaIdentity identity = ReplicaIdentity::acquire(dir.path());
  EXPECT_FALSE(identity.id().empty());
  EXPECT_EQ(identity.id().find(' '), std::string::npos);
  std::ifstream in(dir.path() / "supervisor-holder");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, identity.id());
}

TEST(ReplicaIdentityTest, AStateDirectoryThatCannotBeUsedGivesNoNameAndSaysWhy) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "not-a-dir") << "x";
  const ReplicaIdentity identity = ReplicaIdentity::acquire(dir.path() / "not-a-dir");
  EXPECT_EQ(identity.id(), "");
  EXPECT_THAT(identity.problem(), HasSubstr("cannot open"));
}

}  // namespace
}  // namespace falcon::serve
