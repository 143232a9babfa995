// End to end: the `falcon` binary in client mode (--server URL) against `falcon serve` and the
// local fleet, command by command next to the same command in local mode: the same output (text
// and --json) and the same exit codes; a wrong token is the server's 401; a stopped server is a
// clear error naming the URL (exit 7), at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/local_fleet.h"
#include "support/run_falcon.h"
#include "support/serve_process.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// What differs between two runs of the same command: times, selection ids, and the name of the
// workload each mode submitted.
std::string normalize(std::string text) {
  text = std::regex_replace(
      text, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d))"), "<time>");
  text = std::regex_replace(text, std::regex(R"(selection \d+)"), "selection <id>");
  text = std::regex_replace(text, std::regex(R"("selection_id": \d+)"), "\"selection_id\": <id>");
  text = std::regex_replace(text, std::regex(R"((local|serve)-run)"), "<run>");
  return text;
}

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += a + " ";
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    out.push_back(text.substr(start, nl - start));
  }
  return out;
}

class CliClientTest : public ::testing::Test {
 protected:
  // The database local mode uses too (<state_dir>/falcon.db): the server and the CLI share one
  // history, as a team does, so both modes know both submissions and the same breakers.
  std::string state_url() const { return "sqlite://" + fleet_.state_dir() + "/falcon.db"; }

  CommandResult local(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"--config", fleet_.repos_path()};
    all.insert(all.end(), args.begin(), args.end());
    return testing::run_falcon(all);
  }
  // Client mode; --config names no file, so nothing can have been done locally.
  CommandResult remote(const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> all = {"--server", url_, "--config", "/nonexistent/repos.yaml"};
    all.insert(all.end(), args.begin(), args.end());
    return testing::run_falcon(all, env);
  }
  // Runs `local_args` locally and `remote_args` through the server: both exit `code`, with the
  // same stdout (and stderr when asked) once normalized. Returns (local, remote).
  std::pair<CommandResult, CommandResult> same(const std::vector<std::string>& local_args,
                                               const std::vector<std::string>& remote_args,
                                               int code, bool compare_stderr = false) {
    const CommandResult l = local(local_args);
    const CommandResult r = remote(remote_args);
    EXPECT_EQ(l.exit_code, code) << joined(local_args) << "\n" << l.stderr_text;
    EXPECT_EQ(r.exit_code, code) << joined(remote_args) << "\n" << r.stderr_text;
    EXPECT_EQ(normalize(r.stdout_text), normalize(l.stdout_text)) << joined(remote_args);
    if (compare_stderr) {
      EXPECT_EQ(normalize(r.stderr_text), normalize(l.stderr_text)) << joined(remote_args);
    }
    return {l, r};
  }
  std::pair<CommandResult, CommandResult> same(const std::vector<std::string>& args, int code,
                                               bool compare_stderr = false) {
    return same(args, args, code, compare_stderr);
  }
  static std::vector<std::string> submit(const std::string& name) {
    return {"job", "submit",  "--accelerator", "tpu-v4-64", "--cluster", "tpu-b",   "--name",
            name,  "--image", "gcr.io/f/b:1",  "--",        "python3",   "train.py"};
  }

  testing::LocalFleet fleet_;
  testing::TempDir dir_;
  std::string url_;
};

