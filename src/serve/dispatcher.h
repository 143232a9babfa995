// Dispatcher: `falcon serve` as the external dispatcher of a MultiKueue manager cluster
// (repos.yaml `dispatch:`, docs/dispatch.md, issue 29).
//
// Kueue's manager copies a Workload only to the worker clusters named in its
// .status.nominatedClusterNames when its multiKueue.dispatcherName is not one of Kueue's own;
// the dispatcher sets that list:
//
//   watch      the manager's Workloads (list, then watch from its resourceVersion; a 410 lists
//              again); one thread, never blocked by decisions
//   wait for   Workloads whose MultiKueue admission check (dispatch.admission_checks, or every
//              check of controller kueue.x-k8s.io/multikueue) is Pending, with quota reserved
//              on the manager, not finished, no clusterName, no nomination (or one of ours
//              older than renominate_after_s). A nomination falcon did not make (another
//              controller's, or a person's) is left alone
//   decide     high priority first, then oldest: the control plane's decision (the configured
//              policy over the health loop's probes: open breakers and stale probes are never
//              chosen) among the Active workers of the Workload's MultiKueueConfig, mapped to
//              registry clusters (dispatch.clusters); the others are left out saying why. With
//              hold_until_room, only workers with room now are nominated: a Workload none has
//              room for waits on the manager (late binding) and is decided again when the
//              manager changes or after retry_s. Nominations made and not admitted yet count as
//              queued Workloads of their cluster, so decisions made together spread
//   record     the nomination's intent in the state store (linked to the Workload's UID and
//              the decision's id), then the patch, then its outcome; a store that refuses the
//              intent means no patch
//   nominate   PATCH the Workload's status (compare-and-swap on its resourceVersion: a Workload
//              that changed meanwhile is decided again from its new version)
//   again      none of the nominated workers admitted it in renominate_after_s: decide again
//              without them (all of them once every worker was tried)
//   preempt    with preempt_after_s: a Workload of priority >= preempt_min_priority held that
//              long is nominated to the one preempting worker where a Workload of lower
//              priority this dispatcher saw admitted there holds a slice of its accelerator at
//              least as large (evicting it frees a run the slice fits in; chips counted across
//              smaller ones may lie in different blocks), the first such in Kueue's order, at
//              the least chip-time since its admission; the worker's Kueue
//              (withinClusterQueue: LowerPriority) evicts it. A worker that evicted nothing (no
//              Workload taken back from it) and did not admit it within preempt_confirm_s did
//              not preempt (another preemption policy, the victim gone meanwhile): decided
//              again without it, and not nominated to preempt for as large a slice at no higher
//              priority until a Workload of at least that priority leaves it (finishes, is
//              taken back or deleted), or renominate_after_s has passed
//
// Not ready (problem()) while the manager cannot be listed or watched, its wiring cannot be
// read, its Kueue is configured with another dispatcher name, or the store refuses nominations.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "falcon/client.h"
#include "falcon/clock.h"
#include "falcon/config.h"
#include "falcon/state_store.h"
#include "kube/manager_api.h"
#include "serve/api_server.h"

namespace falcon {

struct DispatcherOptions {
  DispatchSettings settings;
  std::shared_ptr<kube::ManagerApi> manager;  // required
  std::shared_ptr<StateStore> store;          // required
  std::shared_ptr<Clock> clock;               // null: the system clock
  // The control plane's decision for an accelerator type (ControlPlane::select_excluding with
  // no exclusions and these hints); throws NoAvailableClusterError. Required.
  std::function<Decision(const std::string& accelerator, const PlacementHints& hints)> decide;
  // The registry's cluster names (those that are not workers are left out). Required.
  std::function<std::vector<std::string>()> registry_clusters;
  std::function<void(const std::string& level, const std::string& message)> on_event;
};

struct DispatchStatus {
  std::string manager;                          // its API server
  std::string dispatcher_name;                  // what falcon answers for
  std::optional<std::string> kueue_dispatcher;  // what the manager's Kueue is configured with
  std::optional<std::string> problem;           // not ready: why
  int workloads = 0;                            // Workloads of the manager known
  int waiting = 0;    // waiting for a nomination (held: no worker has room, or none can run it)
  int nominated = 0;  // nominated by falcon, not admitted yet
  int foreign = 0;    // nominated by someone else: left alone
  std::int64_t nominations = 0;    // patched
  std::int64_t renominations = 0;  // of those, after renominate_after_s
  std::int64_t admitted = 0;       // Workloads falcon nominated that a worker admitted
  std::int64_t conflicts = 0;      // patches refused: the Workload had changed
  std::int64_t failures = 0;       // patches that failed otherwise, or were not recorded
  std::int64_t preemptions = 0;    // nominations made to preempt (of `nominations`)
  // Preempting nominations decided again after preempt_confirm_s: their worker evicted nothing.
  std::int64_t preemptions_unconfirmed = 0;
  // From the moment a Workload was seen waiting to its nomination's patch, over the last 1,000.
  std::optional<double> latency_p50_ms;
  std::optional<double> latency_p99_ms;
  std::map<std::string, std::string> held;  // "namespace/name" -> why (at most 100)
};

class Dispatcher {
 public:
  // Throws std::invalid_argument when a required option is missing.
  explicit Dispatcher(DispatcherOptions options);
  ~Dispatcher();  // stop()
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  void start();  // the watch and decide threads
  void stop();   // ends both (a watch in flight within about a second)

