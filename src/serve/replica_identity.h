// This replica's name in the supervisor's lease, the same across restarts of one `falcon serve`
// and different for two that run at once.
//
// The name is kept in <state_dir>/supervisor-holder, which the running replica holds under an
// exclusive flock(2) for its lifetime. A replica restarted after a crash finds the file
// unlocked (the kernel dropped the dead process's lock), takes the same name and so takes its
// own lease back at once instead of waiting out the TTL of a lease nobody renews. A second
// replica started beside a live one finds the file locked and gets a name of its own
// (empty id(): the supervisor's default, <hostname>:<pid>:<random>), so two live replicas never
// share a name, which would let both act.
#pragma once

#include <filesystem>
#include <string>

namespace falcon::serve {

class ReplicaIdentity {
 public:
  // Never throws: a state directory that cannot be used gives an empty id() and says why in
  // problem().
  static ReplicaIdentity acquire(const std::filesystem::path& state_dir);
  ReplicaIdentity(ReplicaIdentity&& other) noexcept;
  ReplicaIdentity& operator=(ReplicaIdentity&& other) noexcept;
  ReplicaIdentity(const ReplicaIdentity&) = delete;
  ReplicaIdentity& operator=(const ReplicaIdentity&) = delete;
  ~ReplicaIdentity();  // releases the lock

  // The kept name; empty when this replica has none (another holds the file, or it could not
  // be used).
  const std::string& id() const { return id_; }
  // Why id() is empty, for the log; empty when it is not.
  const std::string& problem() const { return problem_; }

 private:
  ReplicaIdentity() = default;
  int fd_ = -1;
  std::string id_;
  std::string problem_;
};

}  // namespace falcon::serve
