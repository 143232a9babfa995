#include "fleet/manager.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/xpk_accelerators.h"
#include "fleet/device_types.h"
#include "fleet/pod_logs.h"

namespace falcon::fleet {
namespace {

using nlohmann::json;

constexpr const char* kApiVersion = "kueue.x-k8s.io/v1beta2";
constexpr const char* kClusterQueue = "cluster-queue";
constexpr const char* kAcceleratorLabel = "falcon.dev/accelerator-type";
constexpr const char* kTpuAccelerator = "cloud.google.com/gke-tpu-accelerator";
constexpr const char* kTpuTopology = "cloud.google.com/gke-tpu-topology";
constexpr const char* kGpuAccelerator = "cloud.google.com/gke-accelerator";
constexpr std::size_t kMaxNominated = 20;  // Kueue's MaxItems on status.nominatedClusterNames
constexpr std::int64_t kSecond = 1'000'000'000;

// xpk's PriorityClasses (very-low .. very-high) and their values.
constexpr std::pair<const char*, int> kPriorityClasses[] = {
    {"very-low", 100}, {"low", 250}, {"medium", 500}, {"high", 750}, {"very-high", 1000}};

std::optional<int> class_value(const std::string& name) {
  for (const auto& [n, v] : kPriorityClasses) {
    if (name == n) return v;
  }
  return std::nullopt;
}

// The class of a bare spec.priority: the highest whose value it reaches (very-low below all).
std::string class_for(long long priority) {
  std::string out = kPriorityClasses[0].first;
  for (const auto& [n, v] : kPriorityClasses) {
    if (priority >= v) out = n;
  }
  return out;
}

std::string uuid_of(std::uint64_t seed) {
  const std::uint64_t a = mix64(seed);
  const std::uint64_t b = mix64(seed ^ 0x9e3779b97f4a7c15ull);
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:x}{:03x}-{:012x}", a >> 32, (a >> 16) & 0xFFFF,
                     a & 0xFFF, 8 + (b >> 62), (b >> 48) & 0xFFF, b & 0xFFFFFFFFFFFFull);
}

json condition(const std::string& type, bool status, const std::string& reason,
               const std::string& message, std::int64_t time_ns) {
  return {{"type", type},
          {"status", status ? "True" : "False"},
          {"reason", reason},
          {"message", message},
          {"lastTransitionTime", format_k8s_time(time_ns)},
          {"observedGeneration", 1}};
}

json metadata(const std::string& name, const std::string& uid, std::uint64_t resource_version,
              std::int64_t created_ns) {
  return {{"name", name},
          {"uid", uid},
          {"resourceVersion", std::to_string(resource_version)},
          {"generation", 1},
          {"creationTimestamp", format_k8s_time(created_ns)}};
}

[[noreturn]] void invalid(const std::string& name, const std::string& field,
                          const std::string& what) {
  throw ManagerError(
      422, "Invalid",
      fmt::format("Workload.kueue.x-k8s.io \"{}\" is invalid: {}: {}", name, field, what), field);
}

// A lowercase RFC 1123 label: what a copy's name must be on its worker (a JobSet's name).
bool is_label(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return alnum(s.front()) && alnum(s.back()) &&
         std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-'; });
}

// A map of strings at `field` of `object`, or empty; 422 when it is something else.
std::map<std::string, std::string> string_map(const json& object, const char* key,
                                              const std::string& name, const std::string& field) {
  std::map<std::string, std::string> out;
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return out;
  if (!it->is_object()) invalid(name, field, "Invalid value: must be a map of strings");
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      invalid(name, fmt::format("{}[{}]", field, k), "Invalid value: must be a string");
    }
    out[k] = v.get<std::string>();
  }
  return out;
}

// Chips of a TPU topology ("2x2x4" -> 16); 0 when it is not one.
int topology_chips(const std::string& topology) {
  int chips = 1;
  std::size_t i = 0;
  while (i < topology.size()) {
    std::size_t j = topology.find('x', i);
    if (j == std::string::npos) j = topology.size();
    const std::string part = topology.substr(i, j - i);
    if (part.empty() || part.size() > 4 ||
        part.find_first_not_of("0123456789") != std::string::npos) {
      return 0;
    }
    chips *= std::stoi(part);
    if (chips <= 0 || chips > 1'000'000) return 0;
    i = j + 1;
    if (j + 1 == topology.size()) return 0;  // a trailing 'x'
  }
  return topology.empty() ? 0 : chips;
}

// The xpk type the pod set's nodeSelector names (the shortest of the table's names for it:
// "v4-32" rather than "v4-2x2x4"); 422 naming the selector otherwise.
std::string type_from_selector(const std::map<std::string, std::string>& selector, int gpus_per_pod,
                               const std::string& name, const std::string& field) {
  const auto tpu = selector.find(kTpuAccelerator);
  const auto gpu = selector.find(kGpuAccelerator);
  if (tpu == selector.end() && gpu == selector.end()) {
    invalid(name, field,
            fmt::format("Required value: neither the label {} nor a node selector {} (with {}) "
                        "or {} says which accelerator the copies need",
                        kAcceleratorLabel, kTpuAccelerator, kTpuTopology, kGpuAccelerator));
  }
  std::string best;
  if (tpu != selector.end()) {
    const auto topology = selector.find(kTpuTopology);
    const std::string tfield = fmt::format("{}[{}]", field, kTpuTopology);
    if (topology == selector.end()) {
      invalid(name, tfield, fmt::format("Required value: {} needs a topology", tpu->second));
    }
    const int chips = topology_chips(topology->second);
    if (chips == 0) {
      invalid(
          name, tfield,
          fmt::format("Invalid value: \"{}\": not a TPU topology like 2x2x4", topology->second));
    }
    for (const tools::XpkSystem& t : tools::xpk_systems()) {
      if (t.gke_accelerator == tpu->second && t.vms_per_slice * t.chips_per_vm == chips &&
          (best.empty() || t.name.size() < best.size())) {
        best = t.name;
      }
    }
    if (best.empty()) {
      invalid(name, tfield,
              fmt::format("Invalid value: \"{}\": no accelerator type of xpk's table is {} with "
                          "{} chips",
                          topology->second, tpu->second, chips));
    }
    return best;
  }
  for (const tools::XpkSystem& t : tools::xpk_systems()) {
    if (t.gke_accelerator != gpu->second) continue;
    if (gpus_per_pod > 0 && t.chips_per_vm != gpus_per_pod) continue;
    if (best.empty() || t.name.size() < best.size()) best = t.name;
  }
  if (best.empty()) {
    invalid(name, fmt::format("{}[{}]", field, kGpuAccelerator),
            fmt::format("Invalid value: \"{}\": no GPU type of xpk's table{}", gpu->second,
                        gpus_per_pod > 0 ? fmt::format(" with {} per node", gpus_per_pod) : ""));
  }
  return best;
}

}  // namespace

