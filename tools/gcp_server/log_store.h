// The log entries behind the fake Cloud Logging API: entries:write semantics on the way in,
// entries:list (filter, order, paging) on the way out.
//
// Storage is compact so that a million GKE entries fit in a few hundred MB: the parts of an
// entry that repeat across entries (logName, resource, labels, severity, ...) are interned as
// a shared "shape"; each entry keeps only its timestamps, insertId and payload. Entries are
// kept sorted by (timestamp, insertId); a list binary-searches the timestamp bounds implied by
// its filter and walks forwards (asc) or backwards (desc) from there, and a page token records
// the position reached, so every page costs O(page) rather than a rescan.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "gcp_server/log_line.h"

namespace falcon::fake {

struct LogListRequest {
  std::vector<std::string> resource_names;  // projects/P, organizations/O, ... or log views
  std::string filter;                       // LQL
  bool descending = false;                  // orderBy "timestamp desc"
  int page_size = 50;                       // 1..1000, validated by the caller
  std::string page_token;                   // from a previous result, or empty
  // Only count the matching entries (LogListResult::matched): no page, no token, no scan budget.
  bool count_only = false;
};

struct LogListResult {
  std::vector<std::string> entries;  // each a serialized LogEntry JSON object
  std::string next_page_token;       // empty when the listing is complete
  std::size_t matched = 0;           // count_only: every entry the request matches
};

class LogStore {
 public:
  // `scan_budget`: the most entries one list call examines before it returns the (possibly
  // empty) page it has with a nextPageToken, as the real service does when its deadline
  // nears. 0 means unlimited.
  explicit LogStore(std::size_t scan_budget = 0);
  ~LogStore();
  LogStore(const LogStore&) = delete;
  LogStore& operator=(const LogStore&) = delete;

  // entries:write semantics. Each entry takes `log_name`, `resource` and `labels` (merged,
  // entry wins) from the request defaults when it lacks them; gets `receiveTimestamp` =
  // `receive_ns`, `timestamp` = `receive_ns` if absent, and a generated `insertId` if absent.
  // Validates everything first and stores nothing if any entry is invalid. Throws ApiError
  // (400 INVALID_ARGUMENT) naming the entry and field.
  void write(std::vector<nlohmann::json> entries, const nlohmann::json& log_name,
             const nlohmann::json& resource, const nlohmann::json& labels, std::int64_t receive_ns);

  // The same as write() of one entry per line, each being `shared` plus `timestamp` and
  // `textPayload` (generated insertIds), but without building a JSON object per line: the fast
  // path for simulated pod logs and benchmarks. `shared` must carry logName and resource and no
  // payload, timestamp or insertId. Throws ApiError (400) when `shared` is invalid.
  void write_text(const nlohmann::json& shared, std::vector<LogLine> lines,
                  std::int64_t receive_ns);

  // entries:list. Throws ApiError (400) on a malformed filter, an unknown resource name form
  // or a page token from another request. Safe to call concurrently with write().
  LogListResult list(const LogListRequest& request) const;

  std::size_t size() const;
  // Entries examined by list calls so far (each one the filter was applied to or that was
  // rejected by resource); lets tests check that bounded queries do not scan everything.
  std::uint64_t examined() const { return examined_.load(); }
  // Forgets every entry (and truncates the attached file, if any).
  void clear();

  // Persists entries as JSON lines in `path`: loads what the file holds, then appends every
  // later write. Throws std::runtime_error when the file cannot be read or opened.
  void attach_file(const std::filesystem::path& path);

 private:
  struct Shape;
  struct Entry {
    std::int64_t timestamp = 0;
    std::int64_t receive_timestamp = 0;
    std::uint32_t shape = 0;
    std::uint16_t insert_id_size = 0;
    std::uint8_t payload_kind = 0;  // 0 none, 1 textPayload, 2 jsonPayload, 3 protoPayload
    std::string data;               // insertId bytes, then the payload (text or JSON)
  };
  class View;

  Entry normalize(nlohmann::json entry, const nlohmann::json& log_name,
                  const nlohmann::json& resource, const nlohmann::json& labels,
                  std::int64_t receive_ns, std::size_t index);
  void insert_sorted(std::size_t first_new);
  std::string serialize(const Entry& e) const;
  bool key_less(std::uint32_t a, std::uint32_t b) const;

  std::size_t scan_budget_;
  mutable std::shared_mutex mutex_;
  std::vector<Entry> entries_;                  // in arrival order
  std::vector<std::uint32_t> order_;            // indexes into entries_, by (timestamp, insertId)
  std::vector<std::unique_ptr<Shape>> shapes_;  // interned shared parts
  std::unordered_map<std::string, std::uint32_t> shape_ids_;
  std::uint64_t next_insert_id_ = 1;
  mutable std::atomic<std::uint64_t> examined_{0};
  std::filesystem::path file_path_;
  std::unique_ptr<std::ofstream> file_;
};

}  // namespace falcon::fake
