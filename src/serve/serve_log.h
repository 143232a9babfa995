// `falcon serve`'s structured log: one JSON object a line, or `time level message key=value`
// when the log is a terminal. Access-log lines (one per request) are written in batches, at most
// 100 ms after they were made, so that thousands of requests a second cost no write each; every
// other line is written at once, after the access lines before it. Every value is escaped: a
// request path or an error message cannot end a line or forge another.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/config.h"
#include "serve/api_server.h"

namespace falcon::serve {

class ServeLog {
 public:
  // Writes to `fd` (not closed); human text when it is a terminal.
  explicit ServeLog(int fd);
  ~ServeLog();  // writes what is buffered
  ServeLog(const ServeLog&) = delete;
  ServeLog& operator=(const ServeLog&) = delete;

  void write(const char* level, const std::string& message, nlohmann::json fields = {});
  void info(const std::string& m, nlohmann::json f = {}) { write("info", m, std::move(f)); }
  void warn(const std::string& m, nlohmann::json f = {}) { write("warn", m, std::move(f)); }
  void error(const std::string& m, nlohmann::json f = {}) { write("error", m, std::move(f)); }
  // A line as it is, unbuffered (the `listening on` line).
  void raw(const std::string& line);

  // Which requests request() writes (serve.access_log; SIGHUP changes it).
  void set_access_log(AccessLog which) { access_log_.store(which, std::memory_order_relaxed); }
  // The access log: a server error (5xx) is a warning, written at once, whatever
  // serve.access_log says.
  void request(const RequestLogEntry& r);

 private:
  // One line: `time level message key=value...` on a terminal, else a JSON object.
  std::string format_line(const char* level, const std::string& message,
                          const nlohmann::json& fields) const;
  void append(const std::string& line, bool now);
  void write_out();  // under mutex_
  void flush_loop();

  const int fd_;
  const bool tty_;
  std::atomic<AccessLog> access_log_{AccessLog::kAll};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::string buffer_;
  std::thread flusher_;  // last: started once the rest is ready
};

}  // namespace falcon::serve