struct MultiKueueManager::Worker {
  std::string name;
  std::string uid;
  std::uint64_t resource_version = 0;
  bool active = true;
  std::string message = "Connected";  // why it is not active, when it is not
  std::int64_t transition_ns = 0;
};

struct MultiKueueManager::Workload {
  std::string name;
  std::string namespace_;
  std::string uid;
  std::uint64_t resource_version = 0;
  std::int64_t created_ns = 0;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  json spec;                // as given, with Kueue's defaults
  std::string device_type;  // xpk's name ("v4-32")
  std::string resource;     // google.com/tpu | nvidia.com/gpu | cpu
  CreateRequest copy;       // what each copy is made of (device_type: the worker's spelling)

  // Status.
  std::vector<std::string> nominated;
  std::optional<std::string> cluster_name;
  std::string check_state = "Pending";
  std::string check_message;
  std::int64_t check_ns = 0;
  std::int64_t admitted_ns = -1;  // when clusterName was set
  std::int64_t finished_ns = -1;
  bool failed = false;
  std::string finish_message;

  // Dispatch and counters.
  std::int64_t round_start_ns = -1;  // incremental: the current round's start
  std::int64_t first_nominated_ns = -1;
  std::int64_t winner_reserved_ns = -1;  // the winning copy's reservation on its worker
  std::int64_t winner_finished_ns = -1;  // and its end there
  int winner_evictions = 0;              // the winning copy's evictions when it won
  int evicted_in_workers = 0;            // admissions taken back after a worker evicted it
  std::int64_t deleted_ns = -1;
  std::uint64_t remote_created = 0;
  std::uint64_t remote_deleted = 0;

  struct Copy {
    enum class Kind {
      kSimulated,     // a workload of the worker's simulation
      kInadmissible,  // the worker has no node pool for the type: never admitted
      kBlocked,       // the name is taken there by a workload the manager did not make
    };
    Kind kind = Kind::kSimulated;
    std::uint64_t sequence = 0;
    bool delete_owed = false;  // to delete once the worker is active again
  };
  std::map<std::string, Copy> copies;  // worker -> its copy

  std::string key() const { return namespace_ + "/" + name; }
};

MultiKueueManager::MultiKueueManager(FleetSimulator& simulator, ManagerSpec spec)
    : sim_(simulator), spec_(std::move(spec)) {
  start_ns_ = sim_.clock().now_ns();
  last_step_ns_ = start_ns_;
  resource_version_ = 2;  // the AdmissionCheck (1) and the MultiKueueConfig (2)
  for (const std::string& name : spec_.workers) {
    auto w = std::make_unique<Worker>();
    w->name = name;
    w->uid = uuid_of(hash_string("mkc/" + name));
    w->resource_version = ++resource_version_;
    w->transition_ns = start_ns_;
    workers_.push_back(std::move(w));
  }
}

MultiKueueManager::~MultiKueueManager() { close_watches(); }

std::int64_t MultiKueueManager::now_ns() const { return sim_.clock().now_ns(); }

// --- Reading.

std::vector<json> MultiKueueManager::admission_checks() {
  json check = {
      {"apiVersion", kApiVersion},
      {"kind", "AdmissionCheck"},
      {"metadata",
       metadata(spec_.admission_check, uuid_of(hash_string("ac/" + spec_.config)), 1, start_ns_)},
      {"spec",
       {{"controllerName", "kueue.x-k8s.io/multikueue"},
        {"parameters",
         {{"apiGroup", "kueue.x-k8s.io"}, {"kind", "MultiKueueConfig"}, {"name", spec_.config}}}}},
      {"status",
       {{"conditions", json::array({condition("Active", true, "Active",
                                              "The admission check is active", start_ns_)})}}}};
  return {check};
}

std::vector<json> MultiKueueManager::multikueue_configs() {
  return {{{"apiVersion", kApiVersion},
           {"kind", "MultiKueueConfig"},
           {"metadata",
            metadata(spec_.config, uuid_of(hash_string("mkcfg/" + spec_.config)), 2, start_ns_)},
           {"spec", {{"clusters", spec_.workers}}}}};
}

json MultiKueueManager::cluster_object(const Worker& w) const {
  return {
      {"apiVersion", kApiVersion},
      {"kind", "MultiKueueCluster"},
      {"metadata", metadata(w.name, w.uid, w.resource_version, start_ns_)},
      {"spec",
       {{"clusterSource",
         {{"kubeConfig", {{"locationType", "Secret"}, {"location", w.name + "-kubeconfig"}}}}}}},
      {"status",
       {{"conditions",
         json::array({condition("Active", w.active, w.active ? "Active" : "ClientConnectionFailed",
                                w.message, w.transition_ns)})}}}};
}

