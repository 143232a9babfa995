#include "serve/serve_log.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <ctime>

#include "serve/http_message.h"

namespace falcon::serve {

namespace {

constexpr auto kAccessFlush = std::chrono::milliseconds(100);
constexpr std::size_t kMaxBuffered = 64 << 10;

std::string format_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A value on a human line: strings escaped (no control character reaches the terminal).
std::string human(const nlohmann::json& v) {
  return v.is_string() ? escape_for_log(v.get<std::string>(), 2000) : dump(v);
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
  const std::string time = format_now();
  std::string line;
  if (tty_) {
    line = fmt::format("{} {:<5} {}", time, level, escape_for_log(message, 4000));
    if (fields.is_object()) {
      for (const auto& [k, v] : fields.items()) line += fmt::format(" {}={}", k, human(v));
    }
  } else {
    nlohmann::json j = {{"time", time}, {"level", level}, {"msg", message}};
    if (fields.is_object()) {
      for (const auto& [k, v] : fields.items()) j[k] = v;
    }
    line = dump(j);
  }
  append(line, true);
}

void ServeLog::raw(const std::string& line) { append(line, true); }

void ServeLog::request(const RequestLogEntry& r) {
  const bool warn = r.status >= 500;
  const AccessLog which = access_log_.load(std::memory_order_relaxed);
  if (!warn && (which == AccessLog::kNone || (which == AccessLog::kErrors && r.status < 400))) {
    return;
  }
  if (tty_) {
    nlohmann::json fields = {{"method", r.method},
                             {"route", r.route},
                             {"path", r.path},
                             {"status", r.status},
                             {"ms", static_cast<std::int64_t>(r.seconds * 1000)}};
    if (!r.error.empty()) fields["error"] = r.error;
    write(warn ? "warn" : "info", "request", std::move(fields));
    return;
  }
  const auto quoted = [](const std::string& s) { return dump(nlohmann::json(s)); };
  std::string line =
      fmt::format(R"({{"time":"{}","level":"{}","msg":"request","method":{},"route":{},"path":{},)"
                  R"("status":{},"ms":{})",
                  format_now(), warn ? "warn" : "info", quoted(r.method), quoted(r.route),
                  quoted(r.path), r.status, static_cast<std::int64_t>(r.seconds * 1000));
  if (!r.error.empty()) line += ",\"error\":" + quoted(r.error);
  line += '}';
  append(line, warn);
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
