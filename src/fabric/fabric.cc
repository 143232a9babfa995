#include "falcon/fabric.h"

#include <stdexcept>

#include <fmt/format.h>

#include "fabric/fabric_impl.h"
#include "falcon/accelerator_types.h"
#include "falcon/errors.h"
#include "kube/kube_prober.h"
#include "util/time_format.h"
#include "xpk/credential_warmup.h"
#include "xpk/xpk_cli.h"

namespace falcon {
namespace {

// Logs may be written a little before xpk reports the submission (clock skew between this
// machine and Google's), so log queries start this much before submitted_at.
constexpr std::chrono::minutes kSubmitMargin{10};

// The real effects for the members `deps` leaves null; the HTTP client takes the
// configuration's CA file.
// A rank the workload does not have is an error, not an empty object (issue 11). A TPU slice's
// ranks are its VMs (one pod each), known from the accelerator type of falcon's submission
// record; without a record, or for GPU and CPU workloads (whose node count xpk takes from
// --num-nodes), every rank is taken as asked.
void check_ranks_exist(const XpkWorkloadManager& workloads, const WorkloadHandle& handle,
                       const LogFilter& filter) {
  if (!filter.ranks) return;
  const auto record = workloads.find_submission(handle.cluster, handle.workload_name);
  if (!record) return;
  const auto canonical = canonical_accelerator_type(record->accelerator_type);
  const XpkAcceleratorType* type = canonical ? find_xpk_accelerator_type(*canonical) : nullptr;
  if (!type || type->device_class != DeviceClass::kTpu) return;
  for (const int rank : *filter.ranks) {
    if (rank < 0 || rank >= type->vms_per_slice) {
      throw std::invalid_argument(fmt::format(
          "workload '{}' on cluster '{}' has ranks 0..{} in each slice ({}: {} VMs per slice); "
          "there is no rank {}",
          handle.workload_name, handle.cluster, type->vms_per_slice - 1, type->name,
          type->vms_per_slice, rank));
    }
  }
}

FabricDependencies with_real_effects(const FabricConfig& config, FabricDependencies deps) {
  if (!deps.runner) deps.runner = make_posix_command_runner();
  if (!deps.clock) deps.clock = make_system_clock();
  if (!deps.http) {
    CurlHttpOptions http_options;
    http_options.ca_file = config.gcp.ca_file;
    deps.http = make_curl_http_client(http_options);
  }
  return deps;
}

}  // namespace

void ClusterFabric::Impl::build() {
  auto m = std::make_shared<Modules>();
  m->config = registry.snapshot();
  m->xpk = std::make_shared<const xpk::XpkCli>(deps.runner, m->config->xpk);
  kube::KubeProberOptions kube_options;
  kube_options.state_dir = xpk::resolve_state_dir(m->config->xpk);
  kube_options.http = deps.http;
  kube_options.http_with_ca = [](const std::string& ca_file) {
    CurlHttpOptions options;
    options.ca_file = ca_file;
    return make_curl_http_client(options);
  };
  kube_options.runner = deps.runner;
  kube_options.clock = deps.clock;
  m->prober = std::make_unique<ClusterProber>(
      m->xpk, std::make_shared<kube::KubeProber>(std::move(kube_options)), m->config->probe.backend,
      deps.clock);
  m->selector =
      std::make_unique<ClusterSelector>(registry, *m->prober, m->config->selection, deps.clock);
  m->workloads = std::make_unique<XpkWorkloadManager>(m->xpk, deps.clock);
  LogRetrieverOptions log_options;
  log_options.http = deps.http;
  log_options.clock = deps.clock;
  log_options.settings = m->config->gcp;
  // Every falcon process of this state directory shares the read quota (issue 11).
  log_options.quota_dir = (xpk::resolve_state_dir(m->config->xpk) / "quota").string();
  log_options.on_wait = deps.on_log_wait;
  m->logs = std::make_unique<CloudLogRetriever>(std::move(log_options));
  std::lock_guard<std::mutex> lock(mutex);
  modules = std::move(m);
}

std::shared_ptr<Modules> ClusterFabric::Impl::current() const {
  std::lock_guard<std::mutex> lock(mutex);
  return modules;
}

LogQueryOptions ClusterFabric::Impl::query_options(const WorkloadHandle& handle, int slice) const {
  LogQueryOptions options;
  options.slice = slice;
  if (auto submitted = parse_rfc3339(handle.submitted_at)) {
    options.not_before = format_iso8601(*submitted - kSubmitMargin);
  }
  return options;
}

ClusterFabric::ClusterFabric(const std::string& config_path)
    : ClusterFabric(config_path, FabricDependencies{}) {}

ClusterFabric::ClusterFabric(const std::string& config_path, FabricDependencies deps)
    : impl_(std::make_unique<Impl>()) {
  // Parsed once: the HTTP client and the registry share this reading of the file.
  FabricConfig config = load_fabric_config(config_path);
  impl_->config_path = config_path;
  impl_->deps = with_real_effects(config, std::move(deps));
  impl_->registry.load(std::move(config));
  impl_->build();
}

ClusterFabric::~ClusterFabric() = default;

FabricConfig ClusterFabric::check_config(const std::string& config_path) {
  return load_fabric_config(config_path);
}

void ClusterFabric::reload() {
  impl_->registry.load(impl_->config_path);
  impl_->build();
}

std::shared_ptr<const FabricConfig> ClusterFabric::config() const {
  return impl_->current()->config;
}

std::vector<ClusterConfig> ClusterFabric::list_clusters() const {
  return impl_->registry.list_clusters();
}

ClusterConfig ClusterFabric::get_cluster(const std::string& cluster) const {
  return impl_->registry.get_cluster(cluster);
}

ClusterProbeResult ClusterFabric::get_cluster_status(const std::string& cluster) const {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  return impl_->current()->prober->probe(config);
}

ClusterSelection ClusterFabric::select_cluster(const std::string& accelerator_type) const {
  return impl_->current()->selector->select(accelerator_type);
}

std::vector<WarmupResult> ClusterFabric::warm_up() const {
  const auto m = impl_->current();
  return xpk::warm_up_credentials(*m->xpk, *impl_->deps.clock, m->config->clusters,
                                  m->config->selection.max_parallel_probes);
}

WorkloadHandle ClusterFabric::submit_workload(const std::string& cluster,
                                              const WorkloadSpec& spec) {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  return impl_->current()->workloads->submit(config, spec);
}

WorkloadStatus ClusterFabric::get_workload_status(const WorkloadHandle& handle) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  const auto current = impl_->current();
  WorkloadStatus status = current->workloads->get_status(config, handle);
  if (!status.exit_code && status.state == "COMPLETED") {
    status.exit_code = 0;
  } else if (!status.exit_code && status.state == "FAILED") {
    try {
      status.exit_code = current->logs->failure_exit_code(
          config, handle.workload_name, handle.namespace_, impl_->query_options(handle, 0));
    } catch (const LogRetrievalError&) {
      // Best effort, as documented: the state is what this call is for; the code stays null.
    }
  }
  return status;
}