TEST_F(CliClientTest, EveryCommandHasTheOutputAndExitCodeOfLocalMode) {
  testing::ServeProcess serve(fleet_.repos_path(), state_url());
  url_ = serve.url();
  serve.wait_ready();

  // Clusters. The server is ready once its health loop probed every cluster: tpu-down's failed
  // probe is its breaker's first failure, which both modes show from the shared store.
  same({"cluster", "list"}, 0);
  same({"--json", "cluster", "list"}, 0);
  same({"cluster", "status", "tpu-a"}, 0);
  same({"--json", "cluster", "status", "tpu-a"}, 0);
  same({"cluster", "status", "nope"}, 3, true);
  same({"--json", "cluster", "status", "nope"}, 3, true);
  // Unreachable: exit 7. The local status counts a second failure on the cluster's breaker; the
  // server answers from its cached probe and shows the breaker from the shared store.
  same({"cluster", "status", "tpu-down"}, 7);

  // Selection. Through a server `cluster select` takes the brief answer (each candidate's probe
  // state, age and source, the reason and the record line); --explain the whole decision, as
  // local mode prints it. The server first: it answers from its cache; the local selection
  // probes, and tpu-down's third failed probe opens its breaker in the shared store (later
  // selections skip it, in both modes).
  const std::vector<std::string> select = {"cluster", "select", "--accelerator", "tpu-v4-64"};
  {
    const CommandResult r = remote(select);
    const CommandResult l = local(select);
    ASSERT_EQ(l.exit_code, 0) << l.stderr_text;
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_THAT(r.stdout_text,
                ::testing::MatchesRegex("CANDIDATE +STATE +PROBE_AGE +SOURCE\n(.|\n)*"));
    EXPECT_THAT(r.stdout_text,
                ::testing::ContainsRegex("tpu-down +unreachable +[0-9.]+m?s +cache"));
    // The same reason and record line as the local decision's.
    const auto local_lines = lines_of(normalize(l.stdout_text));
    ASSERT_GE(local_lines.size(), 2u) << l.stdout_text;
    const std::string reason = local_lines[local_lines.size() - 2];
    EXPECT_THAT(normalize(r.stdout_text), HasSubstr("\n" + reason + "\n"));
    EXPECT_THAT(normalize(r.stdout_text), ::testing::EndsWith(local_lines.back() + "\n"));
  }
  const CommandResult cached = remote(select);
  ASSERT_EQ(cached.exit_code, 0) << cached.stderr_text;
  for (const std::string cluster : {"tpu-a", "tpu-b"}) {
    EXPECT_THAT(cached.stdout_text, ::testing::ContainsRegex(cluster + " +ok +[0-9.]+m?s +cache"))
        << cached.stdout_text;
  }
  {
    const CommandResult brief =
        remote({"--json", "cluster", "select", "--accelerator", "tpu-v4-64"});
    ASSERT_EQ(brief.exit_code, 0) << brief.stderr_text;
    const json bj = json::parse(brief.stdout_text);
    for (const char* key : {"selected_cluster", "selection_id", "reason", "probe_age_ms",
                            "probed_now", "unreachable", "same_as", "explain"}) {
      EXPECT_TRUE(bj.contains(key)) << key << " " << brief.stdout_text;
    }
    EXPECT_FALSE(bj.contains("scores"));
  }
  {
    const CommandResult r =
        remote({"--json", "cluster", "select", "--accelerator", "tpu-v4-64", "--explain"});
    const CommandResult l = local({"--json", "cluster", "select", "--accelerator", "tpu-v4-64"});
    ASSERT_EQ(l.exit_code, 0);
    ASSERT_EQ(r.exit_code, 0);
    json rj = json::parse(r.stdout_text);
    json lj = json::parse(l.stdout_text);
    EXPECT_EQ(rj["candidate_probes"].size(), 2u);  // tpu-down skipped unprobed
    rj.erase("candidate_probes");
    // The explanations agree on every verdict; their signals come from different probes (the
    // server's cache, this process's own), so they are compared apart.
    ASSERT_EQ(rj["scores"].size(), 3u);
    ASSERT_EQ(lj["scores"].size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      for (const char* key : {"cluster", "eligible", "rank", "verdict", "priority"}) {
        EXPECT_EQ(rj["scores"][i][key], lj["scores"][i][key]) << i << " " << key;
      }
    }
    rj.erase("scores");
    lj.erase("scores");
    EXPECT_EQ(normalize(rj.dump(2)), normalize(lj.dump(2)));
    EXPECT_EQ(rj["policy"], "priority");

    // --explain shows the server's explanation; a recorded decision replays from the server.
    const CommandResult ex =
        remote({"cluster", "select", "--accelerator", "tpu-v4-64", "--explain"});
    ASSERT_EQ(ex.exit_code, 0) << ex.stderr_text;
    EXPECT_THAT(ex.stdout_text, HasSubstr("policy priority: lowest slot priority wins"));
    EXPECT_THAT(ex.stdout_text, ::testing::ContainsRegex("CLUSTER +RANK +SIGNAL"));
    EXPECT_THAT(ex.stdout_text, HasSubstr("CANDIDATE  PROBE_AGE"));
    const std::string id = std::to_string(json::parse(r.stdout_text)["selection_id"].get<int>());
    const CommandResult replay =
        remote({"--json", "cluster", "select", "--replay-selection", id, "--policy", "least-wait"});
    ASSERT_EQ(replay.exit_code, 0) << replay.stderr_text;
    const json rp = json::parse(replay.stdout_text);
    EXPECT_EQ(rp["recorded"]["selection_id"].get<int>(), std::stoi(id));
    EXPECT_EQ(rp["recorded"]["selected_cluster"], rj["selected_cluster"]);
    EXPECT_EQ(rp["replayed"]["policy"], "least-wait");
    const CommandResult missing =
        remote({"cluster", "select", "--replay-selection", "999999", "--policy", "score"});
    EXPECT_EQ(missing.exit_code, 3) << missing.stderr_text;
    EXPECT_THAT(missing.stderr_text, HasSubstr("no selection 999999"));
  }
  same({"cluster", "select", "--accelerator", "tpu-v9-1"}, 4, true);
  same({"--json", "cluster", "select", "--accelerator", "tpu-v9-1"}, 4, true);

  // Workloads: each mode submits its own, to the same fleet.
  same(submit("local-run"), submit("serve-run"), 0, true);
  same(submit("local-run"), submit("serve-run"), 5, true);  // it exists: xpk refuses
  fleet_.advance(std::chrono::seconds(10));
  same({"job", "status", "--cluster", "tpu-b", "local-run"},
       {"job", "status", "--cluster", "tpu-b", "serve-run"}, 0);
  same({"--json", "job", "status", "--cluster", "tpu-b", "local-run"},
       {"--json", "job", "status", "--cluster", "tpu-b", "serve-run"}, 0);
  same({"job", "status", "--cluster", "tpu-b", "gone"}, 3, true);
  same({"job", "list", "--cluster", "tpu-b"}, 0);
  same({"--json", "job", "list", "--cluster", "tpu-b", "--state", "running"}, 0);
  same({"job", "list", "--cluster", "tpu-b", "--state", "bogus"}, 2, true);
  same({"job", "list", "--cluster", "tpu-down"}, 5, true);  // xpk cannot reach it

  // Logs of one workload, read both ways.
  same({"job", "logs", "--cluster", "tpu-b", "serve-run", "--tail", "3"}, 0);
  same({"--json", "job", "logs", "--cluster", "tpu-b", "serve-run", "--rank", "1"}, 0);
  same({"job", "logs", "--cluster", "tpu-b", "serve-run", "--grep", "textPayload:\"step=1\""}, 0);
  same({"job", "logs", "--cluster", "nope", "serve-run"}, 3, true);

  // Export: the server runs it; the client waits for its result.
  same({"job", "export-logs", "--cluster", "tpu-b", "serve-run", "--dest", "gs://falcon-logs/c/"},
       0);
  same({"--json", "job", "export-logs", "--cluster", "tpu-b", "serve-run", "--dest",
        "gs://falcon-logs/c0", "--ranks", "0"},
       0);
  same({"job", "export-logs", "--cluster", "tpu-b", "serve-run", "--dest", "s3://x"}, 2, true);

  same({"job", "cancel", "--cluster", "tpu-b", "local-run"},
       {"job", "cancel", "--cluster", "tpu-b", "serve-run"}, 0);
  same({"--json", "job", "cancel", "--cluster", "tpu-b", "gone"}, 3, true);

  // What has no API route says so.
  const CommandResult warm = remote({"cluster", "warm-up"});
  EXPECT_EQ(warm.exit_code, 2);
  EXPECT_THAT(warm.stderr_text, HasSubstr("cluster warm-up does not run through a falcon server"));
  const CommandResult doctor = remote({"doctor"});
  EXPECT_EQ(doctor.exit_code, 2);
  EXPECT_THAT(doctor.stderr_text, HasSubstr("/readyz"));

  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.log();
}

