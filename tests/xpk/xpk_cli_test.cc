// The xpk adapter: state directory, private kubeconfigs, argv layout, shell quoting.
#include "xpk/xpk_cli.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "falcon/errors.h"
#include "support/fake_command_runner.h"
#include "support/temp_dir.h"
#include "xpk/private_kubeconfig.h"

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

TEST(RuntimeDir, ConfiguredDirectoryWinsThenXdgRuntimeDirThenDevShm) {
  XpkSettings s;
  s.runtime_dir = "/run/falcon-calls";
  ScopedEnv xdg("XDG_RUNTIME_DIR", "/run/user/1000");
  EXPECT_EQ(resolve_runtime_dir(s, "/state"), "/run/falcon-calls");
  s.runtime_dir.clear();
  EXPECT_EQ(resolve_runtime_dir(s, "/state"), "/run/user/1000/falcon");
  ScopedEnv relative("XDG_RUNTIME_DIR", "relative/not/allowed");
  // Not on the state disk: memory when the machine has /dev/shm (every Linux), else the state
  // directory as before.
  EXPECT_EQ(resolve_runtime_dir(s, "/state"),
            std::filesystem::is_directory("/dev/shm")
                ? std::filesystem::path(fmt::format("/dev/shm/falcon-{}", ::geteuid()))
                : std::filesystem::path("/state/run"));
}

TEST(RuntimeDir, ALinkOrADirectoryOfAnotherUserIsRefusedAndOursIsMadePrivate) {
  falcon::testing::TempDir tmp;
  // /dev/shm is writable by every user: a link planted where ours would be is not followed.
  std::filesystem::create_directories(tmp.path() / "elsewhere");
  std::filesystem::create_directory_symlink(tmp.path() / "elsewhere", tmp.path() / "link");
  try {
    prepare_runtime_dir(tmp.path() / "link");
    FAIL() << "expected FalconError";
  } catch (const FalconError& e) {
    EXPECT_THAT(e.what(), HasSubstr((tmp.path() / "link").string()));
    EXPECT_THAT(e.what(), HasSubstr("xpk.runtime_dir"));
  }
  const auto ours = tmp.path() / "ours";
  std::filesystem::create_directories(ours);
  ::chmod(ours.c_str(), 0777);
  prepare_runtime_dir(ours);
  EXPECT_EQ(mode_of(ours), 0700u);
  if (::geteuid() == 0) {  // only root can give a directory away
    const auto theirs = tmp.path() / "theirs";
    std::filesystem::create_directories(theirs);
    ASSERT_EQ(::chown(theirs.c_str(), 4242, 4242), 0);
    try {
      prepare_runtime_dir(theirs);
      FAIL() << "expected FalconError";
    } catch (const FalconError& e) {
      EXPECT_THAT(e.what(), HasSubstr("belongs to uid 4242"));
    }
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

TEST(XpkCli, LaysOutArgvWithTheSettings) {
  XpkSettings s;
  s.binary = "/opt/xpk/bin/xpk";
  s.extra_args = {"--skip-validation"};
  s.state_dir = "/unused";
  const XpkCli cli(std::make_shared<falcon::testing::FakeCommandRunner>(), s);
  EXPECT_THAT(cli.workload_argv(cluster(), "list", {"--filter-by-job=x"}, {"--tail"}),
              ElementsAre("/opt/xpk/bin/xpk", "workload", "list", "--cluster=tpu-v4-cluster",
                          "--project=primatrix-tpu", "--zone=us-central2-b", "--filter-by-job=x",
                          "--skip-validation", "--tail"));
}

// Issue 11: xpk rewrites $KUBECONFIG on every call, not atomically; no two calls may share one.
class XpkCliKubeconfigTest : public ::testing::Test {
 protected:
  XpkCliKubeconfigTest() {
    settings_.binary = "/opt/xpk/bin/xpk";
    settings_.env = {{"TELEMETRY_ENABLED", "false"}, {"KUBECONFIG", "/shared/config"}};
    settings_.state_dir = (tmp_.path() / "state").string();
    settings_.runtime_dir = (tmp_.path() / "run").string();
  }
  std::filesystem::path cluster_dir() const {
    return tmp_.path() / "state" / "kube" / "tpu-v4-prod";
  }
  std::filesystem::path calls() const { return tmp_.path() / "run"; }

  falcon::testing::TempDir tmp_;
  XpkSettings settings_;
  std::shared_ptr<falcon::testing::FakeCommandRunner> runner_ =
      std::make_shared<falcon::testing::FakeCommandRunner>();
};

TEST_F(XpkCliKubeconfigTest, EachCallGetsAPrivateKubeconfigSeededFromTheWarmedOneAndRemoved) {
  ensure_private_dir(cluster_dir());
  std::ofstream(cluster_dir() / "config") << "current-context: warmed\n";
  std::string seen;
  falcon::testing::FakeCommandRunner::Response r;
  r.handler = [&](const CommandSpec& spec) {
    const std::filesystem::path k = spec.env.at("KUBECONFIG");
    seen = falcon::testing::read_file(k);
    EXPECT_EQ(mode_of(k) & 0777, 0600u);
    EXPECT_EQ(mode_of(k.parent_path()), 0700u);
    std::ofstream(k, std::ios::trunc) << "rewritten by xpk";  // as get-credentials does
    CommandResult ok;
    ok.exit_code = 0;
    return ok;
  };
  runner_->on({"workload"}, r);
  const XpkCli cli(runner_, settings_);
  const auto result = cli.run_workload(cluster(), "list", {}, {}, std::chrono::seconds(15));
  EXPECT_TRUE(result.ok());

  const auto call = runner_->calls().at(0);
  EXPECT_EQ(call.timeout, std::chrono::seconds(15));
  EXPECT_EQ(call.env.at("TELEMETRY_ENABLED"), "false");
  const std::filesystem::path kubeconfig = call.env.at("KUBECONFIG");  // ours wins over xpk.env's
  // Not on the state disk (issue 27: a full one failed every probe).
  EXPECT_EQ(kubeconfig.parent_path().parent_path(), calls());
  EXPECT_EQ(seen, "current-context: warmed\n");
  EXPECT_FALSE(std::filesystem::exists(kubeconfig.parent_path()));
  // The warmed kubeconfig is never written by an xpk call.
  EXPECT_EQ(falcon::testing::read_file(cluster_dir() / "config"), "current-context: warmed\n");
  EXPECT_EQ(mode_of(tmp_.path() / "state"), 0700u);
  EXPECT_EQ(mode_of(cluster_dir()), 0700u);
  EXPECT_EQ(mode_of(calls()), 0700u);
}

TEST_F(XpkCliKubeconfigTest, ConcurrentCallsOnOneClusterNeverShareAFile) {
  runner_->on({"workload"}, falcon::testing::FakeCommandRunner::ok(""));
  runner_->hold_until_concurrent(4, std::chrono::seconds(10));
  const XpkCli cli(runner_, settings_);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < 4; ++i) {
      threads.emplace_back(
          [&] { cli.run_workload(cluster(), "list", {}, {}, std::chrono::seconds(5)); });
    }
  }
  EXPECT_EQ(runner_->max_in_flight(), 4);
  std::set<std::string> files;
  for (const auto& call : runner_->calls()) files.insert(call.env.at("KUBECONFIG"));
  EXPECT_EQ(files.size(), 4u);
  // Without a warmed kubeconfig there is nothing to seed: xpk fetches credentials itself.
  EXPECT_TRUE(std::filesystem::is_empty(calls()));
}

