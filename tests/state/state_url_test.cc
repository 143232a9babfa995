// Opening the store: URLs, redaction, the SQLite file, errors; and the old record file's parser.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "falcon/state_store.h"
#include "state/state_url.h"
#include "state/submissions_jsonl.h"
#include "support/temp_dir.h"

namespace falcon::testing {
namespace {

using state::parse_state_url;
using state::StateUrl;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(StateUrl, SqliteUrlsAndPlainPathsNameAFile) {
  EXPECT_EQ(parse_state_url("sqlite:///var/lib/falcon/falcon.db").sqlite_path,
            "/var/lib/falcon/falcon.db");
  EXPECT_EQ(parse_state_url("sqlite:state/falcon.db").sqlite_path, "state/falcon.db");
  EXPECT_EQ(parse_state_url("/tmp/x.db").sqlite_path, "/tmp/x.db");
  EXPECT_EQ(parse_state_url("x.db").sqlite_path, "x.db");
  EXPECT_EQ(parse_state_url("x.db").backend, StateUrl::Backend::kSqlite);
}

TEST(StateUrl, PostgresUrlsGoToLibpqUnchanged) {
  for (const char* url :
       {"postgresql://falcon@db:5432/falcon", "postgres://u:p@h/d?sslmode=require"}) {
    const auto parsed = parse_state_url(url);
    EXPECT_EQ(parsed.backend, StateUrl::Backend::kPostgres);
    EXPECT_EQ(parsed.postgres_uri, url);
  }
}

TEST(StateUrl, AnUnknownSchemeIsRefusedNamingTheUrlWithoutItsPassword) {
  try {
    open_state_store("mysql://admin:hunter2@db/falcon");
    FAIL() << "mysql:// was accepted";
  } catch (const StateStoreError& e) {
    EXPECT_EQ(e.operation(), "open");
    EXPECT_EQ(e.location(), "mysql://admin:***@db/falcon");
    EXPECT_THAT(e.what(), HasSubstr("mysql://admin:***@db/falcon"));
    EXPECT_THAT(e.what(), HasSubstr("unknown state store scheme 'mysql'"));
    EXPECT_THAT(e.what(), Not(HasSubstr("hunter2")));
    EXPECT_STREQ(e.type_name(), "StateStoreError");
  }
}

TEST(StateUrl, MalformedSqliteUrlsAreRefused) {
  EXPECT_THROW(parse_state_url(""), StateStoreError);
  EXPECT_THROW(parse_state_url("sqlite:"), StateStoreError);
  EXPECT_THROW(parse_state_url("sqlite://"), StateStoreError);
  try {
    parse_state_url("sqlite://host/falcon.db");
    FAIL();
  } catch (const StateStoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("three slashes"));
  }
}

TEST(StateUrl, RedactionHidesPasswordsInTheUserPartAndInParameters) {
  EXPECT_EQ(redact_state_url("postgresql://falcon:s3cret@db:5432/f"),
            "postgresql://falcon:***@db:5432/f");
  EXPECT_EQ(redact_state_url("postgresql://falcon@db/f?password=s3cret&sslmode=require"),
            "postgresql://falcon@db/f?password=***&sslmode=require");
  EXPECT_EQ(redact_state_url("postgresql://falcon@db:5432/f"), "postgresql://falcon@db:5432/f");
  EXPECT_EQ(redact_state_url("postgresql://db:5432/f"), "postgresql://db:5432/f");
  EXPECT_EQ(redact_state_url("sqlite:///a/b.db"), "sqlite:///a/b.db");
}

TEST(StateUrl, TheDefaultIsFalconDbInTheStateDirectory) {
  EXPECT_EQ(default_state_url("/var/lib/falcon"), "sqlite:///var/lib/falcon/falcon.db");
  const std::string relative = default_state_url("state");
  EXPECT_EQ(relative.rfind("sqlite:///", 0), 0u) << relative;
  EXPECT_THAT(relative, HasSubstr("/state/falcon.db"));
}

TEST(SqliteStateStore, CreatesAPrivateFileInAPrivateDirectory) {
  TempDir dir;
  const auto path = dir.path() / "new" / "nested" / "falcon.db";
  auto store = open_state_store(path.string());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(path.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(store->backend(), "sqlite");
}

TEST(SqliteStateStore, AFileThatIsNotADatabaseIsRefusedWithSqlitesMessage) {
  TempDir dir;
  const auto path = dir.write("falcon.db", std::string(8192, 'x'));
  try {
    open_state_store("sqlite://" + path.string());
    FAIL() << "a garbage file opened as a database";
  } catch (const StateStoreError& e) {
    EXPECT_EQ(e.backend(), "sqlite");
    EXPECT_EQ(e.operation(), "open");
    EXPECT_THAT(e.db_message(), HasSubstr("not a database"));
  }
}

TEST(SqliteStateStore, AnUncreatableLocationIsRefusedNamingIt) {
  TempDir dir;
  const auto blocker = dir.write("file", "x");
  try {
    open_state_store((blocker / "sub" / "falcon.db").string());
    FAIL();
  } catch (const StateStoreError& e) {
    EXPECT_EQ(e.operation(), "open");
    EXPECT_THAT(e.what(), HasSubstr(blocker.string()));
  }
}

TEST(PostgresStateStore, AServerThatIsNotThereIsReportedWithoutThePassword) {
  // Port 1 on loopback: nothing listens there, the connection is refused at once.
  const std::string url = "postgresql://falcon:hunter2@127.0.0.1:1/falcon";
  try {
    open_state_store(url);
    FAIL();
  } catch (const StateStoreError& e) {
    EXPECT_EQ(e.backend(), "postgresql");
    EXPECT_EQ(e.operation(), "open");
    EXPECT_EQ(e.location(), "postgresql://falcon:***@127.0.0.1:1/falcon");
    EXPECT_THAT(e.db_message(), HasSubstr("connect"));
    EXPECT_THAT(e.what(), Not(HasSubstr("hunter2")));
    nlohmann::json details;
    e.add_details(details);
    EXPECT_EQ(details["backend"], "postgresql");
    EXPECT_EQ(details["operation"], "open");
  }
}

// --- The old record file.

TEST(SubmissionsJsonl, TheLastRecordOfAPairWinsAndDamagedLinesAreCounted) {
  const auto parsed = state::parse_submissions_jsonl(
      "{\"cluster\":\"a\",\"workload\":\"w\",\"namespace\":\"default\","
      "\"submitted_at\":\"2026-04-13T08:00:00.000Z\",\"priority\":\"low\"}\r\n"
      "\n"
      "   \n"
      "{\"cluster\":\"a\",\"workload\":\"w\",\"namespace\":\"default\","
      "\"submitted_at\":\"2026-04-13T09:00:00.000Z\",\"priority\":\"high\"}\n"
      "{\"cluster\":\"a\",\"workload\":\"w2\",\"namespace\":\"default\","
      "\"submitted_at\":\"not a time\"}\n"
      "{\"cluster\":\"\",\"workload\":\"w3\",\"namespace\":\"default\","
      "\"submitted_at\":\"2026-04-13T09:00:00.000Z\"}\n"
      "[1,2]\n"
      "{\"cluster\":\"b\",\"workload\":\"w\",\"namespace\":\"default\",\"submitted_at\":\"2026-04-"
      "13T1");
  ASSERT_EQ(parsed.rows.size(), 1u);
  EXPECT_EQ(parsed.rows[0].priority, "high");
  EXPECT_EQ(parsed.rows[0].handle.submitted_at, "2026-04-13T09:00:00.000Z");
  EXPECT_EQ(parsed.superseded, 1);
  EXPECT_EQ(parsed.skipped_lines, 4);
}

}  // namespace
}  // namespace falcon::testing
