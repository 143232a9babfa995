#include "logs/log_sources.h"

#include <algorithm>
#include <deque>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "logs/gke_entries.h"

namespace falcon::logs {
namespace {

constexpr int kPageSize = 1000;

class ForwardSource final : public LogLineSource {
 public:
  ForwardSource(const gcp::LoggingClient& client, RankQuery query)
      : query_(std::move(query)), reader_(client.list_entries(query_.request(false, kPageSize))) {}

  std::optional<std::string> next() override {
    while (std::optional<gcp::LogEntry> entry = reader_.next()) {
      if (query_.accept(*entry)) return log_line(*entry);
    }
    return std::nullopt;
  }

 private:
  RankQuery query_;
  gcp::LogEntryReader reader_;
};

// The newest `count` accepted entries, oldest first: newest-first pages of min(count, 1000)
// (the page size must stay the same across a page token) until enough were accepted.
std::vector<gcp::LogEntry> read_tail_entries(const gcp::LoggingClient& client,
                                             const RankQuery& query, int count) {
  std::vector<gcp::LogEntry> newest_first;
  if (count <= 0) return newest_first;
  gcp::LogEntryReader reader = client.list_entries(query.request(true, std::min(count, kPageSize)));
  while (static_cast<int>(newest_first.size()) < count) {
    std::optional<gcp::LogEntry> entry = reader.next();
    if (!entry) break;
    if (query.accept(*entry)) newest_first.push_back(std::move(*entry));
  }
  std::reverse(newest_first.begin(), newest_first.end());
  return newest_first;
}

class TailSource final : public LogLineSource {
 public:
  TailSource(gcp::LoggingClient client, RankQuery query, int tail_lines)
      : client_(std::move(client)), query_(std::move(query)), tail_lines_(tail_lines) {}

  std::optional<std::string> next() override {
    if (!loaded_) {
      for (const gcp::LogEntry& entry : read_tail_entries(client_, query_, tail_lines_)) {
        lines_.push_back(log_line(entry));
      }
      loaded_ = true;
    }
    if (lines_.empty()) return std::nullopt;
    std::string line = std::move(lines_.front());
    lines_.pop_front();
    return line;
  }

 private:
  gcp::LoggingClient client_;
  RankQuery query_;
  int tail_lines_;
  bool loaded_ = false;
  std::deque<std::string> lines_;
};

// What identifies an entry across polls: its timestamp and insertId (Logging's own duplicate
// rule). An entry without insertId (not written by GKE) is identified by its log and text.
using EntryKey = std::pair<std::int64_t, std::string>;

EntryKey key_of(const gcp::LogEntry& entry) {
  if (!entry.insert_id.empty()) return {entry.timestamp_nanos, entry.insert_id};
  return {entry.timestamp_nanos, entry.log_name + '\n' + entry.message};
}

// The time between reads that ProjectRateLimiters' bucket for `reads_per_minute` sustains (it
// allows a burst of a twelfth of the rate and refills at the rest), plus a millisecond of margin:
// polling at this pace never finds the limiter empty, so it never blocks where should_stop cannot
// interrupt it.
std::chrono::milliseconds quota_pace(int reads_per_minute) {
  const int rate = std::max(reads_per_minute, 1);
  const int sustained = std::max(1, rate - std::max(1, rate / 12));
  return std::chrono::milliseconds(60'000 / sustained + 1);
}

}  // namespace

std::unique_ptr<LogLineSource> make_forward_source(gcp::LoggingClient client, RankQuery query) {
  return std::make_unique<ForwardSource>(client, std::move(query));
}

std::unique_ptr<LogLineSource> make_tail_source(gcp::LoggingClient client, RankQuery query,
                                                int tail_lines) {
  return std::make_unique<TailSource>(std::move(client), std::move(query), tail_lines);
}

void follow_entries(const gcp::LoggingClient& client, const RankQuery& query,
                    std::optional<int> tail_lines, const FollowOptions& options,
                    int reads_per_minute, const Clock& clock,
                    const std::function<void(const std::string&)>& on_line) {
  using std::chrono::milliseconds;
  if (!options.should_stop) throw std::invalid_argument("follow_log needs a should_stop callback");
  const milliseconds interval =
      std::max({options.poll_interval, quota_pace(reads_per_minute), milliseconds(1)});
  constexpr milliseconds kStopCheck{200};
  const std::int64_t lookback = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::max(options.lookback, milliseconds(0)))
                                    .count();

  // Entries already handed out whose timestamp is within the lookback of the newest one: the
  // window every poll reads again.
  std::set<EntryKey> seen;
  std::int64_t newest = query.not_before_nanos();
  // After a tail: entries older than the oldest line printed are not to be printed at all.
  std::optional<EntryKey> floor;

  const auto emit = [&](const gcp::LogEntry& entry) {
    EntryKey key = key_of(entry);
    if (floor && key < *floor) return;
    const std::int64_t timestamp = key.first;
    if (!seen.insert(std::move(key)).second) return;
    newest = std::max(newest, timestamp);
    on_line(log_line(entry));
  };

  if (tail_lines) {
    // The last N lines first; with N = 0 the newest entry only marks where following starts.
    std::vector<gcp::LogEntry> tail = read_tail_entries(client, query, std::max(*tail_lines, 1));
    if (*tail_lines <= 0 && !tail.empty()) {
      floor = key_of(tail.back());
      seen.insert(*floor);
      newest = std::max(newest, tail.back().timestamp_nanos);
      tail.clear();
    }
    if (!tail.empty()) floor = key_of(tail.front());
    for (const gcp::LogEntry& entry : tail) emit(entry);
    if (options.should_stop()) return;
  }

  for (bool first = !tail_lines;; first = false) {
    const std::int64_t from =
        first ? query.not_before_nanos() : std::max(query.not_before_nanos(), newest - lookback);
    gcp::ListLogEntriesRequest request = query.request(false, kPageSize);
    request.filter = query.filter_from(from);
    gcp::LogEntryReader reader = client.list_entries(std::move(request));
    while (std::optional<gcp::LogEntry> entry = reader.next()) {
      if (query.accept(*entry)) emit(*entry);
    }
    // Forget what the next poll will not read again.
    const std::int64_t cutoff = newest - lookback;
    seen.erase(seen.begin(), seen.lower_bound(EntryKey{cutoff, std::string()}));

    if (options.should_stop()) return;
    for (milliseconds left = interval; left > milliseconds(0); left -= kStopCheck) {
      clock.sleep_for(std::min(left, kStopCheck));
      if (options.should_stop()) return;
    }
  }
}

}  // namespace falcon::logs
