// RankSplitter: staged NDJSON objects (unordered, repeating entries, other workloads' logs) into
// per-rank lines in entries:list's order, whatever the memory budget and the way the bytes
// arrive.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "falcon/errors.h"
#include "logs/gke_log_env.h"
#include "logs/rank_query.h"
#include "logs/rank_splitter.h"
#include "logs/staged_entry.h"

namespace falcon::logs {
namespace {

using falcon::testing::gke_entry;
using falcon::testing::GkePlace;
using falcon::testing::kLogStartNanos;
using falcon::testing::LogServerEnv;
using falcon::testing::PodLabels;
using nlohmann::json;
using ::testing::HasSubstr;

class Collect final : public RankLineWriter {
 public:
  explicit Collect(std::string& out) : out_(out) {}
  void write(std::string_view line) override { out_ += line; }
  void finish() override { finished_ = true; }
  bool finished_ = false;

 private:
  std::string& out_;
};

struct Split : ::testing::Test {
  GkePlace place;
  ClusterConfig cluster = LogServerEnv::cluster(place);

  RankQuery query(std::optional<std::set<int>> ranks = std::nullopt, int slice = 0) {
    return RankQuery(cluster, place.workload, place.namespace_, slice, std::move(ranks),
                     kLogStartNanos, std::nullopt);
  }

  // Splits `objects` (each one NDJSON text) and returns each rank's bytes.
  std::map<int, std::string> split(const RankQuery& q, const std::vector<std::string>& objects,
                                   SplitterOptions options, std::size_t piece = 1 << 20,
                                   RankSplitter* keep = nullptr) {
    RankSplitter local(q, options);
    RankSplitter& s = keep ? *keep : local;
    s.add_objects(
        objects.size(),
        [&](std::size_t i, const RankSplitter::ChunkSink& sink) {
          std::string_view rest = objects[i];
          while (!rest.empty()) {
            sink(rest.substr(0, piece));
            rest.remove_prefix(std::min(piece, rest.size()));
          }
        },
        [](std::size_t i) { return fmt::format("gs://stage/o{}", i); });
    std::map<int, std::string> out;
    std::set<int> ranks = q.ranks() ? *q.ranks() : s.ranks();
    for (int rank : ranks) out[rank];  // open() runs on several threads: no insertion there
    s.write_ranks(ranks, [&](int rank) { return std::make_unique<Collect>(out.at(rank)); });
    return out;
  }
};

TEST_F(Split, OrdersByTimestampThenInsertIdAndDropsRepeats) {
  std::vector<json> entries;
  std::map<int, std::vector<std::pair<std::pair<std::int64_t, std::string>, std::string>>> want;
  for (int i = 0; i < 3000; ++i) {
    const int worker = i % 3;
    const std::int64_t ts = kLogStartNanos + (i / 9) * 1000;  // ties on timestamp
    const std::string text = fmt::format("line {} \"x\"\\ é", i);
    json e = gke_entry(place, {.worker = worker,
                               .timestamp_nanos = ts,
                               .text = i % 4 == 0 ? text + "\n" : text,
                               .labels = i % 10 == 3 ? PodLabels::kNone : PodLabels::kGke,
                               .json_payload = i % 7 == 2});
    want[worker].push_back({{ts, e["insertId"].get<std::string>()}, text + "\n"});
    entries.push_back(std::move(e));
  }
  // Another workload, another namespace, another slice, too early: none of them are ours.
  GkePlace other = place;
  other.workload = "other";
  entries.push_back(
      gke_entry(other, {.worker = 0, .timestamp_nanos = kLogStartNanos, .text = "o"}));
  other = place;
  other.namespace_ = "ns2";
  entries.push_back(
      gke_entry(other, {.worker = 0, .timestamp_nanos = kLogStartNanos, .text = "n"}));
  entries.push_back(
      gke_entry(place, {.slice = 1, .worker = 0, .timestamp_nanos = kLogStartNanos, .text = "s"}));
  entries.push_back(
      gke_entry(place, {.worker = 0, .timestamp_nanos = kLogStartNanos - 1, .text = "early"}));
  // Shuffled into 7 objects, every 5th entry twice (in another object).
  std::mt19937 rng(42);
  std::shuffle(entries.begin(), entries.end(), rng);
  std::vector<std::string> objects(7);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    objects[i % 7] += entries[i].dump() + "\n";
    if (i % 5 == 0) objects[(i + 3) % 7] += entries[i].dump() + "\r\n";
  }
  for (auto& [worker, lines] : want) std::sort(lines.begin(), lines.end());

