// The one table from error type to exit code and HTTP status (exit_codes.h): every error the
// layer throws has a row, and the rows agree with what the CLI and the API document.
#include "falcon/exit_codes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "falcon/errors.h"
#include "falcon/values.h"
#include "falcon/workload_manager.h"

namespace falcon {
namespace {

// One of each FalconError the layer defines. A new subclass goes here, and the test then fails
// until the table has its row.
std::vector<std::unique_ptr<FalconError>> one_of_each() {
  std::vector<std::unique_ptr<FalconError>> all;
  all.push_back(std::make_unique<FalconError>("m"));
  all.push_back(std::make_unique<ClusterConfigError>(std::vector<std::string>{"f:1:1: x: y"}));
  all.push_back(std::make_unique<InvalidValueError>("--rank", "'-1' is not a whole number"));
  all.push_back(std::make_unique<UnknownClusterError>("c", std::vector<std::string>{"a"}));
  all.push_back(
      std::make_unique<NoAvailableClusterError>("m", "v4-64", std::vector<ClusterProbeResult>{}));
  all.push_back(std::make_unique<ClusterUnreachableError>("c", "timed out"));
  all.push_back(std::make_unique<FencedError>("gs://b/f/w/epoch", 1, 2));
  all.push_back(std::make_unique<XpkCommandError>("m", "c", 1, ""));
  all.push_back(std::make_unique<WorkloadSubmitError>("m", "c", "w", 1, ""));
  all.push_back(std::make_unique<InvalidWorkloadSpecError>("m", "c", "w"));
  all.push_back(std::make_unique<WorkloadNotCreatedError>("m", "c", "w", 1, ""));
  all.push_back(std::make_unique<WorkloadExistsError>("m", "c", "w", 1, ""));
  all.push_back(std::make_unique<WorkloadNotFoundError>("c", "w"));
  all.push_back(std::make_unique<LogRetrievalError>("m", 429, "RESOURCE_EXHAUSTED"));
  all.push_back(std::make_unique<CommandStartError>("xpk", "not found"));
  all.push_back(std::make_unique<StateStoreError>("sqlite", "sqlite:///f.db", "open", "full"));
  return all;
}

TEST(ErrorAnswers, EveryErrorTheLayerThrowsHasARow) {
  std::set<std::string> thrown;
  for (const auto& e : one_of_each()) {
    const ErrorAnswer* a = find_error_answer(e->type_name());
    ASSERT_NE(a, nullptr) << e->type_name() << " has no row in error_answers()";
    EXPECT_TRUE(a->falcon_error) << e->type_name();
    thrown.insert(e->type_name());
  }
  // ... and every row marked as a FalconError is one of them: no row for a type that is gone.
  for (const ErrorAnswer& a : error_answers()) {
    if (a.falcon_error) {
      EXPECT_TRUE(thrown.contains(std::string(a.type))) << a.type;
    }
  }
}

TEST(ErrorAnswers, TypesAreUniqueAndTheCliAndApiOnesAreThere) {
  std::set<std::string_view> seen;
  for (const ErrorAnswer& a : error_answers()) EXPECT_TRUE(seen.insert(a.type).second) << a.type;
  EXPECT_EQ(find_error_answer("UsageError")->exit_code, kExitUsage);
  EXPECT_EQ(find_error_answer("InternalError")->http_status, 500);
  EXPECT_EQ(find_error_answer("NoSuchError"), nullptr);
}

// The pairs README's exit codes and docs/serve.md's status table state.
TEST(ErrorAnswers, ExitCodesAndStatusesAreTheDocumentedOnes) {
  const auto pair = [](const char* type) {
    const ErrorAnswer* a = find_error_answer(type);
    return a ? std::pair<int, int>(a->exit_code, a->http_status) : std::pair<int, int>(-1, -1);
  };
  EXPECT_EQ(pair("ClusterConfigError"), std::pair(2, 400));
  EXPECT_EQ(pair("InvalidWorkloadSpecError"), std::pair(2, 400));
  EXPECT_EQ(pair("InvalidValueError"), std::pair(2, 400));
  EXPECT_EQ(pair("UnknownClusterError"), std::pair(3, 404));
  EXPECT_EQ(pair("WorkloadNotFoundError"), std::pair(3, 404));
  EXPECT_EQ(pair("NoAvailableClusterError"), std::pair(4, 503));
  EXPECT_EQ(pair("WorkloadExistsError"), std::pair(5, 409));
  EXPECT_EQ(pair("WorkloadSubmitError"), std::pair(5, 502));
  EXPECT_EQ(pair("LogRetrievalError"), std::pair(6, 502));
  EXPECT_EQ(pair("ClusterUnreachableError"), std::pair(7, 503));
  EXPECT_EQ(pair("StateStoreError"), std::pair(1, 503));
  // A copy superseded by a newer one (falcon fence check; no route raises it).
  EXPECT_EQ(pair("FencedError"), std::pair(8, 409));
  int conflicts = 0;
  for (const ErrorAnswer& a : error_answers()) conflicts += a.http_status == 409;
  EXPECT_EQ(conflicts, 2);
}

}  // namespace
}  // namespace falcon