TEST_F(XpkCliKubeconfigTest, RemovesCallDirectoriesLeftByADeadProcess) {
  // A falcon process killed mid-call leaves its directory; a pid that no longer runs is swept.
  pid_t dead = 0;
  if (const pid_t child = ::fork(); child == 0) {
    ::_exit(0);
  } else {
    ::waitpid(child, nullptr, 0);
    dead = child;
  }
  std::filesystem::create_directories(calls() / fmt::format("{}-0", dead));
  std::filesystem::create_directories(calls() / fmt::format("{}-0", ::getpid()));
  std::filesystem::create_directories(calls() / "not-ours");
  runner_->on({"workload"}, falcon::testing::FakeCommandRunner::ok(""));
  const XpkCli cli(runner_, settings_);
  cli.run_workload(cluster(), "list", {}, {}, std::chrono::seconds(5));
  EXPECT_FALSE(std::filesystem::exists(calls() / fmt::format("{}-0", dead)));
  EXPECT_TRUE(std::filesystem::exists(calls() / fmt::format("{}-0", ::getpid())));
  EXPECT_TRUE(std::filesystem::exists(calls() / "not-ours"));
}

TEST_F(XpkCliKubeconfigTest, AnUnusableKubeDirectoryIsAClearError) {
  std::filesystem::create_directories(tmp_.path() / "state" / "kube");
  std::ofstream(cluster_dir()) << "a file in the way";
  const XpkCli cli(runner_, settings_);
  try {
    cli.run_workload(cluster(), "list", {}, {}, std::chrono::seconds(5));
    FAIL() << "expected FalconError";
  } catch (const FalconError& e) {
    EXPECT_THAT(e.what(), HasSubstr(cluster_dir().string()));
  }
  EXPECT_TRUE(runner_->calls().empty());
}

}  // namespace
}  // namespace falcon::xpk
