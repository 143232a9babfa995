// Where simulated pods' log entries go. In falcon-fleet that is the local Cloud Logging store
// (GcpServer::write_log_entries); tests use MemoryLogSink and read the entries back.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

namespace falcon::fleet {

class LogSink {
 public:
  virtual ~LogSink() = default;
  // Stores `entries` (Cloud Logging LogEntry JSON objects). Called from several threads at
  // once, never while the simulator holds its lock; may block while storing.
  virtual void write(std::vector<nlohmann::json> entries) = 0;
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
};

}  // namespace falcon::fleet
