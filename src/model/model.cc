#include "falcon/model.h"

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "falcon/accelerator_types.h"
#include "model/json_fields.h"

namespace falcon {
namespace {

using nlohmann::json;

using json_fields::optional_from_json;
using json_fields::optional_to_json;
using json_fields::read;
using json_fields::value_or;

}  // namespace

bool is_terminal_state(const std::string& state) {
  return state == kStateCompleted || state == kStateFailed;
}

bool is_valid_state(const std::string& state) {
  return state == kStateQueued || state == kStateRunning || state == kStateCompleted ||
         state == kStateFailed || state == kStateUnknown;
}

const char* to_string(DeviceClass device_class) {
  switch (device_class) {
    case DeviceClass::kTpu:
      return "tpu";
    case DeviceClass::kGpu:
      return "gpu";
    case DeviceClass::kCpu:
      return "cpu";
  }
  return "tpu";
}

std::optional<DeviceClass> parse_device_class(std::string_view text) {
  for (DeviceClass c : {DeviceClass::kTpu, DeviceClass::kGpu, DeviceClass::kCpu}) {
    if (text == to_string(c)) return c;
  }
  return std::nullopt;
}

const char* to_string(ProbeBackend backend) {
  return backend == ProbeBackend::kKube ? "kube" : "xpk";
}

std::optional<ProbeBackend> parse_probe_backend(std::string_view text) {
  for (ProbeBackend b : {ProbeBackend::kXpk, ProbeBackend::kKube}) {
    if (text == to_string(b)) return b;
  }
  return std::nullopt;
}

void to_json(json& j, const DeviceClass& v) { j = to_string(v); }
void from_json(const json& j, DeviceClass& v) {
  const auto parsed =
      j.is_string() ? parse_device_class(j.get_ref<const std::string&>()) : std::nullopt;
  if (!parsed) {
    throw json::type_error::create(302, "device_class must be \"tpu\", \"gpu\" or \"cpu\"", &j);
  }
  v = *parsed;
}

const AcceleratorSlot* ClusterConfig::find_slot(const std::string& accelerator_type) const {
  // Both sides in the canonical spelling; a name outside xpk's table is compared as it is.
  const std::string wanted =
      canonical_accelerator_type(accelerator_type).value_or(accelerator_type);
  for (const auto& slot : accelerator_slots) {
    if (canonical_accelerator_type(slot.type).value_or(slot.type) == wanted) return &slot;
  }
  return nullptr;
}

void to_json(json& j, const AcceleratorSlot& v) {
  j = json{{"type", v.type}, {"device_class", v.device_class}, {"priority", v.priority}};
}
void from_json(const json& j, AcceleratorSlot& v) {
  j.at("type").get_to(v.type);
  j.at("device_class").get_to(v.device_class);
  v.priority = read<int>(j.at("priority"));
}

void to_json(json& j, const ClusterConfig& v) {
  j = json{{"name", v.name},
           {"provider", v.provider},
           {"project", v.project},
           {"zone", v.zone},
           {"cluster_id", v.cluster_id},
           {"accelerator_slots", v.accelerator_slots},
           {"default_namespace", v.default_namespace},
           {"gcs_bucket", v.gcs_bucket},
           {"max_queue_depth", v.max_queue_depth},
           {"probe_timeout_s", v.probe_timeout_s},
           {"labels", v.labels},
           {"location", v.location},
           {"probe_backend", v.probe_backend ? json(to_string(*v.probe_backend)) : json(nullptr)}};
}
void from_json(const json& j, ClusterConfig& v) {
  j.at("name").get_to(v.name);
  j.at("provider").get_to(v.provider);
  j.at("project").get_to(v.project);
  j.at("zone").get_to(v.zone);
  j.at("cluster_id").get_to(v.cluster_id);
  j.at("accelerator_slots").get_to(v.accelerator_slots);
  j.at("default_namespace").get_to(v.default_namespace);
  j.at("gcs_bucket").get_to(v.gcs_bucket);
  v.max_queue_depth = read<int>(j.at("max_queue_depth"));
  v.probe_timeout_s = read<int>(j.at("probe_timeout_s"));
  v.labels = value_or<std::map<std::string, std::string>>(j, "labels", {});
  v.location = value_or<std::string>(j, "location", v.zone);
  v.probe_backend.reset();
  if (j.contains("probe_backend") && !j.at("probe_backend").is_null()) {
    const auto text = j.at("probe_backend").get<std::string>();
    v.probe_backend = parse_probe_backend(text);
    if (!v.probe_backend) {
      throw json::type_error::create(302, "probe_backend must be \"xpk\" or \"kube\"", &j);
    }
  }
}

void to_json(json& j, const AcceleratorCapacity& v) {
  j = json{{"flavor", v.flavor},
           {"device_type", v.device_type},
           {"accelerator", v.accelerator},
           {"resource", v.resource},
           {"nominal", v.nominal},
           {"used", v.used},
           {"largest_free_block", optional_to_json(v.largest_free_block)},
           {"largest_block", optional_to_json(v.largest_block)}};
}
void from_json(const json& j, AcceleratorCapacity& v) {
  j.at("flavor").get_to(v.flavor);
  v.device_type = value_or<std::string>(j, "device_type", "");
  v.accelerator = value_or<std::string>(j, "accelerator", "");
  v.resource = value_or<std::string>(j, "resource", "");
  j.at("nominal").get_to(v.nominal);
  j.at("used").get_to(v.used);
  v.largest_free_block = optional_from_json<double>(j, "largest_free_block");
  v.largest_block = optional_from_json<double>(j, "largest_block");
}

void to_json(json& j, const ClusterProbeResult& v) {
  j = json{{"cluster", v.cluster},
           {"reachable", v.reachable},
           {"queue_depth", optional_to_json(v.queue_depth)},
           {"running_count", optional_to_json(v.running_count)},
           {"error", optional_to_json(v.error)},
           {"probed_at", v.probed_at}};
  if (!v.capacity.empty()) j["capacity"] = v.capacity;
  if (v.capacity_error) j["capacity_error"] = *v.capacity_error;
  if (v.admission_delay_s) j["admission_delay_s"] = *v.admission_delay_s;
}
void from_json(const json& j, ClusterProbeResult& v) {
  j.at("cluster").get_to(v.cluster);
  j.at("reachable").get_to(v.reachable);
  v.queue_depth = optional_from_json<int>(j, "queue_depth");
  v.running_count = optional_from_json<int>(j, "running_count");
  v.error = optional_from_json<std::string>(j, "error");
  j.at("probed_at").get_to(v.probed_at);
  v.capacity = value_or<std::vector<AcceleratorCapacity>>(j, "capacity", {});
  v.capacity_error = optional_from_json<std::string>(j, "capacity_error");
  v.admission_delay_s = optional_from_json<double>(j, "admission_delay_s");
}

void to_json(json& j, const ClusterSignals& v) {
  j = json{{"queue_depth", optional_to_json(v.queue_depth)},
           {"running", optional_to_json(v.running)},
           {"drain_per_min", optional_to_json(v.drain_per_min)},
           {"recent_wait_s", optional_to_json(v.recent_wait_s)},
           {"admission_delay_s", optional_to_json(v.admission_delay_s)},
           {"health", optional_to_json(v.health)},
           {"health_samples", v.health_samples},
           {"latency_ms", optional_to_json(v.latency_ms)},
           {"slice_chips", optional_to_json(v.slice_chips)},
           {"free_chips", optional_to_json(v.free_chips)},
           {"nominal_chips", optional_to_json(v.nominal_chips)},
           {"largest_free_block", optional_to_json(v.largest_free_block)},
           {"fragmentation", optional_to_json(v.fragmentation)},
           {"largest_block", optional_to_json(v.largest_block)}};
}
void from_json(const json& j, ClusterSignals& v) {
  v.queue_depth = optional_from_json<int>(j, "queue_depth");
  v.running = optional_from_json<int>(j, "running");
  v.drain_per_min = optional_from_json<double>(j, "drain_per_min");
  v.recent_wait_s = optional_from_json<double>(j, "recent_wait_s");
  v.admission_delay_s = optional_from_json<double>(j, "admission_delay_s");
  v.health = optional_from_json<double>(j, "health");
  v.health_samples = value_or<int>(j, "health_samples", 0);
  v.latency_ms = optional_from_json<double>(j, "latency_ms");
  v.slice_chips = optional_from_json<double>(j, "slice_chips");
  v.free_chips = optional_from_json<double>(j, "free_chips");
  v.nominal_chips = optional_from_json<double>(j, "nominal_chips");
  v.largest_free_block = optional_from_json<double>(j, "largest_free_block");
  v.fragmentation = optional_from_json<double>(j, "fragmentation");
  v.largest_block = optional_from_json<double>(j, "largest_block");
}

void to_json(json& j, const SignalTerm& v) {
  j = json{{"signal", v.signal},
           {"value", optional_to_json(v.value)},
           {"normalized", optional_to_json(v.normalized)},
           {"weight", v.weight},
           {"contribution", v.contribution}};
}
void from_json(const json& j, SignalTerm& v) {
  j.at("signal").get_to(v.signal);
  v.value = optional_from_json<double>(j, "value");
  v.normalized = optional_from_json<double>(j, "normalized");
  v.weight = value_or<double>(j, "weight", 0.0);
  v.contribution = value_or<double>(j, "contribution", 0.0);
}

void to_json(json& j, const CandidateScore& v) {
  j = json{{"cluster", v.cluster},
           {"priority", v.priority},
           {"max_queue_depth", v.max_queue_depth},
           {"eligible", v.eligible},
           {"skip_reason", v.skip_reason.empty() ? json(nullptr) : json(v.skip_reason)},
           {"signals", v.signals},
           {"terms", v.terms},
           {"total", optional_to_json(v.total)},
           {"rank", v.rank},
           {"verdict", v.verdict}};
}
void from_json(const json& j, CandidateScore& v) {
  j.at("cluster").get_to(v.cluster);
  v.priority = read<int>(j.at("priority"));
  v.max_queue_depth = value_or<int>(j, "max_queue_depth", 5);
  j.at("eligible").get_to(v.eligible);
  v.skip_reason = optional_from_json<std::string>(j, "skip_reason").value_or("");
  v.signals = value_or<ClusterSignals>(j, "signals", {});
  v.terms = value_or<std::vector<SignalTerm>>(j, "terms", {});
  v.total = optional_from_json<double>(j, "total");
  v.rank = value_or<int>(j, "rank", 0);
  v.verdict = value_or<std::string>(j, "verdict", "");
}

void to_json(json& j, const ClusterSelection& v) {
  j = json{{"selected_cluster", v.selected_cluster},
           {"accelerator", v.accelerator},
           {"candidates", v.candidates},
           {"probe_results", v.probe_results},
           {"reason", v.reason},
           {"decided_at", v.decided_at},
           {"selection_id", v.selection_id},
           {"policy", v.policy},
           {"scores", v.scores}};
  if (!v.not_recorded.empty()) j["not_recorded"] = v.not_recorded;
}
void from_json(const json& j, ClusterSelection& v) {
  j.at("selected_cluster").get_to(v.selected_cluster);
  j.at("accelerator").get_to(v.accelerator);
  j.at("candidates").get_to(v.candidates);
  j.at("probe_results").get_to(v.probe_results);
  j.at("reason").get_to(v.reason);
  j.at("decided_at").get_to(v.decided_at);
  v.selection_id = value_or<std::int64_t>(j, "selection_id", 0);
  v.policy = value_or<std::string>(j, "policy", "");
  v.scores = value_or<std::vector<CandidateScore>>(j, "scores", {});
  v.not_recorded = value_or<std::string>(j, "not_recorded", "");
}

void to_json(json& j, const WorkloadSpec& v) {
  j = json{{"name", v.name},
           {"docker_image", v.docker_image},
           {"command", v.command},
           {"accelerator_type", v.accelerator_type},
           {"priority", v.priority},
           {"env", v.env},
           {"namespace", optional_to_json(v.namespace_)},
           {"extra_args", v.extra_args}};
}
void from_json(const json& j, WorkloadSpec& v) {
  j.at("name").get_to(v.name);
  j.at("docker_image").get_to(v.docker_image);
  j.at("command").get_to(v.command);
  j.at("accelerator_type").get_to(v.accelerator_type);
  v.priority = value_or<std::string>(j, "priority", "medium");
  v.env = value_or<std::map<std::string, std::string>>(j, "env", {});
  v.namespace_ = optional_from_json<std::string>(j, "namespace");
  v.extra_args = value_or<std::vector<std::string>>(j, "extra_args", {});
}

void to_json(json& j, const WorkloadHandle& v) {
  j = json{{"workload_name", v.workload_name},
           {"cluster", v.cluster},
           {"namespace", v.namespace_},
           {"submitted_at", v.submitted_at}};
}
void from_json(const json& j, WorkloadHandle& v) {
  j.at("workload_name").get_to(v.workload_name);
  j.at("cluster").get_to(v.cluster);
  j.at("namespace").get_to(v.namespace_);
  j.at("submitted_at").get_to(v.submitted_at);
}

void to_json(json& j, const WorkloadStatus& v) {
  j = json{{"workload_name", v.workload_name},
           {"state", v.state},
           {"start_time", optional_to_json(v.start_time)},
           {"end_time", optional_to_json(v.end_time)},
           {"exit_code", optional_to_json(v.exit_code)}};
}
void from_json(const json& j, WorkloadStatus& v) {
  j.at("workload_name").get_to(v.workload_name);
  j.at("state").get_to(v.state);
  v.start_time = optional_from_json<std::string>(j, "start_time");
  v.end_time = optional_from_json<std::string>(j, "end_time");
  v.exit_code = optional_from_json<int>(j, "exit_code");
}

void to_json(json& j, const WorkloadInfo& v) {
  j = json{{"name", v.name},
           {"state", v.state},
           {"accelerator_type", v.accelerator_type},
           {"start_time", optional_to_json(v.start_time)}};
}
void from_json(const json& j, WorkloadInfo& v) {
  j.at("name").get_to(v.name);
  j.at("state").get_to(v.state);
  j.at("accelerator_type").get_to(v.accelerator_type);
  v.start_time = optional_from_json<std::string>(j, "start_time");
}

void to_json(json& j, const LogFilter& v) {
  j = json{{"ranks", optional_to_json(v.ranks)},
           {"since", optional_to_json(v.since)},
           {"grep", optional_to_json(v.grep)},
           {"tail_lines", optional_to_json(v.tail_lines)}};
}
void from_json(const json& j, LogFilter& v) {
  v.ranks = optional_from_json<std::vector<int>>(j, "ranks");
  v.since = optional_from_json<std::string>(j, "since");
  v.grep = optional_from_json<std::string>(j, "grep");
  v.tail_lines = optional_from_json<int>(j, "tail_lines");
}

void to_json(json& j, const LogExportResult& v) {
  json uris = json::object();
  for (const auto& [rank, uri] : v.gcs_uris) uris[std::to_string(rank)] = uri;
  j = json{{"workload_name", v.workload_name},
           {"cluster", v.cluster},
           {"exported_ranks", v.exported_ranks},
           {"gcs_uris", std::move(uris)},
           {"exported_at", v.exported_at}};
}
void from_json(const json& j, LogExportResult& v) {
  j.at("workload_name").get_to(v.workload_name);
  j.at("cluster").get_to(v.cluster);
  v.exported_ranks = read<std::vector<int>>(j.at("exported_ranks"));
  v.gcs_uris.clear();
  for (const auto& [key, uri] : j.at("gcs_uris").items()) {
    std::size_t used = 0;
    int rank = -1;
    try {
      rank = std::stoi(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || rank < 0) {
      throw json::type_error::create(302, "gcs_uris key '" + key + "' is not a rank number", &j);
    }
    v.gcs_uris[rank] = uri.get<std::string>();
  }
  j.at("exported_at").get_to(v.exported_at);
}

void to_json(nlohmann::json& j, const MonitoredProbe& v) {
  j = nlohmann::json{{"result", v.result},
                     {"backend", v.backend},
                     {"duration_ms", v.duration_ms},
                     {"age_ms", v.age_ms},
                     {"consecutive_failures", v.consecutive_failures},
                     {"next_probe_at", v.next_probe_at.empty() ? nlohmann::json(nullptr)
                                                               : nlohmann::json(v.next_probe_at)},
                     {"from_cache", v.from_cache}};
}

void from_json(const nlohmann::json& j, MonitoredProbe& v) {
  v.result = j.at("result").get<ClusterProbeResult>();
  v.backend = j.value("backend", std::string());
  v.duration_ms = j.value("duration_ms", std::int64_t{0});
  v.age_ms = j.value("age_ms", std::int64_t{0});
  v.consecutive_failures = j.value("consecutive_failures", 0);
  const auto next = j.find("next_probe_at");
  v.next_probe_at = next == j.end() || next->is_null() ? std::string() : next->get<std::string>();
  v.from_cache = j.value("from_cache", false);
}

}  // namespace falcon
