// A scriptable CommandRunner for unit tests: records every call and answers by argv pattern,
// without starting a process. Thread-safe.
//
//   auto runner = std::make_shared<FakeCommandRunner>();
//   runner->on({"workload", "list", "--cluster=c-tpu"}, FakeCommandRunner::ok(kListOutput));
//   runner->on({"workload", "delete"}, FakeCommandRunner::fails(1, "Error from server ..."));
//   runner->on({"--cluster=c-slow"}, FakeCommandRunner::takes(std::chrono::seconds(20)));
//   ... code under test ...
//   EXPECT_THAT(runner->calls()[0].argv, ElementsAre("xpk", "workload", "list", ...));
//
// A rule matches when every one of its elements equals some element of argv. The most recently
// added matching rule answers. A call no rule matches gets exit code 127 and a stderr naming
// its argv, so a missing rule shows up in the failure message.
//
// Time is simulated: a response's `delay` is reported as `elapsed`, and a delay at or past the
// command's timeout turns into a timeout (timed_out, killed by SIGTERM, elapsed = the timeout),
// as the POSIX runner reports it. With a FakeClock attached, each call advances it by the
// elapsed time. Nothing sleeps.
//
// Concurrency can be observed without sleeping: with hold_until_concurrent(n, max_wait), each
// call waits (on a condition variable) until n calls have arrived in the current round, all of
// them in flight together, which releases them all, or until max_wait has passed; max_in_flight()
// reports the most calls ever in flight together. Code that runs calls one by one reaches 1, slowly
// (max_wait per call).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "falcon/command_runner.h"
#include "support/fake_clock.h"

namespace falcon::testing {

class FakeCommandRunner final : public CommandRunner {
 public:
  struct Response {
    CommandResult result;                    // what the call returns (elapsed is set from delay)
    std::chrono::milliseconds delay{0};      // simulated run time
    std::optional<std::string> start_error;  // throw CommandStartError(argv[0], *start_error)
    std::function<CommandResult(const CommandSpec&)> handler;  // computes the result instead
  };

  // Exit 0 with this stdout.
  static Response ok(std::string stdout_text = "");
  // Exit `exit_code` with this stderr and stdout.
  static Response fails(int exit_code, std::string stderr_text, std::string stdout_text = "");
  // Exit 0 with this stdout after `delay` (a timeout if delay >= the command's timeout).
  static Response takes(std::chrono::milliseconds delay, std::string stdout_text = "");
  // The binary cannot be started.
  static Response cannot_start(std::string reason);
  // Killed by `signal`.
  static Response killed_by(int signal);

  FakeCommandRunner() = default;

  // Answers calls whose argv contains every element of `argv_elements` with `response`.
  void on(std::vector<std::string> argv_elements, Response response);
  // Advances `clock` by each call's elapsed time.
  void attach_clock(std::shared_ptr<FakeClock> clock);
  // See the file comment.
  void hold_until_concurrent(int n, std::chrono::milliseconds max_wait);

  CommandResult run(const CommandSpec& spec) override;

  // Every call so far, in the order they started.
  std::vector<CommandSpec> calls() const;
  // The calls whose argv contains every element of `argv_elements`.
  std::vector<CommandSpec> calls_matching(const std::vector<std::string>& argv_elements) const;
  int max_in_flight() const;

 private:
  struct Rule {
    std::vector<std::string> elements;
    Response response;
  };
  static bool matches(const std::vector<std::string>& elements, const CommandSpec& spec);

  mutable std::mutex mutex_;
  std::condition_variable in_flight_changed_;
  std::vector<Rule> rules_;
  std::vector<CommandSpec> calls_;
  std::shared_ptr<FakeClock> clock_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  int hold_target_ = 0;
  int hold_arrived_ = 0;  // calls held in the current round
  long hold_generation_ = 0;
  std::chrono::milliseconds hold_max_wait_{0};
};

}  // namespace falcon::testing