TEST_F(CliClientTest, AFollowStreamsUntilTheWorkloadFinishes) {
  testing::ServeProcess serve(fleet_.repos_path(), state_url());
  url_ = serve.url();
  ASSERT_EQ(remote(submit("serve-run")).exit_code, 0);
  fleet_.advance(std::chrono::seconds(10));
  std::atomic<bool> done{false};
  CommandResult followed;
  std::thread follower([&] {
    followed = remote({"job", "logs", "--cluster", "tpu-b", "serve-run", "--follow"});
    done = true;
  });
  // The run lasts 100 simulated seconds; move time on until the follow ends.
  for (int i = 0; i < 600 && !done; ++i) {
    fleet_.advance(std::chrono::seconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  follower.join();
  EXPECT_EQ(followed.exit_code, 0) << followed.stderr_text;
  const CommandResult all = remote({"job", "logs", "--cluster", "tpu-b", "serve-run"});
  ASSERT_EQ(all.exit_code, 0);
  const auto all_lines = lines_of(all.stdout_text);
  const auto followed_lines = lines_of(followed.stdout_text);
  ASSERT_FALSE(all_lines.empty());
  ASSERT_FALSE(followed_lines.empty());
  EXPECT_EQ(followed_lines.back(), all_lines.back());
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait_exit(), 0) << serve.log();
}

TEST_F(CliClientTest, AWrongTokenIsThe401AndAStoppedServerAClearError) {
  const auto tokens = dir_.write("tokens", "operator-token-0123456789 operate\n");
  std::filesystem::permissions(
      tokens, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  testing::ServeProcess serve(fleet_.repos_path(), state_url(), {"--tokens-file", tokens.string()});
  url_ = serve.url();

  const CommandResult wrong =
      remote({"cluster", "list"}, {{"FALCON_TOKEN", "not-the-token-0123456789"}});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_THAT(wrong.stderr_text, HasSubstr("falcon: unknown bearer token"));
  EXPECT_THAT(wrong.stderr_text, HasSubstr("answered 401"));
  EXPECT_TRUE(wrong.stdout_text.empty());
  const CommandResult none = remote({"--json", "cluster", "list"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(json::parse(none.stdout_text)["error"]["type"], "Unauthorized");

  // The same clusters through the server as locally. Compared without the breakers: the
  // server's health loop feeds them as it probes (the unreachable cluster's failures grow while
  // the test runs), so a live count may differ between two reads.
  const auto without_breakers = [](const CommandResult& r) {
    json clusters = json::parse(r.stdout_text, nullptr, false);
    EXPECT_TRUE(clusters.is_array()) << r.stdout_text << r.stderr_text;
    if (!clusters.is_array()) return json();
    for (json& c : clusters) c.erase("breakers");
    return clusters;
  };
  const json l = without_breakers(local({"--json", "cluster", "list"}));
  ASSERT_EQ(l.size(), 4u);
  const CommandResult by_env =
      remote({"--json", "cluster", "list"}, {{"FALCON_TOKEN", "operator-token-0123456789"}});
  EXPECT_EQ(by_env.exit_code, 0) << by_env.stderr_text;
  EXPECT_EQ(without_breakers(by_env), l);
  const auto token_file = dir_.write("my-token", "operator-token-0123456789\n");
  const CommandResult by_file =
      remote({"--token-file", token_file.string(), "--json", "cluster", "list"});
  EXPECT_EQ(by_file.exit_code, 0) << by_file.stderr_text;
  EXPECT_EQ(without_breakers(by_file), l);
  // FALCON_SERVER instead of --server; the table as well as the JSON.
  const CommandResult by_server_env =
      testing::run_falcon({"--config", "/nonexistent/repos.yaml", "cluster", "list"},
                          {{"FALCON_SERVER", url_}, {"FALCON_TOKEN", "operator-token-0123456789"}});
  EXPECT_EQ(by_server_env.exit_code, 0) << by_server_env.stderr_text;
  for (const json& c : l) {
    EXPECT_THAT(by_server_env.stdout_text, HasSubstr(c["name"].get<std::string>()));
  }

  serve.signal(SIGTERM);
  ASSERT_EQ(serve.wait_exit(), 0) << serve.log();

  const auto start = std::chrono::steady_clock::now();
  const CommandResult down = remote({"cluster", "list"});
  EXPECT_EQ(down.exit_code, 7);
  EXPECT_THAT(down.stderr_text, HasSubstr("falcon: cannot reach the falcon server at " + url_));
  EXPECT_THAT(down.stderr_text, HasSubstr("could not connect (refused, or no route to it)"));
  const CommandResult down_json = testing::run_falcon(
      {"--json", "job", "status", "--cluster", "tpu-b", "run"}, {{"FALCON_SERVER", url_}});
  EXPECT_EQ(down_json.exit_code, 7);
  const json error = json::parse(down_json.stdout_text)["error"];
  EXPECT_EQ(error["type"], "ServerUnreachableError");
  EXPECT_EQ(error["url"], url_);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  const CommandResult bad_url =
      testing::run_falcon({"--server", "localhost:8787", "cluster", "list"});
  EXPECT_EQ(bad_url.exit_code, 2);
  EXPECT_THAT(bad_url.stderr_text,
              HasSubstr("--server: 'localhost:8787' is not a falcon server URL"));
}

}  // namespace
}  // namespace falcon