  const RankQuery q = query();
  for (const std::size_t memory : {std::size_t{64} << 10, std::size_t{64} << 20}) {
    for (const std::size_t threads : {std::size_t{1}, std::size_t{3}}) {
      RankSplitter s(q, {.threads = threads, .memory_bytes = memory});
      const auto out = split(q, objects, {}, 977, &s);
      ASSERT_EQ(out.size(), 3u);
      for (const auto& [worker, lines] : want) {
        std::string expected;
        for (const auto& l : lines) expected += l.second;
        EXPECT_EQ(out.at(worker), expected) << "worker " << worker << " memory " << memory;
      }
      EXPECT_GT(s.duplicates(), 0);
      EXPECT_EQ(s.entries_decoded() - s.duplicates(), 3000);
    }
  }
}

TEST_F(Split, TheDecoderAgreesWithTheLoggingClientOnEveryKindOfEntry) {
  const RankQuery q = query();
  StagedEntryDecoder decoder(q);
  for (const bool json_payload : {false, true}) {
    for (const PodLabels labels :
         {PodLabels::kGke, PodLabels::kNone, PodLabels::kDotted, PodLabels::kNoJobset}) {
      const json e = gke_entry(place, {.worker = 2,
                                       .timestamp_nanos = kLogStartNanos + 5,
                                       .text = "hello\r\n",
                                       .labels = labels,
                                       .json_payload = json_payload});
      const auto got = decoder.decode(e.dump());
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(got->rank, 2);
      EXPECT_EQ(got->line, "hello");
      EXPECT_EQ(got->insert_id, e["insertId"].get<std::string>());
      EXPECT_EQ(got->timestamp_nanos, kLogStartNanos + 5);
    }
  }
  json no_message = gke_entry(place, {.worker = 1, .timestamp_nanos = kLogStartNanos});
  no_message.erase("textPayload");
  no_message["jsonPayload"] = {{"b", 1}, {"a", "x"}};
  EXPECT_EQ(decoder.decode(no_message.dump())->line, R"({"a":"x","b":1})");
  EXPECT_FALSE(decoder.decode("   ").has_value());
}

TEST_F(Split, WantedRanksOnlyAndEmptyRanksStillGetAnObject) {
  std::string object;
  for (int w = 0; w < 4; ++w) {
    object +=
        gke_entry(place, {.worker = w, .timestamp_nanos = kLogStartNanos + w, .text = "t"}).dump() +
        "\n";
  }
  const RankQuery q = query(std::set<int>{1, 3, 9});
  const auto out = split(q, {object}, {});
  EXPECT_EQ(out.size(), 3u);
  EXPECT_EQ(out.at(1), "t\n");
  EXPECT_EQ(out.at(3), "t\n");
  EXPECT_EQ(out.at(9), "");
}

TEST_F(Split, ALineThatIsNotJsonNamesTheObjectAndLine) {
  const std::string good =
      gke_entry(place, {.worker = 0, .timestamp_nanos = kLogStartNanos, .text = "t"}).dump();
  const RankQuery q = query();
  try {
    split(q, {good + "\n" + good + "\n{not json\n"}, {});
    FAIL();
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("gs://stage/o0 line 3 is not a LogEntry"));
  }
}

TEST_F(Split, AReaderFailureStopsTheSplitAndIsRethrown) {
  const RankQuery q = query();
  RankSplitter s(q, {.threads = 2});
  EXPECT_THROW(s.add_objects(
                   10,
                   [](std::size_t i, const RankSplitter::ChunkSink&) {
                     if (i == 3) throw LogRetrievalError("download failed", 503);
                   },
                   [](std::size_t) { return std::string(); }),
               LogRetrievalError);
}

}  // namespace
}  // namespace falcon::logs
