// PosixCommandRunner against real processes: small shell scripts written into a TempDir.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "falcon/command_runner.h"
#include "falcon/errors.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

// A pid that exists and is not a zombie.
bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// Polls until `pid` is gone, for at most `limit`.
bool wait_until_gone(pid_t pid, milliseconds limit = milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!process_alive(pid)) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return !process_alive(pid);
}

// The integer after `key ` in `text`.
pid_t value_after(const std::string& text, const std::string& key) {
  const auto pos = text.find(key + " ");
  if (pos == std::string::npos) return -1;
  return static_cast<pid_t>(std::stol(text.substr(pos + key.size() + 1)));
}

class PosixCommandRunnerTest : public ::testing::Test {
 protected:
  std::string script(const std::string& name, const std::string& body) {
    return dir_.write(name, "#!/bin/sh\n" + body, /*executable=*/true).string();
  }
  CommandResult run(std::vector<std::string> argv, milliseconds timeout = milliseconds(30'000)) {
    CommandSpec spec;
    spec.argv = std::move(argv);
    spec.timeout = timeout;
    return runner_->run(spec);
  }

  testing::TempDir dir_;
  std::shared_ptr<CommandRunner> runner_ = make_posix_command_runner();
};

TEST_F(PosixCommandRunnerTest, CapturesStdoutStderrAndTheExitCode) {
  const auto r = run({script("x", "echo out; echo err >&2; exit 3\n")});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");
}

TEST_F(PosixCommandRunnerTest, ArgvIsPassedWithoutAShell) {
  const auto r = run({"printf", "%s|", "two words", "$HOME", "'q'", ";ls"});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.stdout_text, "two words|$HOME|'q'|;ls|");
}

TEST_F(PosixCommandRunnerTest, ReportsTheSignalThatEndedTheProcess) {
  const auto r = run({script("x", "kill -USR1 $$\nsleep 5\n")});
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.term_signal, SIGUSR1);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.ok());
}

// A descriptor opened without close-on-exec (as Boost.Asio opens the server's sockets) does not
// reach the child: only its standard streams do.
TEST_F(PosixCommandRunnerTest, TheChildInheritsNoDescriptorButItsStandardStreams) {
  const int opened = ::open("/dev/null", O_RDONLY);
  const int leaked = ::fcntl(opened, F_DUPFD, 100);  // no close-on-exec
  ::close(opened);
  ASSERT_GE(leaked, 100);
  const auto r = run({script("x", "ls /proc/self/fd\n")});
  ::close(leaked);
  ASSERT_TRUE(r.ok()) << r.stderr_text;
  // ls itself holds one more: the directory it reads.
  std::istringstream fds(r.stdout_text);
  std::vector<int> open;
  for (std::string line; std::getline(fds, line);) open.push_back(std::stoi(line));
  EXPECT_THAT(open, ::testing::Not(::testing::Contains(leaked)));
  EXPECT_LE(open.size(), 4u) << r.stdout_text;
}

TEST_F(PosixCommandRunnerTest, ReportsElapsedTime) {
  const auto r = run({"sleep", "0.2"});
  EXPECT_TRUE(r.ok());
  EXPECT_GE(r.elapsed, milliseconds(200));
}

TEST_F(PosixCommandRunnerTest, AddsAndReplacesEnvironmentVariables) {
  ::setenv("FALCON_RUNNER_TEST_INHERITED", "from-parent", 1);
  ::setenv("FALCON_RUNNER_TEST_REPLACED", "old", 1);
  CommandSpec spec;
  spec.argv = {script("x",
                      "echo \"$FALCON_RUNNER_TEST_INHERITED $FALCON_RUNNER_TEST_REPLACED "
                      "$KUBECONFIG\"\n")};
  spec.env = {{"FALCON_RUNNER_TEST_REPLACED", "new"}, {"KUBECONFIG", "/state/kube/a/config"}};
  const auto r = runner_->run(spec);
  EXPECT_EQ(r.stdout_text, "from-parent new /state/kube/a/config\n");
  ::unsetenv("FALCON_RUNNER_TEST_INHERITED");
  ::unsetenv("FALCON_RUNNER_TEST_REPLACED");
}

TEST_F(PosixCommandRunnerTest, LooksTheBinaryUpInTheCommandsOwnPath) {
  script("bin/my-tool", "echo found me\n");
  CommandSpec spec;
  spec.argv = {"my-tool"};
  spec.env = {{"PATH", (dir_.path() / "bin").string() + ":/usr/bin:/bin"}};
  const auto r = runner_->run(spec);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.stdout_text, "found me\n");
}

TEST_F(PosixCommandRunnerTest, AMissingBinaryIsACommandStartErrorNamingIt) {
  try {
    run({"falcon-no-such-binary-xyz", "workload", "list"});
    FAIL() << "expected CommandStartError";
  } catch (const CommandStartError& e) {
    EXPECT_EQ(e.binary(), "falcon-no-such-binary-xyz");
    EXPECT_THAT(e.what(), HasSubstr("'falcon-no-such-binary-xyz'"));
    EXPECT_THAT(e.what(), HasSubstr("not found in PATH"));
  }
  try {
    run({"/nonexistent/dir/xpk"});
    FAIL() << "expected CommandStartError";
  } catch (const CommandStartError& e) {
    EXPECT_EQ(e.binary(), "/nonexistent/dir/xpk");
    EXPECT_THAT(e.what(), HasSubstr("No such file or directory"));
  }
}

