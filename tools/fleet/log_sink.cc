#include "fleet/log_sink.h"

#include <iterator>

namespace falcon::fleet {

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