std::vector<json> MultiKueueManager::multikueue_clusters() {
  std::vector<json> out;
  sim_.with_workers([&](WorkerAccess&) {
    for (const auto& w : workers_) out.push_back(cluster_object(*w));
  });
  return out;
}

std::vector<json> MultiKueueManager::workloads(const std::string& namespace_) {
  sim_.with_workers([](WorkerAccess&) {});
  std::vector<json> out;
  std::lock_guard lock(events_mu_);
  for (const std::string& key : order_) {
    const json& o = *current_.at(key);
    if (namespace_.empty() || o["metadata"]["namespace"] == namespace_) out.push_back(o);
  }
  return out;
}

json MultiKueueManager::workload(const std::string& namespace_, const std::string& name) {
  sim_.with_workers([](WorkerAccess&) {});
  std::lock_guard lock(events_mu_);
  const auto it = current_.find(namespace_ + "/" + name);
  if (it == current_.end()) {
    throw ManagerError(404, "NotFound",
                       fmt::format("workloads.kueue.x-k8s.io \"{}\" not found", name));
  }
  return *it->second;
}

std::uint64_t MultiKueueManager::resource_version() {
  sim_.with_workers([](WorkerAccess&) {});
  std::lock_guard lock(events_mu_);
  return resource_version_;
}

// --- Writing.

json MultiKueueManager::create_workload(const std::string& namespace_, const json& body) {
  std::unique_ptr<Workload> w;
  try {
    w = parse_workload(namespace_, body);
  } catch (const json::exception& e) {
    throw ManagerError(400, "BadRequest",
                       fmt::format("the Workload does not decode: {}", e.what()));
  }
  const std::string name = w->name;
  json created;
  sim_.with_workers([&](WorkerAccess& access) {
    if (find(namespace_, name)) {
      throw ManagerError(409, "AlreadyExists",
                         fmt::format("workloads.kueue.x-k8s.io \"{}\" already exists", name));
    }
    w->uid = uuid_of(hash_string(w->key()) + next_uid_++);
    w->created_ns = access.now();
    w->check_ns = access.now();
    Workload& ref = *w;
    live_.push_back(std::move(w));
    pending_.push_back(&ref);
    publish(ref, "ADDED");
    std::lock_guard lock(events_mu_);
    created = *current_.at(ref.key());
  });
  return created;
}

