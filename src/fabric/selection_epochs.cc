#include "fabric/selection_epochs.h"

#include <algorithm>

#include "falcon/accelerator_types.h"

namespace falcon {

std::string SelectionEpochs::canonical(std::string_view accelerator) {
  return canonical_accelerator_type(accelerator).value_or(std::string(accelerator));
}

void SelectionEpochs::mark(Marks& m, std::uint64_t at, Input input) {
  m.any = std::max(m.any, at);
  if (input == Input::kGate) m.gate = std::max(m.gate, at);
}

void SelectionEpochs::set_clusters(const std::vector<ClusterConfig>& clusters) {
  std::map<std::string, std::vector<std::string>, std::less<>> offers;
  for (const ClusterConfig& c : clusters) {
    auto& types = offers[c.name];
    for (const AcceleratorSlot& slot : c.accelerator_slots) types.push_back(canonical(slot.type));
  }
  const std::uint64_t at = ++sequence_;
  std::lock_guard lock(mutex_);
  offers_ = std::move(offers);
  for (const auto& [cluster, types] : offers_) {
    for (const std::string& t : types) types_[t];  // a type seen once keeps its marks
  }
  for (auto& [type, marks] : types_) mark(marks, at, Input::kGate);
  mark(other_, at, Input::kGate);
}

void SelectionEpochs::touch_cluster(std::string_view cluster, Input input) {
  const std::uint64_t at = ++sequence_;
  std::lock_guard lock(mutex_);
  mark(other_, at, input);
  const auto it = offers_.find(cluster);
  if (it == offers_.end()) {
    for (auto& [type, marks] : types_) mark(marks, at, input);
    return;
  }
  for (const std::string& t : it->second) mark(types_[t], at, input);
}

void SelectionEpochs::touch_type(std::string_view accelerator, Input input) {
  const std::string type = canonical(accelerator);
  const std::uint64_t at = ++sequence_;
  std::lock_guard lock(mutex_);
  mark(other_, at, input);
  if (const auto it = types_.find(type); it != types_.end()) mark(it->second, at, input);
}

SelectionChange SelectionEpochs::since(std::string_view accelerator, std::uint64_t epoch) const {
  const std::string type = canonical(accelerator);
  std::lock_guard lock(mutex_);
  const auto it = types_.find(type);
  const Marks& m = it != types_.end() ? it->second : other_;
  if (m.gate > epoch) return SelectionChange::kGate;
  if (m.any > epoch) return SelectionChange::kNewerData;
  return SelectionChange::kNone;
}

}  // namespace falcon
