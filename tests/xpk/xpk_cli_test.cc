// The xpk adapter: state directory, per-cluster KUBECONFIG, argv layout, shell quoting.
#include "xpk/xpk_cli.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "falcon/errors.h"
#include "support/fake_command_runner.h"
#include "support/temp_dir.h"

namespace falcon::xpk {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Sets an environment variable for the scope (nullopt unsets it), restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

mode_t mode_of(const std::filesystem::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

ClusterConfig cluster() {
  ClusterConfig c;
  c.name = "tpu-v4-prod";
  c.project = "primatrix-tpu";
  c.zone = "us-central2-b";
  c.cluster_id = "tpu-v4-cluster";
  return c;
}

TEST(StateDir, ConfiguredDirectoryWins) {
  XpkSettings s;
  s.state_dir = "/srv/falcon-state";
  ScopedEnv xdg("XDG_STATE_HOME", "/elsewhere");
  EXPECT_EQ(resolve_state_dir(s), "/srv/falcon-state");
}

TEST(StateDir, FallsBackToXdgStateHomeThenHome) {
  XpkSettings s;
  {
    ScopedEnv xdg("XDG_STATE_HOME", "/xdg/state");
    EXPECT_EQ(resolve_state_dir(s), "/xdg/state/falcon");
  }
  {
    ScopedEnv xdg("XDG_STATE_HOME", std::nullopt);
    ScopedEnv home("HOME", "/home/ada");
    EXPECT_EQ(resolve_state_dir(s), "/home/ada/.local/state/falcon");
  }
  {
    ScopedEnv xdg("XDG_STATE_HOME", "relative/not/allowed");
    ScopedEnv home("HOME", "/home/ada");
    EXPECT_EQ(resolve_state_dir(s), "/home/ada/.local/state/falcon");
  }
}

TEST(StateDir, EnsurePrivateDirCreatesEveryMissingLevelWithMode0700) {
  falcon::testing::TempDir tmp;
  const auto dir = tmp.path() / "a" / "b" / "c";
  ensure_private_dir(dir);
  EXPECT_EQ(mode_of(tmp.path() / "a"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  ensure_private_dir(dir);  // idempotent
}

TEST(StateDir, EnsurePrivateDirFailsClearlyWhenAFileIsInTheWay) {
  falcon::testing::TempDir tmp;
  tmp.write("state", "not a directory");
  try {
    ensure_private_dir(tmp.path() / "state" / "kube");
    FAIL() << "expected FalconError";
  } catch (const FalconError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a directory"));
    EXPECT_THAT(e.what(), HasSubstr((tmp.path() / "state").string()));
  }
}

TEST(KubeconfigPath, OneDirectoryPerClusterName) {
  EXPECT_EQ(kubeconfig_path("/s", "tpu-v4-prod"), "/s/kube/tpu-v4-prod/config");
  EXPECT_EQ(kubeconfig_path("/s", "a/b c"), "/s/kube/a%2Fb%20c/config");
  EXPECT_EQ(kubeconfig_path("/s", ".."), "/s/kube/%2E%2E/config");
}

TEST(ShellQuote, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(shell_quote("python3"), "python3");
  EXPECT_EQ(shell_quote("--steps=100"), "--steps=100");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("two words"), "'two words'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  EXPECT_EQ(shell_join({"python3", "-c", "print('hi there')"}),
            "python3 -c 'print('\\''hi there'\\'')'");
}

TEST(XpkCli, LaysOutArgvAndGivesEachClusterItsOwnKubeconfig) {
  falcon::testing::TempDir tmp;
  XpkSettings s;
  s.binary = "/opt/xpk/bin/xpk";
  s.extra_args = {"--skip-validation"};
  s.env = {{"TELEMETRY_ENABLED", "false"}, {"KUBECONFIG", "/shared/config"}};
  s.state_dir = (tmp.path() / "state").string();
  XpkCli cli(std::make_shared<falcon::testing::FakeCommandRunner>(), s);

  const auto spec = cli.workload_command(cluster(), "list", {"--filter-by-job=x"}, {"--tail"},
                                         std::chrono::seconds(15));
  EXPECT_THAT(spec.argv,
              ElementsAre("/opt/xpk/bin/xpk", "workload", "list", "--cluster=tpu-v4-cluster",
                          "--project=primatrix-tpu", "--zone=us-central2-b", "--filter-by-job=x",
                          "--skip-validation", "--tail"));
  EXPECT_EQ(spec.timeout, std::chrono::seconds(15));
  EXPECT_EQ(spec.env.at("TELEMETRY_ENABLED"), "false");
  const auto kubeconfig = tmp.path() / "state" / "kube" / "tpu-v4-prod" / "config";
  EXPECT_EQ(spec.env.at("KUBECONFIG"), kubeconfig.string());  // ours wins over xpk.env's
  EXPECT_EQ(mode_of(tmp.path() / "state"), 0700u);
  EXPECT_EQ(mode_of(kubeconfig.parent_path()), 0700u);
}

}  // namespace
}  // namespace falcon::xpk
