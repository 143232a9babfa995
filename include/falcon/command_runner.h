// Running external commands (xpk, gcloud): the one seam through which the layer starts
// processes. The POSIX implementation runs argv directly (never a shell), with stdin from
// /dev/null, output captured up to a bound, and a deadline after which the whole process group
// is terminated, killed and reaped. Tests substitute a fake that records argv.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace falcon {

struct CommandSpec {
  std::vector<std::string> argv;              // argv[0] is a path or a name looked up in PATH
  std::map<std::string, std::string> env;     // added to (or replacing in) the parent's environment
  std::chrono::milliseconds timeout{60'000};  // the whole process group is killed after this
  std::size_t max_output_bytes = 4 << 20;     // per stream; more is dropped and reported
};

struct CommandResult {
  int exit_code = -1;   // the exit status, or -1 when killed by a signal
  int term_signal = 0;  // the signal that ended it, 0 if it exited
  bool timed_out = false;
  std::string stdout_text;
  std::string stderr_text;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::chrono::milliseconds elapsed{0};

  bool ok() const { return !timed_out && term_signal == 0 && exit_code == 0; }
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs the command to completion or to its deadline; blocks the calling thread. Safe to call
  // from many threads at once. Throws CommandStartError when the binary cannot be started (not
  // found, not executable), naming it. Never throws for a non-zero exit or a timeout: those are
  // reported in the result.
  virtual CommandResult run(const CommandSpec& spec) = 0;
};

// The POSIX implementation (fork/exec, process groups, poll).
std::shared_ptr<CommandRunner> make_posix_command_runner();

}  // namespace falcon
