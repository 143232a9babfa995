// Circuit breakers (issue 15): a cluster that keeps failing is left alone for a while instead of
// being probed and submitted to again and again.
//
// One breaker per cluster (key "<cluster>", fed by probes) and one per cluster x accelerator
// (key "<cluster>/<accelerator>", canonical spelling, fed by submits). The state machine, with
// BreakerSettings (repos.yaml `selection.breaker`) and `now` from the caller's Clock:
//
//   closed     every call goes through. A failure adds one to consecutive_failures; the
//              `failures`-th in a row opens it: trips + 1, opened_until = now + cool-down, where
//              the cool-down is cooldown_s * 2^(trips - 1), at most cooldown_max_s. A success
//              resets consecutive_failures; once the breaker has stayed closed for
//              cooldown_max_s after its last trip, a success also forgets the trips.
//   open       calls are refused until opened_until. The first caller after it claims the one
//              trial: the breaker goes half_open with opened_until = now + the current cool-down
//              (the trial's deadline). A success closes it; a failure counts but keeps it open.
//   half_open  the trial is under way: other callers are refused. Its success closes the breaker;
//              its failure opens it again (trips + 1, a longer cool-down). A trial that never
//              reports (its process died) lapses at opened_until and the next caller gets one.
//
// A closed breaker's opened_until is when it last closed (or null if it never opened).
//
// The state lives in the StateStore, updated with compare_and_set_breaker, so CLI processes and
// `falcon serve` replicas sharing a store see one breaker and exactly one of them gets a trial.
//
//   falcon::CircuitBreakers breakers(store, config.selection.breaker, clock);
//   if (auto why = breakers.admit(falcon::breaker_key(cluster))) skip(*why);
//   ... probe ...
//   ok ? breakers.record_success(key) : breakers.record_failure(key);
#pragma once

#include <chrono>

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/state_store.h"

namespace falcon {

// "<cluster>", or "<cluster>/<accelerator>" with the accelerator in its canonical spelling (as
// given when it is not a known type).
std::string breaker_key(const std::string& cluster);
std::string breaker_key(const std::string& cluster, const std::string& accelerator);

// The cool-down of the `trips`-th trip (trips >= 1): cooldown_s * 2^(trips - 1), capped.
std::chrono::seconds breaker_cooldown(const BreakerSettings& settings, int trips);

// The pure state machine. Each returns the next state (version kept, updated_at = now).
BreakerState breaker_after_success(BreakerState state, const BreakerSettings& settings,
                                   StoreTime now);
BreakerState breaker_after_failure(BreakerState state, const BreakerSettings& settings,
                                   StoreTime now);

// Whether a call may go through now.
struct BreakerAdmission {
  bool allowed = true;
  // Set when the call is the half-open trial: the state to store (with compare-and-set) to
  // claim it. The call goes through only if that store succeeds.
  std::optional<BreakerState> claim;
  std::string reason;  // why it is refused: "circuit breaker open until <time> (...)"
};
BreakerAdmission breaker_admission(const BreakerState& state, const BreakerSettings& settings,
                                   StoreTime now);

// The breakers of one store. Every method reads and writes the store (throws StateStoreError
// when it fails: the caller decides whether to go on without breakers). Thread-safe.
class CircuitBreakers {
 public:
  CircuitBreakers(std::shared_ptr<StateStore> store, BreakerSettings settings,
                  std::shared_ptr<Clock> clock);

  // nullopt when a call on `key` may go through now (claiming the half-open trial when one is
  // due), else why not.
  std::optional<std::string> admit(const std::string& key) const;
  // Feed a call's outcome; true when the stored state changed. A success on a closed breaker
  // with nothing to reset writes nothing.
  bool record_success(const std::string& key) const;
  bool record_failure(const std::string& key) const;
  // The stored state (a closed breaker with version 0 when none is stored).
  BreakerState get(const std::string& key) const;

  const BreakerSettings& settings() const { return settings_; }

 private:
  template <typename Step>
  bool update(const std::string& key, Step step) const;

  std::shared_ptr<StateStore> store_;
  BreakerSettings settings_;
  std::shared_ptr<Clock> clock_;
};

// A circuit breaker as `falcon cluster list/status` and the API show it; to_json and from_json are
// defined with the fabric (fabric.cc), which fills these.
struct BreakerReport {
  std::string key;    // "<cluster>" or "<cluster>/<accelerator>"
  std::string state;  // closed | open | half_open
  int consecutive_failures = 0;
  int trips = 0;
  std::optional<std::string> opened_until;  // ISO 8601; see circuit_breaker.h
  std::string summary;                      // describe_breaker(): one line for people
};

// {"key", "state", "consecutive_failures", "trips", "opened_until" (or null), "summary"}.
void to_json(nlohmann::json& j, const BreakerReport& v);
void from_json(const nlohmann::json& j, BreakerReport& v);

// One line for people: "closed", "closed (2 failures)", "open until <time> (trip 2, 3 failures)",
// "half_open (trial until <time>)". An open breaker past its cool-down reads "open (trial due)".
std::string describe_breaker(const BreakerState& state, StoreTime now);

}  // namespace falcon