std::unique_ptr<MultiKueueManager::Workload> MultiKueueManager::parse_workload(
    const std::string& namespace_, const json& body) const {
  if (!body.is_object()) throw ManagerError(400, "BadRequest", "the body must be a JSON object");
  if (body.contains("kind") && body["kind"] != "Workload") {
    throw ManagerError(400, "BadRequest",
                       fmt::format("the object is a {}, not a Workload", body["kind"].dump()));
  }
  const json meta = body.value("metadata", json::object());
  if (!meta.is_object()) throw ManagerError(400, "BadRequest", "metadata must be an object");
  if (meta.contains("namespace") && meta["namespace"] != namespace_) {
    throw ManagerError(400, "BadRequest",
                       "the namespace of the provided object does not match the namespace sent "
                       "on the request");
  }
  auto w = std::make_unique<Workload>();
  w->namespace_ = namespace_;
  w->name = meta.value("name", "");
  const std::string generate = meta.value("generateName", "");
  if (w->name.empty() && generate.empty()) {
    invalid("", "metadata.name", "Required value: name or generateName is required");
  }
  if (w->name.empty()) {
    static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    std::uint64_t h = mix64(hash_string(generate + namespace_) + generated_names_++);
    w->name = generate;
    for (int i = 0; i < 5; ++i, h /= 27) w->name += kAlphabet[h % 27];
  }
  if (!is_label(w->name)) {
    invalid(w->name, "metadata.name",
            fmt::format("Invalid value: \"{}\": a lowercase RFC 1123 label must consist of lower "
                        "case alphanumeric characters or '-', and must start and end with an "
                        "alphanumeric character, at most 63 characters",
                        w->name));
  }
  const std::string& name = w->name;
  w->labels = string_map(meta, "labels", name, "metadata.labels");
  w->annotations = string_map(meta, "annotations", name, "metadata.annotations");

  const auto spec_it = body.find("spec");
  if (spec_it == body.end() || !spec_it->is_object()) {
    invalid(name, "spec.podSets", "Required value");
  }
  w->spec = *spec_it;
  json& spec = w->spec;
  if (spec.contains("queueName") && !spec["queueName"].is_string()) {
    invalid(name, "spec.queueName", "Invalid value: must be a string");
  }
  // Priority: a class of xpk's and/or a number.
  std::optional<long long> priority;
  if (spec.contains("priority") && !spec["priority"].is_null()) {
    if (!spec["priority"].is_number_integer()) {
      invalid(name, "spec.priority", "Invalid value: must be an integer");
    }
    priority = spec["priority"].get<long long>();
  }
  std::string klass;
  if (spec.contains("priorityClassName") && !spec["priorityClassName"].is_null()) {
    klass = spec["priorityClassName"].is_string() ? spec["priorityClassName"].get<std::string>()
                                                  : std::string("?");
    if (!class_value(klass)) {
      invalid(name, "spec.priorityClassName",
              fmt::format("Unsupported value: \"{}\": supported values: \"very-low\", \"low\", "
                          "\"medium\", \"high\", \"very-high\"",
                          klass));
    }
  } else {
    klass = priority ? class_for(*priority) : "medium";
  }
  spec["priorityClassName"] = klass;
  spec["priority"] = priority.value_or(*class_value(klass));
  spec["priorityClassSource"] = "scheduling.k8s.io/priorityclass";
  if (!spec.contains("active")) spec["active"] = true;

  // The pod set.
  if (!spec.contains("podSets") || !spec["podSets"].is_array() || spec["podSets"].empty()) {
    invalid(name, "spec.podSets", "Required value: one pod set");
  }
  if (spec["podSets"].size() > 1) {
    invalid(name, "spec.podSets",
            fmt::format("Too many: {}: the fleet's manager maps one pod set to its copies",
                        spec["podSets"].size()));
  }
  json& pod_set = spec["podSets"][0];
  if (!pod_set.is_object()) invalid(name, "spec.podSets[0]", "Invalid value: must be an object");
  if (!pod_set.contains("name")) pod_set["name"] = "main";
  if (!pod_set.contains("count")) pod_set["count"] = 1;
  if (!pod_set["count"].is_number_integer() || pod_set["count"].get<long long>() < 1 ||
      pod_set["count"].get<long long>() > 100'000) {
    invalid(name, "spec.podSets[0].count",
            fmt::format("Invalid value: {}: must be a number of pods from 1 to 100000",
                        pod_set["count"].dump()));
  }
  const int count = pod_set["count"].get<int>();
  const json tmpl = pod_set.value("template", json::object());
  const json pod_spec = tmpl.is_object() ? tmpl.value("spec", json::object()) : json::object();
  if (!pod_spec.is_object()) {
    invalid(name, "spec.podSets[0].template.spec", "Invalid value: must be an object");
  }
  const auto selector =
      string_map(pod_spec, "nodeSelector", name, "spec.podSets[0].template.spec.nodeSelector");
  const json containers = pod_spec.value("containers", json::array());
  if (!containers.is_array() || containers.empty() || !containers[0].is_object()) {
    invalid(name, "spec.podSets[0].template.spec.containers", "Required value");
  }
  const json& container = containers[0];
  int gpus_per_pod = 0;
  if (const json limits = container.value("resources", json::object()).value("limits", json());
      limits.is_object() && limits.contains("nvidia.com/gpu")) {
    const json& g = limits["nvidia.com/gpu"];
    if (g.is_number_integer()) gpus_per_pod = g.get<int>();
    if (g.is_string()) gpus_per_pod = std::atoi(g.get<std::string>().c_str());
  }
  std::map<std::string, std::string> env;
  if (container.contains("env")) {
    const json& list = container["env"];
    if (!list.is_array()) {
      invalid(name, "spec.podSets[0].template.spec.containers[0].env",
              "Invalid value: must be a list");
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string field =
          fmt::format("spec.podSets[0].template.spec.containers[0].env[{}]", i);
      const json& e = list[i];
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
        invalid(name, field + ".name", "Required value");
      }
      if (e.contains("valueFrom")) {
        invalid(name, field + ".valueFrom",
                "Forbidden: the copies carry literal values only (value)");
      }
      const json value = e.value("value", json(""));
      if (!value.is_string()) invalid(name, field + ".value", "Invalid value: must be a string");
      env[e["name"].get<std::string>()] = value.get<std::string>();
    }
  }

  // The device type: the label first, else the node selector.
  if (const auto label = w->labels.find(kAcceleratorLabel); label != w->labels.end()) {
    const auto canonical = tools::xpk_name_for(label->second);
    if (!canonical) {
      invalid(name, fmt::format("metadata.labels[{}]", kAcceleratorLabel),
              fmt::format("Invalid value: \"{}\": not an accelerator type of xpk {} (like v4-32 "
                          "or tpu-v4-32)",
                          label->second, tools::kXpkTableVersion));
    }
    w->device_type = *canonical;
  } else {
    w->device_type = type_from_selector(selector, gpus_per_pod, name,
                                        "spec.podSets[0].template.spec.nodeSelector");
  }
  const DeviceClass device_class = classify_device(w->device_type, false);
  const int per_slice =
      workers_per_slice(w->device_type, device_class, sim_.config().workers_per_slice);
  int slices = 1;
  if (device_class != DeviceClass::kGpu) {
    if (count % per_slice != 0) {
      invalid(name, "spec.podSets[0].count",
              fmt::format("Invalid value: {}: must be a multiple of the {} pods of one {} slice",
                          count, per_slice, w->device_type));
    }
    slices = count / per_slice;
    if (slices > 1024) {
      invalid(name, "spec.podSets[0].count",
              fmt::format("Invalid value: {}: {} slices of {}; at most 1024", count, slices,
                          w->device_type));
    }
  }
  w->resource = accelerator_resource(device_class);

  CreateRequest& copy = w->copy;
  copy.workload = name;
  copy.namespace_ = namespace_;
  copy.tpu_type_flag = device_class == DeviceClass::kTpu;
  copy.num_slices = slices;
  copy.num_nodes = device_class == DeviceClass::kGpu ? count : 1;
  copy.priority = klass;
  copy.env = std::move(env);
  copy.docker_name = container.value("name", json("jax-tpu")).is_string()
                         ? container.value("name", std::string("jax-tpu"))
                         : "jax-tpu";
  copy.docker_image = container.value("image", json("")).is_string()
                          ? container.value("image", std::string())
                          : std::string();
  std::string command;
  for (const char* key : {"command", "args"}) {
    if (!container.contains(key) || !container[key].is_array()) continue;
    for (const json& part : container[key]) {
      if (!part.is_string()) continue;
      command += (command.empty() ? "" : " ") + part.get<std::string>();
    }
  }
  copy.command = command;
  return w;
}

