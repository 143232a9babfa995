// The export lines that point the falcon CLI at a fleet (fleet/fleet_env.h): the six variables
// scripts/demo.sh needs, quoted for sh, and a comment for what the fleet cannot know.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fleet/fleet_env.h"

namespace falcon::fleet {
namespace {

using ::testing::HasSubstr;

TEST(FleetEnv, ExportsTheSixVariablesTheCliNeeds) {
  EXPECT_EQ(fleet_env_script({.url = "http://127.0.0.1:41234",
                              .bin_dir = "/src/build/bin",
                              .repos_file = "/src/examples/local-repos.yaml",
                              .token_file = "/tmp/fleet.env.token"}),
            "export PATH='/src/build/bin':\"$PATH\"\n"
            "export FALCON_CONFIG='/src/examples/local-repos.yaml'\n"
            "export FALCON_FLEET_URL='http://127.0.0.1:41234'\n"
            "export FALCON_LOGGING_ENDPOINT='http://127.0.0.1:41234'\n"
            "export STORAGE_EMULATOR_HOST='http://127.0.0.1:41234'\n"
            "export FALCON_ACCESS_TOKEN_FILE='/tmp/fleet.env.token'\n");
}

TEST(FleetEnv, SaysWhatIsMissingInComments) {
  const std::string script = fleet_env_script({.url = "http://127.0.0.1:1"});
  EXPECT_THAT(script, HasSubstr("# PATH: "));
  EXPECT_THAT(script, HasSubstr("# FALCON_CONFIG: "));
  EXPECT_THAT(script, HasSubstr("--repos-file"));
  EXPECT_THAT(script, HasSubstr("# FALCON_ACCESS_TOKEN_FILE: "));
  EXPECT_THAT(script, HasSubstr("export FALCON_FLEET_URL='http://127.0.0.1:1'\n"));
  EXPECT_THAT(script, ::testing::Not(HasSubstr("export PATH")));
}

TEST(FleetEnv, QuotesForTheShell) {
  EXPECT_EQ(shell_quote("/tmp/a b"), "'/tmp/a b'");
  EXPECT_EQ(shell_quote("it's $HOME"), "'it'\\''s $HOME'");
  EXPECT_EQ(shell_quote(""), "''");
}

}  // namespace
}  // namespace falcon::fleet
