// The fixture of the store's contract: every test runs once on SQLite and once on PostgreSQL
// (a throwaway server, one per test binary, a fresh database per test).
//
// The PostgreSQL half never skips on its own: when the server cannot start, its tests fail
// with the reason. FALCON_SKIP_POSTGRES_TESTS=1 opts out explicitly (for a developer machine
// without postgresql-15; CI and `make test` install it through scripts/setup.sh).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "falcon/state_store.h"
#include "support/fake_clock.h"
#include "support/postgres_server.h"
#include "support/temp_dir.h"

namespace falcon::testing {

inline std::string backend_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      if (postgres_tests_opted_out()) {
        GTEST_SKIP() << "PostgreSQL half skipped: FALCON_SKIP_POSTGRES_TESTS=1";
      }
      url_ = shared_postgres_server().fresh_database();
    } else {
      url_ = "sqlite://" + (dir_.path() / "state" / "falcon.db").string();
    }
    store_ = open();
  }

  std::unique_ptr<StateStore> open() const {
    StateStoreOptions options;
    options.clock = clock_;
    return open_state_store(url_, options);
  }

  bool is_postgres() const { return GetParam() == "postgresql"; }

  TempDir dir_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::string url_;
  std::unique_ptr<StateStore> store_;
};

// 2026-04-13T08:00:00Z plus `ms` milliseconds.
inline StoreTime at_ms(std::int64_t ms) {
  return StoreTime(std::chrono::seconds(1776067200)) + std::chrono::milliseconds(ms);
}

#define FALCON_BOTH_BACKENDS(suite)                                                    \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::Values("sqlite", "postgresql"), \
                           ::falcon::testing::backend_name)

}  // namespace falcon::testing