json MultiKueueManager::delete_workload(const std::string& namespace_, const std::string& name) {
  json deleted;
  sim_.with_workers([&](WorkerAccess& access) {
    Workload* w = find(namespace_, name);
    if (!w) {
      throw ManagerError(404, "NotFound",
                         fmt::format("workloads.kueue.x-k8s.io \"{}\" not found", name));
    }
    std::vector<std::string> holders;
    for (const auto& [worker, copy] : w->copies) holders.push_back(worker);
    for (const std::string& worker : holders) delete_copy(*w, worker, access);
    w->deleted_ns = access.now();
    std::erase(pending_, w);
    publish(*w, "DELETED");
    {
      std::lock_guard lock(events_mu_);
      deleted = *events_.back().object;
    }
    const auto it = std::find_if(live_.begin(), live_.end(),
                                 [&](const std::unique_ptr<Workload>& p) { return p.get() == w; });
    gone_.push_back(std::move(*it));
    live_.erase(it);
  });
  return deleted;
}

json MultiKueueManager::patch_workload_status(const std::string& namespace_,
                                              const std::string& name,
                                              const std::string& content_type,
                                              const std::string& patch_text) {
  const std::string type = content_type.substr(0, content_type.find(';'));
  const bool merge = type == "application/merge-patch+json";
  if (!merge && type != "application/json-patch+json") {
    throw ManagerError(415, "UnsupportedMediaType",
                       fmt::format("the body of the request was in an unknown format - accepted "
                                   "media types include: application/json-patch+json, "
                                   "application/merge-patch+json (got {})",
                                   type.empty() ? "none" : type));
  }
  const json patch = json::parse(patch_text, nullptr, false);
  if (patch.is_discarded() || (merge && !patch.is_object()) || (!merge && !patch.is_array())) {
    throw ManagerError(400, "BadRequest",
                       merge ? "the merge patch must be a JSON object"
                             : "the JSON patch must be an array of operations");
  }
  json result;
  sim_.with_workers([&](WorkerAccess& access) {
    Workload* w = find(namespace_, name);
    if (!w) {
      throw ManagerError(404, "NotFound",
                         fmt::format("workloads.kueue.x-k8s.io \"{}\" not found", name));
    }
    json current;
    {
      std::lock_guard lock(events_mu_);
      current = *current_.at(w->key());
    }
    json patched;
    try {
      patched = merge ? [&] {
        json copy = current;
        copy.merge_patch(patch);
        return copy;
      }()
                      : current.patch(patch);
    } catch (const json::exception& e) {
      throw ManagerError(422, "Invalid",
                         fmt::format("the JSON patch cannot be applied: {}", e.what()));
    }
    // metadata.resourceVersion: a precondition.
    const json rv = patched.value("metadata", json::object()).value("resourceVersion", json());
    if (!rv.is_null() && !rv.is_string()) {
      throw ManagerError(400, "BadRequest",
                         fmt::format("json: cannot unmarshal {} into Go struct field "
                                     "ObjectMeta.metadata.resourceVersion of type string",
                                     rv.type_name()));
    }
    if (rv.is_string() && rv != current["metadata"]["resourceVersion"]) {
      throw ManagerError(409, "Conflict",
                         fmt::format("Operation cannot be fulfilled on workloads.kueue.x-k8s.io "
                                     "\"{}\": the object has been modified; please apply your "
                                     "changes to the latest version and try again",
                                     name));
    }
    // The status subresource: spec and metadata changes are dropped; in status, only the
    // nominations may change.
    json status = patched.value("status", json::object());
    if (!status.is_object()) invalid(name, "status", "Invalid value: must be an object");
    json nominated = status.value("nominatedClusterNames", json());
    json rest = status;
    rest.erase("nominatedClusterNames");
    json before = current["status"];
    before.erase("nominatedClusterNames");
    if (rest != before) {
      invalid(name, "status",
              "Forbidden: the fleet's manager accepts changes to status.nominatedClusterNames "
              "only");
    }
    std::vector<std::string> names;
    if (!nominated.is_null()) {
      if (!nominated.is_array()) {
        invalid(name, "status.nominatedClusterNames",
                fmt::format("Invalid value: \"{}\": status.nominatedClusterNames in body must be "
                            "of type array",
                            nominated.type_name()));
      }
      for (const json& n : nominated) {
        if (!n.is_string()) {
          invalid(name, "status.nominatedClusterNames",
                  "Invalid value: status.nominatedClusterNames in body must be an array of "
                  "strings");
        }
        names.push_back(n.get<std::string>());
      }
    }
    if (names.size() > kMaxNominated) {
      invalid(name, "status.nominatedClusterNames",
              fmt::format("Too many: {}: must have at most {} items", names.size(), kMaxNominated));
    }
    if (w->cluster_name && !names.empty()) {
      invalid(name, "status",
              "Invalid value: \"object\": clusterName and nominatedClusterNames are mutually "
              "exclusive");
    }
    if (names != w->nominated) {
      w->nominated = names;
      if (!names.empty() && w->first_nominated_ns < 0) w->first_nominated_ns = access.now();
      publish(*w, "MODIFIED");
    }
    std::lock_guard lock(events_mu_);
    result = *current_.at(w->key());
  });
  return result;
}

// --- The model, stepped by the simulator.

MultiKueueManager::Workload* MultiKueueManager::find(const std::string& namespace_,
                                                     const std::string& name) {
  for (const auto& w : live_) {
    if (w->name == name && w->namespace_ == namespace_) return w.get();
  }
  return nullptr;
}

int MultiKueueManager::worker_index(const std::string& worker) const {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i]->name == worker) return static_cast<int>(i);
  }
  return -1;
}

bool MultiKueueManager::active(const std::string& worker) const {
  const int i = worker_index(worker);
  return i >= 0 && workers_[static_cast<std::size_t>(i)]->active;
}