TEST_F(PosixCommandRunnerTest, ANonExecutableFileIsACommandStartError) {
  const auto path = dir_.write("not-exec", "#!/bin/sh\necho hi\n", /*executable=*/false);
  try {
    run({path.string()});
    FAIL() << "expected CommandStartError";
  } catch (const CommandStartError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Permission denied"));
  }
}

TEST_F(PosixCommandRunnerTest, StdinIsDevNullSoAPromptFailsFast) {
  const auto r =
      run({script("xpk", R"(printf '[XPK] w already exists, do you want to overwrite it? (y/N): '
if ! read answer; then
  echo "EOFError: EOF when reading a line" >&2
  exit 1
fi
echo "answered: $answer"
)")},
          milliseconds(30'000));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.timed_out);
  // Had the prompt waited for an answer, the run would have timed out after 30 s instead.
  EXPECT_THAT(r.stderr_text, HasSubstr("EOFError"));
}

TEST_F(PosixCommandRunnerTest, TimeoutKillsTheProcessAndItsGrandchild) {
  // The grandchild ignores SIGTERM, so only the group-wide SIGKILL ends it.
  const auto r = run({script("xpk", R"((trap '' TERM; exec sleep 30) &
echo "grandchild $!"
echo started
wait
)")},
                     milliseconds(300));
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(r.stdout_text, HasSubstr("started"));  // output before the deadline is kept
  EXPECT_GE(r.elapsed, milliseconds(300));
  EXPECT_EQ(r.term_signal, SIGTERM);  // the leader died on SIGTERM: no escalation to SIGKILL
  const pid_t grandchild = value_after(r.stdout_text, "grandchild");
  ASSERT_GT(grandchild, 0) << r.stdout_text;
  EXPECT_TRUE(wait_until_gone(grandchild)) << "grandchild " << grandchild << " survived";
}

TEST_F(PosixCommandRunnerTest, TimeoutEscalatesToSigkillWhenSigtermIsIgnored) {
  const auto r =
      run({script("xpk", "trap '' TERM\necho \"self $$\"\nwhile :; do sleep 0.05; done\n")},
          milliseconds(200));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_GE(r.elapsed, milliseconds(2000));  // 0.2 s deadline + the 2 s grace
  const pid_t self = value_after(r.stdout_text, "self");
  ASSERT_GT(self, 0);
  EXPECT_FALSE(process_alive(self));
}

TEST_F(PosixCommandRunnerTest, ABackgroundChildHoldingThePipesDoesNotBlockTheResult) {
  // The background child outlives the run's 30 s timeout: waiting for it to close the pipes
  // would end in a timeout, not in the leader's exit status.
  const auto r = run({script("x", "sleep 3600 &\necho \"bg $!\"\necho done\n")});
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.timed_out);
  EXPECT_THAT(r.stdout_text, HasSubstr("done"));
  const pid_t bg = value_after(r.stdout_text, "bg");
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(wait_until_gone(bg));
}

TEST_F(PosixCommandRunnerTest, OutputBeyondTheBoundIsTruncatedAndReported) {
  CommandSpec spec;
  spec.argv = {script(
      "x", "head -c 200000 /dev/zero | tr '\\0' o\nhead -c 50 /dev/zero | tr '\\0' e >&2\n")};
  spec.max_output_bytes = 1000;
  const auto r = runner_->run(spec);
  EXPECT_TRUE(r.ok());  // the child was drained, not blocked or killed
  EXPECT_EQ(r.stdout_text, std::string(1000, 'o'));
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_EQ(r.stderr_text, std::string(50, 'e'));
  EXPECT_FALSE(r.stderr_truncated);
}

TEST_F(PosixCommandRunnerTest, LargeOutputOnBothStreamsDoesNotDeadlock) {
  const auto r = run({script("x",
                             "head -c 1000000 /dev/zero | tr '\\0' e >&2\n"
                             "head -c 1000000 /dev/zero | tr '\\0' o\n")});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.stdout_text.size(), 1000000u);
  EXPECT_EQ(r.stderr_text.size(), 1000000u);
  EXPECT_FALSE(r.stdout_truncated);
}

TEST_F(PosixCommandRunnerTest, ConcurrentRunsDoNotHoldEachOthersPipes) {
  // If a pipe leaked into the long-running child, the short runs would wait for it to exit: it
  // exits only once they have all finished, so they would time out instead. Two FIFOs order the
  // steps without sleeping: the child has started, then (after the short runs) it may end.
  const auto started = dir_.path() / "started";
  const auto release = dir_.path() / "release";
  ASSERT_EQ(::mkfifo(started.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(release.c_str(), 0600), 0);
  std::jthread slow([&] {
    run({script("slow",
                "echo up > '" + started.string() + "'\nread x < '" + release.string() + "'\n")});
  });
  std::string up;
  std::getline(std::ifstream(started), up);
  ASSERT_EQ(up, "up");
  for (int i = 0; i < 20; ++i) {
    const auto r = run({"echo", std::to_string(i)}, milliseconds(20'000));
    EXPECT_FALSE(r.timed_out) << "run " << i;
    EXPECT_EQ(r.stdout_text, std::to_string(i) + "\n");
  }
  std::ofstream(release) << "go\n";
}

TEST_F(PosixCommandRunnerTest, ManyThreadsCanRunAtOnce) {
  std::vector<std::jthread> threads;
  std::vector<CommandResult> results(8);
  for (std::size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] { results[t] = run({"sh", "-c", "echo $0", std::to_string(t)}); });
  }
  threads.clear();
  for (std::size_t t = 0; t < results.size(); ++t) {
    EXPECT_EQ(results[t].stdout_text, std::to_string(t) + "\n");
  }
}

}  // namespace
}  // namespace falcon
