#include "fleet/log_sink.h"

#include <iterator>

#include "common/rfc3339.h"
#include "fleet/pod_logs.h"

namespace falcon::fleet {

nlohmann::json make_log_entry(const nlohmann::json& shared, const TextLine& line) {
  static constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  nlohmann::json e = shared;
  std::uint64_t seed = 0;
  if (const auto r = shared.find("resource"); r != shared.end()) {
    if (const auto l = r->find("labels"); l != r->end()) {
      seed = hash_string(l->value("pod_name", ""));
    }
  }
  seed = hash_string(shared.value("logName", ""), seed);
  std::uint64_t bits = mix64(seed ^ mix64(static_cast<std::uint64_t>(line.time_ns)));
  std::string insert_id(16, '0');
  for (char& c : insert_id) {
    c = kAlphabet[bits % 36];
    bits = bits / 36 ^ mix64(bits);
  }
  e["insertId"] = std::move(insert_id);
  e["timestamp"] = tools::format_rfc3339_nanos(line.time_ns);
  e["textPayload"] = line.text;
  return e;
}

void LogSink::write_lines(const nlohmann::json& shared, std::vector<TextLine> lines) {
  std::vector<nlohmann::json> entries;
  entries.reserve(lines.size());
  for (const auto& line : lines) entries.push_back(make_log_entry(shared, line));
  write(std::move(entries));
}

void MemoryLogSink::write(std::vector<nlohmann::json> entries) {
  std::lock_guard lock(mu_);
  entries_.insert(entries_.end(), std::make_move_iterator(entries.begin()),
                  std::make_move_iterator(entries.end()));
}

std::vector<nlohmann::json> MemoryLogSink::entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

std::size_t MemoryLogSink::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace falcon::fleet