bool ClusterFabric::cancel_workload(const WorkloadHandle& handle) {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  return impl_->current()->workloads->cancel(config, handle);
}

std::vector<WorkloadInfo> ClusterFabric::list_workloads(
    const std::string& cluster, const std::optional<std::string>& state_filter) const {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  return impl_->current()->workloads->list_workloads(config, state_filter);
}

WorkloadHandle ClusterFabric::handle_for(const std::string& cluster,
                                         const std::string& workload_name) const {
  const ClusterConfig config = impl_->registry.get_cluster(cluster);
  if (auto record = impl_->current()->workloads->find_submission(cluster, workload_name)) {
    return {workload_name, cluster, record->namespace_, record->submitted_at};
  }
  return {workload_name, cluster, config.default_namespace, ""};
}

LogLines ClusterFabric::stream_pod_log(const WorkloadHandle& handle, int rank,
                                       const LogFilter& filter, int slice) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  return impl_->current()->logs->stream_log(config, handle.workload_name, handle.namespace_, rank,
                                            filter, impl_->query_options(handle, slice));
}

void ClusterFabric::follow_pod_log(const WorkloadHandle& handle, int rank, const LogFilter& filter,
                                   int slice, const FollowOptions& options,
                                   const std::function<void(const std::string&)>& on_line) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  impl_->current()->logs->follow_log(config, handle.workload_name, handle.namespace_, rank, filter,
                                     impl_->query_options(handle, slice), options, on_line);
}

void ClusterFabric::follow_pod_log_until_finished(
    const WorkloadHandle& handle, int rank, const LogFilter& filter, int slice,
    FollowOptions options, const std::function<bool()>& interrupted,
    const std::function<void(const std::string&)>& on_line) const {
  options.should_stop = follow_until_finished(
      impl_->deps.clock,
      [this, &handle] {
        try {
          return is_terminal_state(get_workload_status(handle).state);
        } catch (const WorkloadNotFoundError&) {
          return true;  // deleted (or garbage-collected): no new lines will come
        }
      },
      interrupted, follow_linger(options));
  follow_pod_log(handle, rank, filter, slice, options, on_line);
}

LogExportResult ClusterFabric::export_pod_logs(
    const WorkloadHandle& handle, const LogFilter& filter, const std::string& gcs_dest, int slice,
    const std::function<void(const ExportProgress&)>& progress) const {
  const ClusterConfig config = impl_->registry.get_cluster(handle.cluster);
  const auto current = impl_->current();
  check_ranks_exist(*current->workloads, handle, filter);
  return current->logs->export_logs(config, handle.workload_name, handle.namespace_, filter,
                                    gcs_dest, impl_->query_options(handle, slice), progress);
}

}  // namespace falcon