  std::optional<std::string> problem() const;
  DispatchStatus status() const;

  // The pieces the threads run, for tests that drive them one at a time.
  void apply_list(const kube::WorkloadList& list);
  void apply_event(const kube::ManagerEvent& event);
  void refresh_wiring();  // also reads the manager's configured dispatcher name
  void pass();            // decides every waiting Workload once

 private:
  struct Tracked {
    kube::ManagerWorkload workload;
    std::chrono::steady_clock::time_point seen;      // first seen waiting (for the latency)
    bool waited = false;                             // `seen` is set
    std::chrono::steady_clock::time_point admitted;  // first seen with clusterName
  };
  // A nomination made to preempt: the slice it needs room for.
  struct Preempting {
    double slice_chips = 0;
    int priority = 0;
  };
  struct Ours {
    std::vector<std::string> clusters;  // MultiKueueCluster names patched
    std::chrono::steady_clock::time_point at;
    std::set<std::string> tried;  // nominated before and not admitted
    std::optional<Preempting> preempting;
    bool unconfirmed_seen = false;  // counted, and remembered in no_preempt_room_
    // A nomination (made again or anew) at `now`: preempt() says when it is a preemption.
    void restart(std::chrono::steady_clock::time_point now) {
      at = now;
      preempting.reset();
      unconfirmed_seen = false;
    }
  };
  struct Work {
    kube::ManagerWorkload workload;
    std::vector<std::string> workers;  // of its MultiKueue config, in configuration order
    bool again = false;                // a renomination
  };
  // A worker that did not preempt for a slice this large at this priority, as of `at`.
  struct NoPreemptRoom {
    Preempting for_slice;
    std::chrono::steady_clock::time_point at;
  };

  void adopt();  // takes back the nominations an earlier run recorded
  void watch_loop();
  void decide_loop();
  void track(const kube::ManagerWorkload& w);  // with mu_ held
  // With mu_ held: whether `o` is a preempting nomination whose worker has taken no Workload
  // back since it was made, and when it is decided again.
  bool unconfirmed(const Ours& o) const;
  std::chrono::steady_clock::time_point due(const Ours& o) const;
  // Its worker did not preempt for a slice as large at a priority as high, and nothing that
  // could make room has happened there since (see preempt()).
  bool found_no_room(const std::string& cluster, double slice_chips, int priority,
                     std::chrono::steady_clock::time_point now) const;
  // A Workload of `priority` left `worker` (finished, taken back or deleted while admitted).
  void left(const std::string& worker, int priority, std::chrono::steady_clock::time_point now);
  std::vector<Work> collect(std::chrono::steady_clock::time_point now,
                            std::chrono::steady_clock::time_point* next_deadline);
  // A decision that nominated nobody: its candidates, and its id when it was recorded.
  struct Held {
    std::vector<CandidateScore> scores;
    std::int64_t selection_id = 0;
  };
  // Decides and nominates `work` without the clusters `kept` (cluster -> why: room held for a
  // Workload of higher priority); false when its accelerator type found no worker now, with
  // `*waits_for` the cluster it would take first (the decision's best) when there was one and
  // `*held` the decision.
  bool dispatch(const Work& work, const std::map<std::string, std::string>& kept,
                std::string* waits_for, Held* held);
  // dispatch.preempt_after_s for `work`, which `held` placed nowhere: true when it was due and
  // a worker's preemption makes room (then it is nominated there).
  bool preempt(const Work& work, const Held& held);
  // Records the intent, patches the nomination of `names` (MultiKueueCluster names) and
  // records the outcome; `detail` goes with a patched outcome. False when it was not patched.
  bool nominate(const Work& work, const std::vector<std::string>& names, std::int64_t selection_id,
                const std::set<std::string>& tried, const std::string& detail);
  std::string registry_name(const std::string& worker) const;
  void event(const std::string& level, const std::string& message) const;

  DispatcherOptions options_;
  std::shared_ptr<Clock> clock_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool dirty_ = false;  // something changed since the last pass
  bool listed_ = false;
  std::map<std::string, Tracked> workloads_;  // by uid
  std::map<std::string, Ours> ours_;          // by uid
  // Registry cluster -> when this dispatcher last saw a Workload admitted there
  // (PlacementHints::placed_at: older cached probes are probed again). Nominations not
  // admitted yet count through PlacementHints::in_flight instead.
  std::map<std::string, std::chrono::steady_clock::time_point> placed_at_;
  // Registry cluster -> when a Workload was last seen taken back from it (its worker evicted
  // it); and, by priority, when one of that priority last left it (finished there, taken back
  // or deleted while admitted).
  std::map<std::string, std::chrono::steady_clock::time_point> evicted_at_;
  std::map<std::string, std::map<int, std::chrono::steady_clock::time_point>> left_at_;
  std::map<std::string, NoPreemptRoom> no_preempt_room_;  // by registry cluster
  std::set<std::string> looked_up_;                       // uids whose nomination adopt() has read
  std::optional<kube::MultiKueueWiring> wiring_;
  std::chrono::steady_clock::time_point wiring_at_;
  std::optional<std::string> kueue_dispatcher_;
  std::string watch_problem_, wiring_problem_, store_problem_;
  std::map<std::string, std::string> held_;  // "ns/name" -> why
  DispatchStatus counters_;
  std::vector<double> latencies_ms_;  // ring of the last 1,000
  std::size_t latency_next_ = 0;

  std::thread watcher_, decider_;
};

}  // namespace falcon