std::optional<std::string> MultiKueueManager::offered_as(const std::string& worker,
                                                         const std::string& canonical) const {
  for (const auto& [type, slots] : sim_.cluster(worker).capacity) {
    if (tools::xpk_name_for(type) == canonical) return type;
  }
  return std::nullopt;
}

bool MultiKueueManager::busy() const { return !pending_.empty() || owed_ > 0; }

std::int64_t MultiKueueManager::next_event_ns(const WorkerAccess& access) const {
  std::int64_t next = WorkerAccess::kNeverNs;
  if (!busy()) return next;
  if (spec_.incremental()) {
    const std::int64_t round = access.span_ns(static_cast<std::int64_t>(spec_.round_s * kSecond));
    for (const Workload* w : pending_) {
      if (w->cluster_name || w->round_start_ns < 0) continue;
      const bool more = std::any_of(spec_.workers.begin(), spec_.workers.end(), [&](auto& name) {
        return std::find(w->nominated.begin(), w->nominated.end(), name) == w->nominated.end();
      });
      if (more) next = std::min(next, w->round_start_ns + round);
    }
  }
  for (const auto& worker : workers_) {
    next = std::min(next, access.next_reachability_change_ns(worker->name));
  }
  return next;
}

bool MultiKueueManager::update_workers(WorkerAccess& access) {
  bool changed = false;
  for (const auto& w : workers_) {
    const std::optional<std::string> why = access.unreachable(w->name);
    if (w->active == !why.has_value() && (!why || *why == w->message)) continue;
    w->active = !why.has_value();
    w->message = why.value_or("Connected");
    w->transition_ns = access.now();
    std::lock_guard lock(events_mu_);
    w->resource_version = ++resource_version_;
    changed = true;
  }
  return changed;
}

void MultiKueueManager::step(WorkerAccess& access) {
  last_step_ns_ = access.now();
  update_workers(access);
  if (owed_ > 0) {
    for (auto* records : {&live_, &gone_}) {
      for (const auto& w : *records) {
        std::vector<std::string> owed;
        for (const auto& [worker, copy] : w->copies) {
          if (copy.delete_owed && active(worker)) owed.push_back(worker);
        }
        for (const std::string& worker : owed) delete_copy(*w, worker, access);
      }
    }
  }
  // Until nothing moves: a copy deleted while running frees a slot that admits another copy at
  // the same instant.
  for (int pass = 0; pass < 64; ++pass) {
    bool changed = false;
    const std::vector<Workload*> pending = pending_;  // follow() may finish some
    for (Workload* w : pending) {
      if (!w->cluster_name) {
        changed |= nominate(*w, access);
        changed |= sync_copies(*w, access);
        changed |= settle(*w, access);
      } else {
        changed |= follow(*w, access);
      }
    }
    if (!changed) break;
  }
}

bool MultiKueueManager::nominate(Workload& w, WorkerAccess& access) {
  const std::int64_t now = access.now();
  bool changed = false;
  if (spec_.all_at_once()) {
    std::vector<std::string> all = spec_.workers;
    std::sort(all.begin(), all.end());
    if (w.nominated != all) {
      w.nominated = std::move(all);
      changed = true;
    }
  } else if (spec_.incremental()) {
    const std::int64_t round = access.span_ns(static_cast<std::int64_t>(spec_.round_s * kSecond));
    if (w.round_start_ns < 0 || now >= w.round_start_ns + round) {
      int added = 0;
      for (const std::string& worker : spec_.workers) {
        if (added == spec_.step_size) break;
        if (std::find(w.nominated.begin(), w.nominated.end(), worker) != w.nominated.end()) {
          continue;
        }
        w.nominated.push_back(worker);
        ++added;
      }
      if (added > 0) {
        w.round_start_ns = now;
        changed = true;
      }
    }
  }
  if (changed) {
    if (w.first_nominated_ns < 0) w.first_nominated_ns = now;
    publish(w, "MODIFIED");
  }
  return changed;
}

bool MultiKueueManager::delete_copy(Workload& w, const std::string& worker, WorkerAccess& access) {
  const auto it = w.copies.find(worker);
  if (it == w.copies.end()) return false;
  Workload::Copy& copy = it->second;
  if (copy.kind == Workload::Copy::Kind::kBlocked) {
    w.copies.erase(it);
    return false;
  }
  if (!active(worker)) {
    if (copy.delete_owed) return false;
    copy.delete_owed = true;
    ++owed_;
    return true;
  }
  if (copy.delete_owed) --owed_;
  const bool existed = copy.kind == Workload::Copy::Kind::kInadmissible ||
                       access.remove(worker, w.name, w.namespace_, copy.sequence);
  if (existed) {
    ++w.remote_deleted;
    ++remote_deleted_;
  }
  w.copies.erase(it);
  return true;
}

