// FabricClient in this process: the calls of ClusterFabric, and a recovery read from the state
// store.
#include <fmt/format.h>

#include <stdexcept>

#include "falcon/client.h"
#include "falcon/errors.h"
#include "falcon/fabric.h"
#include "falcon/state_store.h"
#include "falcon/values.h"
#include "serve/supervisor.h"

namespace falcon {
namespace {

class LocalClient final : public FabricClient {
 public:
  LocalClient(std::shared_ptr<ClusterFabric> fabric,
              std::function<void(const std::string&)> on_notice)
      : fabric_(std::move(fabric)), on_notice_(std::move(on_notice)) {}

  std::vector<ClusterEntry> list_clusters() override {
    std::vector<ClusterEntry> out;
    for (auto& c : fabric_->list_clusters()) {
      try {
        auto breakers = fabric_->cluster_breakers(c.name);
        out.push_back({std::move(c), std::move(breakers)});
      } catch (const UnknownClusterError&) {
        // removed by a reload meanwhile
      }
    }
    return out;
  }

  ClusterHealth cluster_health(const std::string& cluster) override {
    ClusterHealth out;
    out.probe = fabric_->get_cluster_status(cluster);
    out.breakers = fabric_->cluster_breakers(cluster);  // after this probe fed them
    return out;
  }

  Decision select(const SelectRequest& request) override {
    Decision out;
    out.selection = fabric_->select_cluster(request.accelerator_type, {.policy = request.policy});
    return out;
  }

  ClusterSelection recorded_selection(std::int64_t id) override {
    const auto record = fabric_->state_store()->get_selection(id);
    if (!record) {
      throw InvalidValueError("--replay-selection",
                              fmt::format("the state store has no selection {}", id));
    }
    return record->selection;
  }

  Submission submit(const SubmitRequest& request) override {
    if (request.managed) {
      throw InvalidValueError(
          "--managed",
          "a managed workload needs a falcon server: the supervisor that heals managed "
          "workloads runs in `falcon serve`; pass --server URL or set FALCON_SERVER "
          "(docs/self-healing.md)");
    }
    Submission out;
    if (request.cluster.empty()) {
      PlacedWorkload placed = fabric_->select_and_submit(request.spec);
      out.handle = std::move(placed.handle);
      out.selection = std::move(placed.selection);
    } else {
      out.handle = fabric_->submit_workload(request.cluster, request.spec, request.selection_id);
    }
    return out;
  }

  WorkloadHandle handle_for(const std::string& cluster, const std::string& workload) override {
    return fabric_->handle_for(cluster, workload);
  }

  WorkloadStatus status(const std::string& cluster, const std::string& workload) override {
    return fabric_->get_workload_status(fabric_->handle_for(cluster, workload));
  }

  Cancellation cancel(const std::string& cluster, const std::string& workload) override {
    Cancellation out;
    out.handle = fabric_->handle_for(cluster, workload);
    out.cancelled = fabric_->cancel_workload(out.handle);
    return out;
  }

  std::vector<WorkloadInfo> list_workloads(const std::string& cluster,
                                           const std::optional<std::string>& state) override {
    return fabric_->list_workloads(cluster, state);
  }

  std::vector<Recovery> recoveries(const std::optional<std::string>& workload) override {
    std::vector<Recovery> out;
    for (const RecoveryRecord& r : fabric_->state_store()->list_recoveries(1000, workload)) {
      out.push_back(recovery_of(r));
    }
    return out;
  }

  void read_logs(const LogRequest& request, const std::function<void(const std::string&)>& on_line,
                 const std::function<bool()>& stop) override {
    const WorkloadHandle h = fabric_->handle_for(request.cluster, request.workload);
    LogFilter filter = filter_for(h, request.since, request.grep);
    if (request.tail > 0) filter.tail_lines = request.tail;
    if (!request.follow) {
      for (const std::string& line :
           fabric_->stream_pod_log(h, request.rank, filter, request.slice)) {
        if (stop && stop()) return;
        on_line(line);
      }
      return;
    }
    const auto never = [] { return false; };
    fabric_->follow_pod_log_until_finished(h, request.rank, filter, request.slice, {},
                                           stop ? stop : std::function<bool()>(never), on_line);
  }

  LogExportResult export_logs(const ExportRequest& request,
                              const ExportObserver& observer) override {
    const WorkloadHandle h = fabric_->handle_for(request.cluster, request.workload);
    LogFilter filter = filter_for(h, request.since, request.grep);
    if (request.ranks) filter.ranks = *request.ranks;
    ExportOptions how;
    how.via = request.via.value_or(ExportVia::kAuto);
    how.keep_staging = request.keep_staging;
    how.cancelled = observer.cancelled;
    how.on_status = observer.on_status;
    try {
      return fabric_->export_pod_logs(h, filter, request.dest, request.slice, how,
                                      observer.on_progress);
    } catch (const std::invalid_argument& e) {
      throw InvalidValueError("--ranks", e.what());  // a rank the workload does not have
    }
  }

 private:
  void notice(const std::string& text) const {
    if (on_notice_) on_notice_(text);
  }

  // Says which time window a log read covers when it is not obvious.
  LogFilter filter_for(const WorkloadHandle& handle, const std::optional<std::string>& since,
                       const std::optional<std::string>& grep) const {
    LogFilter filter;
    filter.since = since;
    filter.grep = grep;
    if (!filter.since && handle.submitted_at.empty()) {
      notice(fmt::format(
          "no record of submitting {} from here; reading the last 24 hours of logs (use "
          "--since to change the window)",
          quote_value(handle.workload_name)));
    }
    return filter;
  }

  std::shared_ptr<ClusterFabric> fabric_;
  std::function<void(const std::string&)> on_notice_;
};

}  // namespace

std::unique_ptr<FabricClient> make_local_client(std::shared_ptr<ClusterFabric> fabric,
                                                std::function<void(const std::string&)> on_notice) {
  if (!fabric) throw std::invalid_argument("make_local_client: fabric is null");
  return std::make_unique<LocalClient>(std::move(fabric), std::move(on_notice));
}

}  // namespace falcon
