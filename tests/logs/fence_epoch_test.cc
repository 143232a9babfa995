// CloudLogRetriever's storage fence against the local Cloud Storage server: the epoch written
// and read, and a Cloud Storage that fails every request ends a fence call within its 20 s
// bound (three attempts), not an export's 15 minutes (issue 27: a managed submit must not hang).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "falcon/errors.h"
#include "falcon/log_retriever.h"
#include "logs/gke_log_env.h"

namespace falcon {
namespace {

using falcon::testing::LogServerEnv;

TEST(FenceEpoch, IsWrittenOneUpAndReadBack) {
  LogServerEnv env;
  env.server().ensure_bucket("fence-bkt", "proj");
  const CloudLogRetriever retriever = env.retriever();
  const std::string uri = "gs://fence-bkt/falcon/train/epoch";
  EXPECT_EQ(retriever.read_fence_epoch(uri), 0);
  EXPECT_EQ(retriever.advance_fence_epoch(uri), 1);
  EXPECT_EQ(retriever.advance_fence_epoch(uri), 2);
  EXPECT_EQ(retriever.read_fence_epoch(uri), 2);
}

TEST(FenceEpoch, AStorageOutageFailsTheCallWithinItsBound) {
  LogServerEnv env;
  env.server().ensure_bucket("fence-bkt", "proj");
  const CloudLogRetriever retriever = env.retriever();
  const std::string uri = "gs://fence-bkt/falcon/train/epoch";
  env.server().faults().fail_next("*", 503, -1);
  const auto before_requests = env.http().exchanges().size();
  const auto before = env.clock().now();
  EXPECT_THROW(retriever.advance_fence_epoch(uri), LogRetrievalError);
  EXPECT_THROW(retriever.read_fence_epoch(uri), LogRetrievalError);
  // Both calls' waits (on the fake clock) and attempts: each at most 3 within 20 s.
  EXPECT_LE(env.clock().now() - before, std::chrono::seconds(40));
  EXPECT_LE(env.http().exchanges().size() - before_requests, 6u);
  env.server().faults().clear();
  EXPECT_EQ(retriever.advance_fence_epoch(uri), 1);  // nothing was written meanwhile
}

}  // namespace
}  // namespace falcon