bool MultiKueueManager::sync_copies(Workload& w, WorkerAccess& access) {
  bool changed = false;
  // Copies gone from a worker the manager can see (deleted there, expired) are made again.
  for (auto it = w.copies.begin(); it != w.copies.end();) {
    const auto& [worker, copy] = *it;
    if (copy.kind == Workload::Copy::Kind::kSimulated && !copy.delete_owed && active(worker)) {
      const auto seen = access.find(worker, w.name, w.namespace_);
      if (!seen || seen->sequence != copy.sequence) {
        it = w.copies.erase(it);
        continue;
      }
    }
    ++it;
  }
  std::vector<std::string> dropped;
  for (const auto& [worker, copy] : w.copies) {
    if (std::find(w.nominated.begin(), w.nominated.end(), worker) == w.nominated.end()) {
      dropped.push_back(worker);
    }
  }
  for (const std::string& worker : dropped) changed |= delete_copy(w, worker, access);
  for (const std::string& worker : w.nominated) {
    if (worker_index(worker) < 0 || !active(worker)) continue;  // not a worker, or not Active
    if (const auto it = w.copies.find(worker); it != w.copies.end()) {
      if (it->second.delete_owed) {  // nominated again before it could be deleted: kept
        it->second.delete_owed = false;
        --owed_;
      }
      continue;
    }
    Workload::Copy copy;
    const auto type = offered_as(worker, w.device_type);
    if (!type) {
      copy.kind = Workload::Copy::Kind::kInadmissible;
    } else {
      CreateRequest request = w.copy;
      request.device_type = *type;
      const CreateResult result = access.create(worker, request, copy.sequence);
      if (result == CreateResult::kAlreadyExists) {
        copy.kind = Workload::Copy::Kind::kBlocked;
      } else if (result != CreateResult::kCreated) {
        copy.kind = Workload::Copy::Kind::kInadmissible;
      }
    }
    if (copy.kind != Workload::Copy::Kind::kBlocked) {
      ++w.remote_created;
      ++remote_created_;
      changed = true;
    }
    w.copies.emplace(worker, copy);
  }
  return changed;
}

bool MultiKueueManager::settle(Workload& w, WorkerAccess& access) {
  std::string winner;
  std::int64_t first = -1;
  for (const auto& [worker, copy] : w.copies) {
    if (copy.kind != Workload::Copy::Kind::kSimulated || copy.delete_owed || !active(worker)) {
      continue;
    }
    const auto seen = access.find(worker, w.name, w.namespace_);
    if (!seen || seen->sequence != copy.sequence || seen->reserved_ns < 0) continue;
    if (first < 0 || seen->reserved_ns < first ||
        (seen->reserved_ns == first && worker_index(worker) < worker_index(winner))) {
      first = seen->reserved_ns;
      winner = worker;
      w.winner_evictions = seen->evictions;
    }
  }
  if (winner.empty()) return false;
  const std::int64_t now = access.now();
  w.cluster_name = winner;
  w.nominated.clear();
  w.check_state = "Ready";
  w.check_message = fmt::format("The workload was admitted on \"{}\"", winner);
  w.check_ns = now;
  w.admitted_ns = now;
  w.winner_reserved_ns = first;
  std::vector<std::string> losers;
  for (const auto& [worker, copy] : w.copies) {
    if (worker != winner) losers.push_back(worker);
  }
  for (const std::string& worker : losers) delete_copy(w, worker, access);
  publish(w, "MODIFIED");
  return true;
}

bool MultiKueueManager::follow(Workload& w, WorkerAccess& access) {
  const std::string& winner = *w.cluster_name;
  const auto it = w.copies.find(winner);
  if (it == w.copies.end() || !active(winner)) return false;
  const auto seen = access.find(winner, w.name, w.namespace_);
  if (!seen || seen->sequence != it->second.sequence) return false;
  if (seen->finished_ns < 0) {
    if (seen->reserved_ns < 0 && seen->evictions > w.winner_evictions) {
      return redo_admission(w, *seen, access);
    }
    return false;
  }
  w.finished_ns = access.now();
  w.winner_finished_ns = seen->finished_ns;
  w.failed = seen->failed;
  w.finish_message = seen->finish_message;
  std::erase(pending_, &w);
  publish(w, "MODIFIED");
  delete_copy(w, winner, access);  // Kueue deletes the remote objects of a finished workload
  return true;
}

bool MultiKueueManager::redo_admission(Workload& w, const WorkerAccess::Copy& seen,
                                       WorkerAccess& access) {
  const std::string worker = *w.cluster_name;
  const std::int64_t now = access.now();
  w.cluster_name.reset();
  w.nominated.clear();
  w.round_start_ns = -1;
  w.winner_reserved_ns = -1;
  w.check_state = "Pending";
  w.check_message =
      fmt::format("The workload was evicted on \"{}\": {}", worker, seen.evict_message);
  w.check_ns = now;
  ++w.evicted_in_workers;
  // The job resumes from its checkpoint wherever it is admitted next: its copies run what is left.
  w.copy.env["FLEET_DURATION_S"] = fmt::format("{}", seen.remaining_s);
  delete_copy(w, worker, access);
  publish(w, "MODIFIED");
  return true;
}

// --- Objects and events.

json MultiKueueManager::object(const Workload& w) const {
  json meta = metadata(w.name, w.uid, w.resource_version, w.created_ns);
  meta["namespace"] = w.namespace_;
  if (!w.labels.empty()) meta["labels"] = w.labels;
  if (!w.annotations.empty()) meta["annotations"] = w.annotations;
  const json& pod_set = w.spec["podSets"][0];
  json conditions = json::array(
      {condition("QuotaReserved", true, "QuotaReserved",
                 fmt::format("Quota reserved in ClusterQueue {}", kClusterQueue), w.created_ns)});
  if (w.admitted_ns >= 0) {
    conditions.push_back(
        condition("Admitted", true, "Admitted", "The workload is admitted", w.admitted_ns));
  }
  if (w.finished_ns >= 0) {
    conditions.push_back(condition("Finished", true, w.failed ? "Failed" : "Succeeded",
                                   w.finish_message, w.finished_ns));
  }
  json status = {
      {"conditions", conditions},
      {"admission",
       {{"clusterQueue", kClusterQueue},
        {"podSetAssignments", json::array({{{"name", pod_set["name"]},
                                            {"count", pod_set["count"]},
                                            {"flavors", {{w.resource, "default-flavor"}}}}})}}},
      {"admissionChecks", json::array({{{"name", spec_.admission_check},
                                        {"state", w.check_state},
                                        {"message", w.check_message},
                                        {"lastTransitionTime", format_k8s_time(w.check_ns)}}})}};
  if (!w.nominated.empty()) status["nominatedClusterNames"] = w.nominated;
  if (w.cluster_name) status["clusterName"] = *w.cluster_name;
  return {{"apiVersion", kApiVersion},
          {"kind", "Workload"},
          {"metadata", std::move(meta)},
          {"spec", w.spec},
          {"status", std::move(status)}};
}

