// The library side of `falcon job logs --follow` and `--since`: the stop rule and the age
// parser, so that the CLI needs nothing from src/ and a test can drive both on a fake clock.
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "falcon/log_retriever.h"
#include "util/time_format.h"

namespace falcon {

std::function<bool()> follow_until_finished(std::shared_ptr<Clock> clock,
                                            std::function<bool()> is_finished,
                                            std::function<bool()> interrupted,
                                            std::chrono::milliseconds linger,
                                            std::chrono::milliseconds check_every) {
  if (!clock || !is_finished) {
    throw std::invalid_argument("follow_until_finished needs a clock and a finished check");
  }
  struct State {
    std::mutex mutex;
    std::optional<std::chrono::steady_clock::time_point> last_check;
    std::optional<std::chrono::steady_clock::time_point> finished_at;
  };
  auto state = std::make_shared<State>();
  return [=]() {
    if (interrupted && interrupted()) return true;
    std::lock_guard lock(state->mutex);
    const auto now = clock->steady_now();
    if (state->finished_at) return now - *state->finished_at >= linger;
    if (!state->last_check || now - *state->last_check >= check_every) {
      state->last_check = now;
      if (is_finished()) state->finished_at = now;
    }
    return false;
  };
}

std::chrono::milliseconds follow_linger(const FollowOptions& options) {
  return options.poll_interval + options.visibility_delay;
}

}  // namespace falcon
