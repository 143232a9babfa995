#include "support/fake_command_runner.h"

#include <signal.h>

#include <algorithm>

#include "falcon/errors.h"

namespace falcon::testing {

FakeCommandRunner::Response FakeCommandRunner::ok(std::string stdout_text) {
  Response r;
  r.result.exit_code = 0;
  r.result.stdout_text = std::move(stdout_text);
  return r;
}

FakeCommandRunner::Response FakeCommandRunner::fails(int exit_code, std::string stderr_text,
                                                     std::string stdout_text) {
  Response r;
  r.result.exit_code = exit_code;
  r.result.stderr_text = std::move(stderr_text);
  r.result.stdout_text = std::move(stdout_text);
  return r;
}

FakeCommandRunner::Response FakeCommandRunner::takes(std::chrono::milliseconds delay,
                                                     std::string stdout_text) {
  Response r = ok(std::move(stdout_text));
  r.delay = delay;
  return r;
}

FakeCommandRunner::Response FakeCommandRunner::cannot_start(std::string reason) {
  Response r;
  r.start_error = std::move(reason);
  return r;
}

FakeCommandRunner::Response FakeCommandRunner::killed_by(int signal) {
  Response r;
  r.result.exit_code = -1;
  r.result.term_signal = signal;
  return r;
}

void FakeCommandRunner::on(std::vector<std::string> argv_elements, Response response) {
  std::lock_guard lock(mutex_);
  rules_.push_back(Rule{std::move(argv_elements), std::move(response)});
}

void FakeCommandRunner::attach_clock(std::shared_ptr<FakeClock> clock) {
  std::lock_guard lock(mutex_);
  clock_ = std::move(clock);
}

void FakeCommandRunner::hold_until_concurrent(int n, std::chrono::milliseconds max_wait) {
  std::lock_guard lock(mutex_);
  hold_target_ = n;
  hold_max_wait_ = max_wait;
}

bool FakeCommandRunner::matches(const std::vector<std::string>& elements, const CommandSpec& spec) {
  return std::all_of(elements.begin(), elements.end(), [&](const std::string& e) {
    return std::find(spec.argv.begin(), spec.argv.end(), e) != spec.argv.end();
  });
}

CommandResult FakeCommandRunner::run(const CommandSpec& spec) {
  Response response;
  bool matched = false;
  std::shared_ptr<FakeClock> clock;
  {
    std::unique_lock lock(mutex_);
    calls_.push_back(spec);
    for (auto it = rules_.rbegin(); it != rules_.rend(); ++it) {
      if (matches(it->elements, spec)) {
        response = it->response;
        matched = true;
        break;
      }
    }
    clock = clock_;
    ++in_flight_;
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    if (hold_target_ > 0) {
      // Everyone waiting is released together when the target is reached.
      const long generation = hold_generation_;
      if (++hold_arrived_ >= hold_target_) {
        hold_arrived_ = 0;
        ++hold_generation_;
        in_flight_changed_.notify_all();
      } else {
        in_flight_changed_.wait_for(lock, hold_max_wait_,
                                    [&] { return hold_generation_ != generation; });
      }
    }
    --in_flight_;
  }

  if (!matched) {
    std::string argv;
    for (const auto& a : spec.argv) argv += (argv.empty() ? "" : " ") + a;
    CommandResult r;
    r.exit_code = 127;
    r.stderr_text = "FakeCommandRunner: no rule matches: " + argv;
    return r;
  }
  if (response.start_error) {
    throw CommandStartError(spec.argv.empty() ? "" : spec.argv.front(), *response.start_error);
  }
  CommandResult result = response.handler ? response.handler(spec) : response.result;
  if (response.delay >= spec.timeout) {
    result = CommandResult{};
    result.timed_out = true;
    result.exit_code = -1;
    result.term_signal = SIGTERM;
    result.elapsed = spec.timeout;
  } else if (response.delay > std::chrono::milliseconds::zero()) {
    result.elapsed = response.delay;
  }
  if (clock) clock->advance(result.elapsed);
  return result;
}

std::vector<CommandSpec> FakeCommandRunner::calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

std::vector<CommandSpec> FakeCommandRunner::calls_matching(
    const std::vector<std::string>& argv_elements) const {
  std::lock_guard lock(mutex_);
  std::vector<CommandSpec> out;
  for (const auto& c : calls_) {
    if (matches(argv_elements, c)) out.push_back(c);
  }
  return out;
}

int FakeCommandRunner::max_in_flight() const {
  std::lock_guard lock(mutex_);
  return max_in_flight_;
}

}  // namespace falcon::testing
