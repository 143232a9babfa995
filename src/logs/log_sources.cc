#include "logs/log_sources.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "logs/gke_entries.h"
#include "logs/line_spool.h"

namespace falcon::logs {
namespace {

using std::chrono::milliseconds;

constexpr int kPageSize = 1000;
// Lines of a tail held in memory before the rest go to a temporary file: a fraction of what a
// page of 1000 entries takes while it is decoded, so a tail of 10^6 lines needs little more
// memory than one of 10^3 (bench T1M).
constexpr std::size_t kTailMemoryBytes = 256 << 10;

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

// What identifies an entry across polls: its timestamp and insertId (Logging's own duplicate
// rule). An entry without insertId (not written by GKE) is identified by its log and text.
using EntryKey = std::pair<std::int64_t, std::string>;

EntryKey key_of(const gcp::LogEntry& entry) {
  if (!entry.insert_id.empty()) return {entry.timestamp_nanos, entry.insert_id};
  return {entry.timestamp_nanos, entry.log_name + '\n' + entry.message};
}

// What reading a tail saw, for follow to go on from.
struct TailScan {
  std::optional<EntryKey> newest;  // the newest accepted entry
  std::optional<EntryKey> oldest;  // the oldest accepted entry (the first line of the tail)
  std::vector<EntryKey> recent;    // accepted entries within the window of the newest
  std::int64_t newest_received = 0;
  std::optional<std::int64_t> server_time;  // of the first page
};

// The newest `count` accepted entries as lines into `spool` (newest first: pop() gives them
// oldest first): newest-first pages of min(count, 1000) (the page size must stay the same across
// a page token) until enough were accepted. One page of entries in memory at a time.
TailScan read_tail(const gcp::LoggingClient& client, const RankQuery& query, int count,
                   LineSpool& spool, std::int64_t recent_window_nanos = 0) {
  TailScan scan;
  if (count <= 0) return scan;
  gcp::LogEntryReader reader = client.list_entries(query.request(true, std::min(count, kPageSize)));
  int accepted = 0;
  while (accepted < count) {
    std::optional<gcp::LogEntry> entry = reader.next();
    if (!entry) break;
    if (!query.accept(*entry)) continue;
    ++accepted;
    EntryKey key = key_of(*entry);
    if (!scan.newest) scan.newest = key;
    if (key.first >= scan.newest->first - recent_window_nanos) scan.recent.push_back(key);
    scan.newest_received = std::max(scan.newest_received, entry->receive_timestamp_nanos);
    scan.oldest = std::move(key);
    spool.push(log_line(*entry));
  }
  scan.server_time = reader.first_server_time_nanos();
  return scan;
}

class TailSource final : public LogLineSource {
 public:
  TailSource(gcp::LoggingClient client, RankQuery query, int tail_lines)
      : client_(std::move(client)),
        query_(std::move(query)),
        tail_lines_(tail_lines),
        spool_(kTailMemoryBytes) {}

  std::optional<std::string> next() override {
    if (!loaded_) {
      read_tail(client_, query_, tail_lines_, spool_);
      loaded_ = true;
    }
    return spool_.pop();
  }

 private:
  gcp::LoggingClient client_;
  RankQuery query_;
  int tail_lines_;
  bool loaded_ = false;
  LineSpool spool_;
};

// The time between reads that a ProjectRateLimiters bucket for `reads_per_minute` sustains (it
// allows a burst of a twelfth of the rate and refills at the rest), plus a millisecond of margin:
// polling at this pace never finds the limiter empty, so it never blocks where should_stop cannot
// interrupt it (unless other processes share the rate).
milliseconds quota_pace(int reads_per_minute) {
  const int rate = std::max(reads_per_minute, 1);
  const int sustained = std::max(1, rate - std::max(1, rate / 12));
  return milliseconds(60'000 / sustained + 1);
}

std::int64_t nanos(milliseconds d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::max(d, milliseconds(0))).count();
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
  if (!options.should_stop) throw std::invalid_argument("follow_log needs a should_stop callback");
  const milliseconds interval =
      std::max({options.poll_interval, quota_pace(reads_per_minute), milliseconds(1)});
  constexpr milliseconds kStopCheck{200};
  const std::int64_t lookback = nanos(options.lookback);
  const std::int64_t visibility_delay = nanos(options.visibility_delay);

  // Entries already handed out whose timestamp is within the lookback of the newest one: the
  // ones a poll may see again.
  std::set<EntryKey> seen;
  std::int64_t newest = query.not_before_nanos();
  // The latest receiveTimestamp handed out, and the server's time at the previous poll: a poll
  // reads again only what the server received shortly before that poll or later.
  std::int64_t newest_received = 0;
  std::optional<std::int64_t> previous_poll;
  // After a tail: entries older than the oldest line printed are not to be printed at all.
  std::optional<EntryKey> floor;

  const auto emit = [&](const gcp::LogEntry& entry) {
    EntryKey key = key_of(entry);
    if (floor && key < *floor) return;
    const std::int64_t timestamp = key.first;
    if (!seen.insert(std::move(key)).second) return;
    newest = std::max(newest, timestamp);
    newest_received = std::max(newest_received, entry.receive_timestamp_nanos);
    on_line(log_line(entry));
  };

  if (tail_lines) {
    // The last N lines first; with N = 0 the newest entry only marks where following starts.
    LineSpool spool(kTailMemoryBytes);
    const TailScan scan = read_tail(client, query, std::max(*tail_lines, 1), spool, lookback);
    previous_poll = scan.server_time;
    newest_received = scan.newest_received;
    if (scan.newest) {
      newest = std::max(newest, scan.newest->first);
      seen.insert(scan.recent.begin(), scan.recent.end());
      floor = *tail_lines > 0 ? scan.oldest : scan.newest;
    }
    if (*tail_lines > 0) {
      while (std::optional<std::string> line = spool.pop()) on_line(*line);
    }
    if (options.should_stop()) return;
  }

  for (bool first = !tail_lines;; first = false) {
    std::string filter;
    if (first) {
      filter = query.filter();
    } else {
      const std::int64_t from = std::max(query.not_before_nanos(), newest - lookback);
      // What is new: stamped at or after the newest line, or received since shortly before the
      // previous poll (by the server's clock; without it, since the newest receipt seen).
      std::optional<WorkloadQuery::NewEntries> only_new;
      if (previous_poll) {
        only_new = WorkloadQuery::NewEntries{newest, *previous_poll - visibility_delay};
      } else if (newest_received > 0) {
        only_new = WorkloadQuery::NewEntries{newest, newest_received};
      }
      filter = query.filter_from(from, only_new);
    }
    gcp::ListLogEntriesRequest request = query.request(false, kPageSize);
    request.filter = std::move(filter);
    gcp::LogEntryReader reader = client.list_entries(std::move(request));
    while (std::optional<gcp::LogEntry> entry = reader.next()) {
      if (query.accept(*entry)) emit(*entry);
    }
    previous_poll = reader.first_server_time_nanos();
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
