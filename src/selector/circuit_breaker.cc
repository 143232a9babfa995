#include "falcon/circuit_breaker.h"

#include <algorithm>

#include <fmt/format.h>

#include "falcon/accelerator_types.h"
#include "falcon/errors.h"
#include "util/time_format.h"

namespace falcon {
namespace {

// Compare-and-set rounds before giving up: each lost round means another writer changed the
// breaker in between, so this many in a row only happens under a storm of writers.
constexpr int kMaxCasRounds = 64;

BreakerState opened(BreakerState s, const BreakerSettings& settings, StoreTime now) {
  s.state = kBreakerOpen;
  s.trips += 1;
  s.opened_until = now + breaker_cooldown(settings, s.trips);
  s.updated_at = now;
  return s;
}

BreakerState closed(BreakerState s, StoreTime now) {
  s.state = kBreakerClosed;
  s.consecutive_failures = 0;
  s.opened_until = now;  // when it closed: the trips are forgotten cooldown_max_s later
  s.updated_at = now;
  return s;
}

// Equal apart from the bookkeeping (updated_at): nothing to write.
bool same_state(const BreakerState& a, const BreakerState& b) {
  return a.state == b.state && a.consecutive_failures == b.consecutive_failures &&
         a.trips == b.trips && a.opened_until == b.opened_until;
}

}  // namespace

std::string breaker_key(const std::string& cluster) { return cluster; }

std::string breaker_key(const std::string& cluster, const std::string& accelerator) {
  return cluster + "/" + canonical_accelerator_type(accelerator).value_or(accelerator);
}

std::chrono::seconds breaker_cooldown(const BreakerSettings& settings, int trips) {
  const std::int64_t cap = std::max(settings.cooldown_max_s, settings.cooldown_s);
  std::int64_t cooldown = settings.cooldown_s;
  for (int i = 1; i < trips && cooldown < cap; ++i) cooldown *= 2;
  return std::chrono::seconds(std::min(cooldown, cap));
}

BreakerState breaker_after_success(BreakerState s, const BreakerSettings& settings, StoreTime now) {
  if (s.state != kBreakerClosed) return closed(std::move(s), now);
  s.consecutive_failures = 0;
  if (s.trips > 0 && s.opened_until &&
      now >= *s.opened_until + std::chrono::seconds(settings.cooldown_max_s)) {
    s.trips = 0;
  }
  s.updated_at = now;
  return s;
}

BreakerState breaker_after_failure(BreakerState s, const BreakerSettings& settings, StoreTime now) {
  s.consecutive_failures += 1;
  s.updated_at = now;
  if (s.state == kBreakerHalfOpen) return opened(std::move(s), settings, now);
  if (s.state == kBreakerClosed && s.consecutive_failures >= settings.failures) {
    return opened(std::move(s), settings, now);
  }
  return s;  // open: counted, stays open until its cool-down ends
}

BreakerAdmission breaker_admission(const BreakerState& s, const BreakerSettings& settings,
                                   StoreTime now) {
  BreakerAdmission a;
  if (s.state == kBreakerClosed) return a;
  const StoreTime until = s.opened_until.value_or(now);
  if (now < until) {
    a.allowed = false;
    if (s.state == kBreakerOpen) {
      a.reason = fmt::format("circuit breaker open until {} (trip {}, {} consecutive failure{})",
                             format_iso8601(until), s.trips, s.consecutive_failures,
                             s.consecutive_failures == 1 ? "" : "s");
    } else {
      a.reason =
          fmt::format("circuit breaker half-open: another caller's trial is under way (until {})",
                      format_iso8601(until));
    }
    return a;
  }
  BreakerState trial = s;
  trial.state = kBreakerHalfOpen;
  trial.opened_until = now + breaker_cooldown(settings, std::max(1, s.trips));
  trial.updated_at = now;
  a.claim = std::move(trial);
  return a;
}

CircuitBreakers::CircuitBreakers(std::shared_ptr<StateStore> store, BreakerSettings settings,
                                 std::shared_ptr<Clock> clock)
    : store_(std::move(store)), settings_(settings), clock_(std::move(clock)) {}

BreakerState CircuitBreakers::get(const std::string& key) const {
  return store_->get_breaker(key).value_or(BreakerState{.key = key});
}

std::optional<std::string> CircuitBreakers::admit(const std::string& key) const {
  for (int round = 0; round < kMaxCasRounds; ++round) {
    const BreakerState s = get(key);
    BreakerAdmission a = breaker_admission(s, settings_, clock_->now());
    if (!a.allowed) return a.reason;
    if (!a.claim) return std::nullopt;
    if (store_->compare_and_set_breaker(*a.claim)) return std::nullopt;  // the trial is ours
  }
  throw StateStoreError(
      store_->backend(), store_->location(), "compare_and_set_breaker",
      fmt::format("breaker '{}' changed under {} attempts in a row", key, kMaxCasRounds));
}

template <typename Step>
bool CircuitBreakers::update(const std::string& key, Step step) const {
  for (int round = 0; round < kMaxCasRounds; ++round) {
    const BreakerState s = get(key);
    const BreakerState next = step(s, settings_, clock_->now());
    if (same_state(s, next)) return false;  // (get() answers a closed default for no row)
    if (store_->compare_and_set_breaker(next)) return true;
  }
  throw StateStoreError(
      store_->backend(), store_->location(), "compare_and_set_breaker",
      fmt::format("breaker '{}' changed under {} attempts in a row", key, kMaxCasRounds));
}

bool CircuitBreakers::record_success(const std::string& key) const {
  return update(key, breaker_after_success);
}

bool CircuitBreakers::record_failure(const std::string& key) const {
  return update(key, breaker_after_failure);
}

std::string describe_breaker(const BreakerState& s, StoreTime now) {
  if (s.state == kBreakerClosed) {
    if (s.consecutive_failures == 0) return "closed";
    return fmt::format("closed ({} failure{})", s.consecutive_failures,
                       s.consecutive_failures == 1 ? "" : "s");
  }
  const StoreTime until = s.opened_until.value_or(now);
  if (s.state == kBreakerOpen) {
    if (now >= until) return fmt::format("open (trial due, trip {})", s.trips);
    return fmt::format("open until {} (trip {}, {} failures)", format_iso8601(until), s.trips,
                       s.consecutive_failures);
  }
  if (now >= until) return "half_open (trial lapsed, next call is a trial)";
  return fmt::format("half_open (trial until {})", format_iso8601(until));
}

}  // namespace falcon
