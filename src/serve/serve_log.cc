#include "serve/serve_log.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>

#include "falcon/values.h"
#include "serve/http_message.h"
#include "util/time_format.h"

namespace falcon::serve {

namespace {

constexpr auto kAccessFlush = std::chrono::milliseconds(100);
constexpr std::size_t kMaxBuffered = 64 << 10;

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A value on a human line: strings escaped (no control character reaches the terminal).
std::string human(const nlohmann::json& v) {
  return v.is_string() ? printable(v.get<std::string>(), 2000) : dump(v);
}

}  // namespace

ServeLog::ServeLog(int fd) : fd_(fd), tty_(::isatty(fd) == 1), flusher_([this] { flush_loop(); }) {}

ServeLog::~ServeLog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  flusher_.join();
  std::lock_guard lock(mutex_);
  write_out();
}

void ServeLog::write(const char* level, const std::string& message, nlohmann::json fields) {
  append(format_line(level, message, fields), true);
}

std::string ServeLog::format_line(const char* level, const std::string& message,
                                  const nlohmann::json& fields) const {
  const std::string time = format_iso8601(std::chrono::system_clock::now());
  if (tty_) {
    std::string line = fmt::format("{} {:<5} {}", time, level, printable(message, 4000));
    if (fields.is_object()) {
      for (const auto& [k, v] : fields.items()) line += fmt::format(" {}={}", k, human(v));
    }
    return line;
  }
  nlohmann::json j = {{"time", time}, {"level", level}, {"msg", message}};
  if (fields.is_object()) {
    for (const auto& [k, v] : fields.items()) j[k] = v;
  }
  return dump(j);
}

void ServeLog::raw(const std::string& line) { append(line, true); }

void ServeLog::request(const RequestLogEntry& r) {
  const bool warn = r.status >= 500;
  const AccessLog which = access_log_.load(std::memory_order_relaxed);
  if (!warn && (which == AccessLog::kNone || (which == AccessLog::kErrors && r.status < 400))) {
    return;
  }
  nlohmann::json fields = {{"method", r.method},
                           {"route", r.route},
                           {"path", r.path},
                           {"status", r.status},
                           {"ms", static_cast<std::int64_t>(r.seconds * 1000)}};
  if (!r.error.empty()) fields["error"] = r.error;
  // Batched unless it is a server error (docs/serve.md "Logs").
  append(format_line(warn ? "warn" : "info", "request", fields), warn);
}

void ServeLog::append(const std::string& line, bool now) {
  std::lock_guard lock(mutex_);
  buffer_ += line;
  buffer_ += '\n';
  if (now || buffer_.size() >= kMaxBuffered) write_out();
}

void ServeLog::write_out() {
  std::size_t off = 0;
  while (off < buffer_.size()) {
    const ssize_t w = ::write(fd_, buffer_.data() + off, buffer_.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;  // the log is gone: nothing else to tell it
    off += static_cast<std::size_t>(w);
  }
  buffer_.clear();
}

void ServeLog::flush_loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, kAccessFlush);
    if (!buffer_.empty()) write_out();
  }
}

}  // namespace falcon::serve
