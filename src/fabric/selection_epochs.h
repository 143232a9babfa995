// The one epoch a repeated decision is checked against (`falcon serve`, serve.select_reuse_ms).
//
// One sequence per fabric; every input a decision reads takes the next number and marks the
// accelerator types it touches with it: a probe shown in the cache and a history write touch
// every type their cluster offers (newer data), a breaker the fabric changed touches its
// cluster's types or its slot's one, a reload touches every type (a gate: work may now go
// where it must not). A decision remembers the sequence as it started; it is current while
// no mark of its type is newer. Types no cluster offers share one mark that every input
// moves.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "falcon/fabric.h"
#include "falcon/model.h"

namespace falcon {

class SelectionEpochs {
 public:
  enum class Input { kData, kGate };

  // The types each cluster offers, from a configuration just loaded; marks every type as a
  // gate.
  void set_clusters(const std::vector<ClusterConfig>& clusters);
  // The sequence now: what a decision starting now rests on.
  std::uint64_t now() const { return sequence_.load(); }
  // An input of `cluster`, touching every type it offers (all when it is not known).
  void touch_cluster(std::string_view cluster, Input input);
  // An input of one type (canonical or not): a cluster x accelerator breaker.
  void touch_type(std::string_view accelerator, Input input);
  // What touched `accelerator` (canonical or not) since a decision read `epoch`.
  SelectionChange since(std::string_view accelerator, std::uint64_t epoch) const;

 private:
  struct Marks {
    std::uint64_t any = 0;   // the last input of any kind
    std::uint64_t gate = 0;  // the last gate
  };
  void mark(Marks& m, std::uint64_t at, Input input);
  static std::string canonical(std::string_view accelerator);

  std::atomic<std::uint64_t> sequence_{0};
  mutable std::mutex mutex_;
  std::map<std::string, Marks, std::less<>> types_;                      // canonical type -> marks
  std::map<std::string, std::vector<std::string>, std::less<>> offers_;  // cluster -> types
  Marks other_;                                                          // types no cluster offers
};

}  // namespace falcon