void MultiKueueManager::publish(Workload& w, const char* type) {
  std::lock_guard lock(events_mu_);
  w.resource_version = ++resource_version_;
  auto o = std::make_shared<const json>(object(w));
  const std::string key = w.key();
  if (std::string_view(type) == "DELETED") {
    current_.erase(key);
    std::erase(order_, key);
  } else {
    if (!current_.count(key)) order_.push_back(key);
    current_[key] = o;
  }
  events_.push_back(Event{resource_version_, type, std::move(o)});
  while (events_.size() > history_) {
    dropped_up_to_ = events_.front().resource_version;
    events_.pop_front();
  }
  events_cv_.notify_all();
}

bool MultiKueueManager::open_watch() {
  std::lock_guard lock(events_mu_);
  if (closed_ || watches_ >= kMaxWatches) return false;
  ++watches_;
  return true;
}

void MultiKueueManager::close_watch() {
  std::lock_guard lock(events_mu_);
  --watches_;
}

std::vector<std::shared_ptr<const json>> MultiKueueManager::snapshot(
    std::uint64_t& resource_version) {
  sim_.with_workers([](WorkerAccess&) {});
  std::lock_guard lock(events_mu_);
  std::vector<std::shared_ptr<const json>> out;
  for (const std::string& key : order_) out.push_back(current_.at(key));
  resource_version = resource_version_;
  return out;
}

MultiKueueManager::Wait MultiKueueManager::wait_events(std::uint64_t after,
                                                       std::chrono::steady_clock::time_point until,
                                                       std::vector<Event>& out) {
  std::unique_lock lock(events_mu_);
  for (;;) {
    if (closed_) return Wait::kClosed;
    if (after < dropped_up_to_) return Wait::kGone;
    if (!events_.empty() && events_.back().resource_version > after) {
      for (const Event& e : events_) {
        if (e.resource_version > after) out.push_back(e);
      }
      return Wait::kEvents;
    }
    if (events_cv_.wait_until(lock, until) == std::cv_status::timeout) {
      if (closed_) return Wait::kClosed;
      return Wait::kTimeout;
    }
  }
}

void MultiKueueManager::close_watches() {
  std::lock_guard lock(events_mu_);
  closed_ = true;
  events_cv_.notify_all();
}

void MultiKueueManager::set_event_history(std::size_t events) {
  std::lock_guard lock(events_mu_);
  history_ = std::max<std::size_t>(1, events);
  while (events_.size() > history_) {
    dropped_up_to_ = events_.front().resource_version;
    events_.pop_front();
  }
}

// --- The state dump.

json MultiKueueManager::state_json() const {
  json workers = json::array();
  for (const auto& w : workers_) {
    workers.push_back({{"name", w->name},
                       {"active", w->active},
                       {"message", w->message},
                       {"transition_ns", w->transition_ns}});
  }
  json workloads = json::array();
  for (const auto* records : {&live_, &gone_}) {
    for (const auto& w : *records) {
      json copies = json::array();
      for (const auto& [worker, copy] : w->copies) {
        const char* kind = copy.kind == Workload::Copy::Kind::kSimulated      ? "created"
                           : copy.kind == Workload::Copy::Kind::kInadmissible ? "inadmissible"
                                                                              : "blocked";
        copies.push_back({{"cluster", worker}, {"kind", kind}, {"delete_owed", copy.delete_owed}});
      }
      workloads.push_back(
          {{"name", w->name},
           {"namespace", w->namespace_},
           {"uid", w->uid},
           {"device_type", w->device_type},
           {"num_slices", w->copy.num_slices},
           {"priority", w->copy.priority},
           {"nominated", w->nominated},
           {"cluster", w->cluster_name ? json(*w->cluster_name) : json(nullptr)},
           {"check", w->check_state},
           {"created_ns", w->created_ns},
           {"first_nominated_ns", w->first_nominated_ns},
           {"admitted_ns", w->admitted_ns},
           {"winner_reserved_ns", w->winner_reserved_ns},
           {"winner_finished_ns", w->winner_finished_ns},
           {"finished_ns", w->finished_ns},
           {"outcome",
            w->finished_ns < 0 ? json(nullptr) : json(w->failed ? "Failed" : "Succeeded")},
           {"deleted_ns", w->deleted_ns},
           {"remote_created", w->remote_created},
           {"remote_deleted", w->remote_deleted},
           {"evicted_in_workers", w->evicted_in_workers},
           {"copies", std::move(copies)}});
    }
  }
  std::uint64_t version = 0;
  std::size_t kept = 0;
  int watches = 0;
  {
    std::lock_guard lock(events_mu_);
    version = resource_version_;
    kept = events_.size();
    watches = watches_;
  }
  return {{"cluster", spec_.cluster},
          {"dispatcher", spec_.dispatcher},
          {"step_size", spec_.step_size},
          {"round_s", spec_.round_s},
          {"admission_check", spec_.admission_check},
          {"config", spec_.config},
          {"workers", std::move(workers)},
          {"resource_version", version},
          {"events_kept", kept},
          {"watches", watches},
          {"remote_created", remote_created_},
          {"remote_deleted", remote_deleted_},
          {"workloads", std::move(workloads)}};
}

}  // namespace falcon::fleet
