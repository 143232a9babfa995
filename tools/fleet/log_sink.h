// Where simulated pods' log entries go. In falcon-fleet that is the local Cloud Logging store
// (GcpServer); tests use MemoryLogSink and read the entries back.
//
// Pods write runs of lines that share everything but the timestamp and the text (one pod, one
// stream), so the sink gets them as such: a store with a bulk path keeps the shared part once
// instead of building a JSON object per line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace falcon::fleet {

struct TextLine {
  std::int64_t time_ns = 0;  // the entry's timestamp, nanoseconds since the epoch
  std::string text;          // its textPayload
};

// Lines of one pod's stream. `shared` is a LogEntry without timestamp, textPayload and
// insertId (logName, resource, labels, severity).
struct LogRun {
  std::shared_ptr<const nlohmann::json> shared;
  std::vector<TextLine> lines;
};

// The entry a line becomes: `shared` plus timestamp (RFC 3339, nanoseconds), textPayload and a
// 16-character insertId derived from the pod, the stream and the timestamp (unique per pod and
// stream, since a pod's timestamps strictly increase).
nlohmann::json make_log_entry(const nlohmann::json& shared, const TextLine& line);

class LogSink {
 public:
  virtual ~LogSink() = default;
  // Stores complete LogEntry JSON objects. Called from several threads at once, never while the
  // simulator holds its lock; may block while storing.
  virtual void write(std::vector<nlohmann::json> entries) = 0;
  // Stores `lines` as entries of `shared` (see LogRun). The default builds each entry with
  // make_log_entry and calls write().
  virtual void write_lines(const nlohmann::json& shared, std::vector<TextLine> lines);
};

// Keeps every entry in memory, in arrival order. Thread-safe.
class MemoryLogSink final : public LogSink {
 public:
  void write(std::vector<nlohmann::json> entries) override;
  std::vector<nlohmann::json> entries() const;
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<nlohmann::json> entries_;
};

// Drops everything (for simulations that only need states).
class NullLogSink final : public LogSink {
 public:
  void write(std::vector<nlohmann::json>) override {}
  void write_lines(const nlohmann::json&, std::vector<TextLine>) override {}
};

}  // namespace falcon::fleet
