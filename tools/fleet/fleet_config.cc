#include "fleet/fleet_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/names.h"
#include "common/xpk_accelerators.h"

namespace falcon::fleet {
namespace {

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Walks the YAML tree, collecting every problem with its position and field path.
class Checker {
 public:
  explicit Checker(std::string source) : source_(std::move(source)) {}

  void problem(const YAML::Node& node, const std::string& path, const std::string& what) {
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) {
      problems_.push_back(fmt::format("{}: {}: {}", source_, path, what));
    } else {
      problems_.push_back(
          fmt::format("{}:{}:{}: {}: {}", source_, mark.line + 1, mark.column + 1, path, what));
    }
  }

  // Reports keys of `map` that are not in `allowed`.
  void only_keys(const YAML::Node& map, const std::string& path,
                 std::initializer_list<const char*> allowed) {
    for (const auto& kv : map) {
      const std::string key = kv.first.as<std::string>();
      bool known = false;
      for (const char* a : allowed) known = known || key == a;
      if (!known) {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        problem(kv.first, join(path, key), fmt::format("unknown key (expected one of: {})", list));
      }
    }
  }

  bool is_map(const YAML::Node& node, const std::string& path) {
    if (node.IsMap()) return true;
    problem(node, path, "must be a mapping");
    return false;
  }

  std::optional<std::string> string(const YAML::Node& node, const std::string& path) {
    if (!node.IsScalar()) {
      problem(node, path, "must be a string");
      return std::nullopt;
    }
    return node.Scalar();
  }

  std::optional<std::string> nonempty_string(const YAML::Node& node, const std::string& path) {
    auto s = string(node, path);
    if (s && s->empty()) {
      problem(node, path, "must not be empty");
      return std::nullopt;
    }
    return s;
  }

  std::optional<long long> integer(const YAML::Node& node, const std::string& path, long long min,
                                   long long max) {
    if (!node.IsScalar()) {
      problem(node, path, "must be an integer");
      return std::nullopt;
    }
    const std::string& text = node.Scalar();
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size()) {
      problem(node, path, fmt::format("must be an integer, got '{}'", text));
      return std::nullopt;
    }
    if (value < min || value > max) {
      problem(node, path, fmt::format("must be between {} and {}, got {}", min, max, value));
      return std::nullopt;
    }
    return value;
  }

  std::optional<double> number(const YAML::Node& node, const std::string& path, double min,
                               double max) {
    if (!node.IsScalar()) {
      problem(node, path, "must be a number");
      return std::nullopt;
    }
    const std::string& text = node.Scalar();
    std::size_t used = 0;
    double value = 0;
    try {
      value = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size() || !std::isfinite(value)) {
      problem(node, path, fmt::format("must be a number, got '{}'", text));
      return std::nullopt;
    }
    if (value < min || value > max) {
      problem(node, path, fmt::format("must be between {} and {}, got {}", min, max, text));
      return std::nullopt;
    }
    return value;
  }

  std::optional<bool> boolean(const YAML::Node& node, const std::string& path) {
    if (node.IsScalar()) {
      const std::string v = lower(node.Scalar());
      if (v == "true" || v == "yes" || v == "on") return true;
      if (v == "false" || v == "no" || v == "off") return false;
    }
    problem(node, path, "must be true or false");
    return std::nullopt;
  }

  // A setting named by one of two words: false for `off`, true for `on`; `meaning` says what
  // they choose, in the problem a third word gets.
  std::optional<bool> either(const YAML::Node& node, const std::string& path,
                             const std::string& off, const std::string& on,
                             const std::string& meaning) {
    const auto v = string(node, path);
    if (!v) return std::nullopt;
    if (*v == on || *v == off) return *v == on;
    problem(node, path, fmt::format("must be {} or {} ({}), not '{}'", off, on, meaning, *v));
    return std::nullopt;
  }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  const std::string& source() const { return source_; }
  std::vector<std::string>& problems() { return problems_; }

 private:
  std::string source_;
  std::vector<std::string> problems_;
};

template <typename T, typename U>
void assign(std::optional<U> value, T& target) {
  if (value) target = static_cast<T>(*value);
}

void parse_xpk(Checker& c, const YAML::Node& node, XpkProfile& out) {
  const std::string path = "xpk";
  if (!c.is_map(node, path)) return;
  c.only_keys(node, path, {"version", "table_style", "supports_namespace", "progress_lines"});
  if (auto n = node["version"]) {
    if (auto v = c.nonempty_string(n, "xpk.version")) {
      if (v->front() != 'v') {
        c.problem(n, "xpk.version", fmt::format("must look like v1.13.1, got '{}'", *v));
      } else {
        out.version = *v;
        if (out.version_number() == 10000) {
          c.problem(n, "xpk.version", fmt::format("must look like v1.13.1, got '{}'", *v));
        }
      }
    }
  }
  if (auto n = node["table_style"]) {
    if (auto v = c.string(n, "xpk.table_style")) {
      if (*v == "v1.9" || *v == "1.9") {
        out.table_style = TableStyle::kV19;
      } else if (*v == "v1.7" || *v == "1.7") {
        out.table_style = TableStyle::kV17;
      } else {
        c.problem(n, "xpk.table_style", fmt::format("must be v1.9 or v1.7, got '{}'", *v));
      }
    }
  }
  if (auto n = node["supports_namespace"])
    assign(c.boolean(n, "xpk.supports_namespace"), out.supports_namespace);
  if (auto n = node["progress_lines"])
    assign(c.boolean(n, "xpk.progress_lines"), out.progress_lines);
}

void parse_outcome_field(Checker& c, const YAML::Node& node, const std::string& path,
                         Outcome& out) {
  if (auto v = c.string(node, path)) {
    if (auto o = parse_outcome(*v)) {
      out = *o;
    } else {
      c.problem(node, path, fmt::format("must be succeed or fail, got '{}'", *v));
    }
  }
}

void parse_defaults(Checker& c, const YAML::Node& node, RunDefaults& out) {
  const std::string path = "defaults";
  if (!c.is_map(node, path)) return;
  c.only_keys(node, path, {"duration_s", "outcome", "exit_code", "steps", "log_lines_per_step"});
  if (auto n = node["duration_s"])
    assign(c.number(n, "defaults.duration_s", 0, 1e9), out.duration_s);
  if (auto n = node["outcome"]) parse_outcome_field(c, n, "defaults.outcome", out.outcome);
  if (auto n = node["exit_code"]) assign(c.integer(n, "defaults.exit_code", 1, 255), out.exit_code);
  if (auto n = node["steps"]) assign(c.integer(n, "defaults.steps", 0, 10'000'000), out.steps);
  if (auto n = node["log_lines_per_step"]) {
    assign(c.integer(n, "defaults.log_lines_per_step", 1, 1000), out.log_lines_per_step);
  }
}

void parse_flap(Checker& c, const YAML::Node& n, const std::string& fpath, FlapSpec& out) {
  if (!c.is_map(n, fpath)) return;
  c.only_keys(n, fpath, {"period_s", "down_s", "offset_s"});
  if (auto e = n["period_s"])
    assign(c.integer(e, fpath + ".period_s", 0, 86'400 * 7), out.period_s);
  if (auto e = n["down_s"]) assign(c.integer(e, fpath + ".down_s", 0, 86'400 * 7), out.down_s);
  if (auto e = n["offset_s"])
    assign(c.integer(e, fpath + ".offset_s", 0, 86'400 * 7), out.offset_s);
  if (out.period_s > 0 && (out.down_s <= 0 || out.down_s >= out.period_s)) {
    c.problem(
        n, fpath + ".down_s",
        fmt::format("must be above 0 and below period_s ({}), got {}", out.period_s, out.down_s));
  }
}

// `topology: {<GKE accelerator label>: [<chips per block>, ...]}`.
void parse_topology(Checker& c, const YAML::Node& n, const std::string& path,
                    std::map<std::string, std::vector<int>>& out) {
  if (!c.is_map(n, path)) return;
  for (const auto& kv : n) {
    const std::string label = kv.first.as<std::string>();
    const std::string lpath = Checker::join(path, label);
    const bool known = std::any_of(
        tools::xpk_systems().begin(), tools::xpk_systems().end(), [&](const tools::XpkSystem& t) {
          return !t.gke_accelerator.empty() && t.gke_accelerator == label;
        });
    if (!known) {
      c.problem(kv.first, lpath,
                fmt::format("'{}' is not a GKE accelerator label of xpk's types (like "
                            "tpu-v4-podslice, tpu-v5p-slice, nvidia-h100-80gb)",
                            label));
      continue;
    }
    if (!kv.second.IsSequence() || kv.second.size() == 0) {
      c.problem(kv.second, lpath, "must be a non-empty list of block sizes in chips");
      continue;
    }
    std::vector<int> blocks;
    for (std::size_t i = 0; i < kv.second.size(); ++i) {
      if (auto v = c.integer(kv.second[i], fmt::format("{}[{}]", lpath, i), 1, 100'000)) {
        blocks.push_back(static_cast<int>(*v));
      }
    }
    out[label] = std::move(blocks);
  }
}

void parse_behaviour(Checker& c, const YAML::Node& node, const std::string& path,
                     ClusterBehaviour& out) {
  if (!c.is_map(node, path)) return;
  c.only_keys(
      node, path,
      {"probe_latency_ms", "command_latency_ms", "unreachable", "flaky", "slow", "slow_latency_ms",
       "admission_delay_s", "kueue", "flap", "preemption", "clusterqueues"});
  const auto field = [&](const char* key) { return Checker::join(path, key); };
  if (auto n = node["probe_latency_ms"]) {
    assign(c.integer(n, field("probe_latency_ms"), 0, 3'600'000), out.probe_latency_ms);
  }
  if (auto n = node["command_latency_ms"]) {
    assign(c.integer(n, field("command_latency_ms"), 0, 3'600'000), out.command_latency_ms);
  }
  if (auto n = node["unreachable"]) assign(c.boolean(n, field("unreachable")), out.unreachable);
  if (auto n = node["slow"]) assign(c.boolean(n, field("slow")), out.slow);
  if (auto n = node["kueue"]) assign(c.boolean(n, field("kueue")), out.kueue);
  if (auto n = node["slow_latency_ms"]) {
    assign(c.integer(n, field("slow_latency_ms"), 0, 3'600'000), out.slow_latency_ms);
  }
  if (auto n = node["admission_delay_s"]) {
    assign(c.integer(n, field("admission_delay_s"), 0, 86'400), out.admission_delay_s);
  }
  if (auto n = node["flaky"]) {
    const std::string fpath = field("flaky");
    if (c.is_map(n, fpath)) {
      c.only_keys(n, fpath, {"every", "probability", "seed"});
      if (auto e = n["every"])
        assign(c.integer(e, fpath + ".every", 0, 1'000'000), out.flaky.every);
      if (auto p = n["probability"])
        assign(c.number(p, fpath + ".probability", 0, 1), out.flaky.probability);
      if (auto s = n["seed"]) {
        assign(c.integer(s, fpath + ".seed", 0, std::numeric_limits<long long>::max()),
               out.flaky.seed);
      }
      if (out.flaky.every > 0 && out.flaky.probability > 0) {
        c.problem(n, fpath, "set either every or probability, not both");
      }
    }
  }
  if (auto n = node["flap"]) parse_flap(c, n, field("flap"), out.flap);
  if (auto n = node["preemption"]) {
    assign(c.either(n, field("preemption"), "Never", "LowerPriority", "Kueue's withinClusterQueue"),
           out.preempt_lower_priority);
  }
  if (auto n = node["clusterqueues"]) {
    assign(c.either(n, field("clusterqueues"), "forbidden", "readable",
                    "whether the API grants ClusterQueues"),
           out.cluster_queues_readable);
  }
}

void parse_env_map(Checker& c, const YAML::Node& node, const std::string& path,
                   std::map<std::string, std::string>& out) {
  if (!c.is_map(node, path)) return;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (auto v = c.string(kv.second, Checker::join(path, key))) out[key] = *v;
  }
}

void parse_workloads(Checker& c, const YAML::Node& node, const std::string& path,
                     FleetCluster& cluster) {
  if (!node.IsSequence()) {
    c.problem(node, path, "must be a list");
    return;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < node.size(); ++i) {
    const YAML::Node w = node[i];
    const std::string wpath = fmt::format("{}[{}]", path, i);
    if (!c.is_map(w, wpath)) continue;
    c.only_keys(w, wpath,
                {"name", "count", "device_type", "num_slices", "priority", "namespace", "env",
                 "duration_s", "outcome", "exit_code"});
    InitialWorkload out;
    const auto field = [&](const char* key) { return Checker::join(wpath, key); };
    if (auto n = w["name"]) {
      if (auto v = c.nonempty_string(n, field("name"))) out.name = *v;
    } else {
      c.problem(w, field("name"), "missing required key");
    }
    if (auto n = w["count"]) assign(c.integer(n, field("count"), 1, 10'000), out.count);
    if (auto n = w["device_type"]) {
      if (auto v = c.nonempty_string(n, field("device_type"))) {
        out.device_type = *v;
        const auto canonical = tools::xpk_name_for(*v);
        const bool offered =
            std::any_of(cluster.capacity.begin(), cluster.capacity.end(), [&](const auto& entry) {
              return canonical && tools::xpk_name_for(entry.first) == canonical;
            });
        if (!offered) {
          c.problem(n, field("device_type"),
                    fmt::format("the cluster has no capacity entry for '{}'", *v));
        }
      }
    } else {
      c.problem(w, field("device_type"), "missing required key");
    }
    if (auto n = w["num_slices"])
      assign(c.integer(n, field("num_slices"), 1, 1024), out.num_slices);
    if (auto n = w["priority"]) {
      if (auto v = c.string(n, field("priority"))) {
        static const std::set<std::string> kPriorities = {"very-low", "low", "medium", "high",
                                                          "very-high"};
        if (kPriorities.count(*v)) {
          out.priority = *v;
        } else {
          c.problem(
              n, field("priority"),
              fmt::format("must be one of very-low, low, medium, high, very-high, got '{}'", *v));
        }
      }
    }
    if (auto n = w["namespace"]) {
      if (auto v = c.nonempty_string(n, field("namespace"))) out.namespace_ = *v;
    }
    if (auto n = w["env"]) parse_env_map(c, n, field("env"), out.env);
    if (auto n = w["duration_s"]) {
      if (auto v = c.number(n, field("duration_s"), 0, 1e9)) {
        out.env["FLEET_DURATION_S"] = n.Scalar();
      }
    }
    if (auto n = w["outcome"]) {
      Outcome o = Outcome::kSucceed;
      const std::size_t before = c.problems().size();
      parse_outcome_field(c, n, field("outcome"), o);
      if (c.problems().size() == before) out.env["FLEET_OUTCOME"] = to_string(o);
    }
    if (auto n = w["exit_code"]) {
      if (auto v = c.integer(n, field("exit_code"), 0, 255)) {
        out.env["FLEET_EXIT_CODE"] = std::to_string(*v);
      }
    }
    if (!out.name.empty()) {
      const std::string longest =
          out.count > 1 ? fmt::format("{}-{}", out.name, out.count) : out.name;
      if (!tools::is_xpk_name(out.name) || !tools::is_xpk_name(longest)) {
        c.problem(w["name"], field("name"),
                  fmt::format("'{}' is not a valid xpk workload name ([a-z]([-a-z0-9]*[a-z0-9])?, "
                              "at most 40 characters, including the -<count> suffix)",
                              longest));
      }
      if (!names.insert(out.name).second) {
        c.problem(w["name"], field("name"), fmt::format("duplicate workload '{}'", out.name));
      }
    }
    cluster.workloads.push_back(std::move(out));
  }
}

// Both look like GCP locations, and `zone` is one through which xpk reaches the cluster: its
// own zone when zonal, its region or a zone of it when regional.
void check_zone_and_location(Checker& c, const YAML::Node& node, const std::string& path,
                             const FleetCluster& out) {
  if (out.zone.empty()) return;  // reported as missing
  bool shapes_ok = true;
  for (const auto& [key, value] : {std::pair{"zone", &out.zone}, {"location", &out.location}}) {
    if (!tools::gcp_location_kind(*value)) {
      c.problem(node[key] ? node[key] : node, Checker::join(path, key),
                fmt::format("'{}' is not a GCP zone or region (like us-central2-b or us-central1)",
                            value->substr(0, 64)));
      shapes_ok = false;
      if (std::string_view(key) == "zone") break;  // location defaulted to it
    }
  }
  if (!shapes_ok || out.zone == out.location) return;
  const bool zonal = !out.regional();
  if (tools::region_of(out.zone) != tools::region_of(out.location) || zonal) {
    c.problem(node["location"], Checker::join(path, "location"),
              fmt::format("zone '{}' does not reach a cluster at '{}': a zonal cluster is reached "
                          "through its own zone only, a regional one through its region or a "
                          "zone of it",
                          out.zone, out.location));
  }
}

// `manager_cluster`: the name the `manager:` section gives its cluster, whose capacity may be {}.
void parse_cluster(Checker& c, const std::string& name, const YAML::Node& node, FleetCluster& out,
                   const std::string& manager_cluster) {
  const std::string path = "clusters." + name;
  out.name = name;
  if (!c.is_map(node, path)) return;
  c.only_keys(node, path,
              {"project", "zone", "cluster_id", "location", "capacity", "topology", "behaviour",
               "workloads"});
  const auto field = [&](const char* key) { return Checker::join(path, key); };
  for (const char* key : {"project", "zone", "cluster_id"}) {
    const YAML::Node n = node[key];
    if (!n) {
      c.problem(node, field(key), "missing required key");
      continue;
    }
    if (auto v = c.nonempty_string(n, field(key))) {
      if (std::string_view(key) == "project") out.project = *v;
      if (std::string_view(key) == "zone") out.zone = *v;
      if (std::string_view(key) == "cluster_id") {
        out.cluster_id = *v;
        if (!tools::is_xpk_name(*v)) {
          c.problem(n, field(key),
                    fmt::format("'{}' is not a valid cluster name for xpk "
                                "([a-z]([-a-z0-9]*[a-z0-9])?, at most 40 characters)",
                                *v));
        }
      }
    }
  }
  if (auto n = node["location"]) {
    if (auto v = c.nonempty_string(n, field("location"))) out.location = *v;
  }
  if (out.location.empty()) out.location = out.zone;
  check_zone_and_location(c, node, path, out);
  if (auto n = node["capacity"]) {
    if (c.is_map(n, field("capacity"))) {
      std::map<std::string, std::string> canonical_seen;  // canonical -> as written
      for (const auto& kv : n) {
        const std::string type = kv.first.as<std::string>();
        const std::string type_path = Checker::join(field("capacity"), type);
        const auto canonical = tools::xpk_name_for(type);
        if (!canonical) {
          c.problem(kv.first, type_path,
                    fmt::format("'{}' is not a device type xpk {} accepts (closest matches: {})",
                                type, tools::kXpkTableVersion,
                                fmt::join(tools::xpk_closest_matches(type, std::nullopt), ", ")));
          continue;
        }
        if (auto [it, inserted] = canonical_seen.emplace(*canonical, type); !inserted) {
          c.problem(kv.first, type_path,
                    fmt::format("'{}' is the same device type as '{}'", type, it->second));
          continue;
        }
        if (auto v = c.integer(kv.second, type_path, 0, 100'000)) {
          out.capacity[type] = static_cast<int>(*v);
        }
      }
      if (n.size() == 0 && name != manager_cluster) {
        c.problem(n, field("capacity"),
                  "must name at least one device type ({} only for the manager: cluster)");
      }
    }
  } else {
    c.problem(node, field("capacity"), "missing required key");
  }
  if (auto n = node["topology"]) parse_topology(c, n, field("topology"), out.topology);
  if (auto n = node["behaviour"]) parse_behaviour(c, n, field("behaviour"), out.behaviour);
  if (auto n = node["workloads"]) parse_workloads(c, n, field("workloads"), out);
}

// A Kubernetes object name (RFC 1123 subdomain): lower-case letters, digits, '-' and '.',
// starting and ending with a letter or digit, at most 253 characters.
bool is_object_name(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  const auto alnum = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char ch) { return alnum(ch) || ch == '-' || ch == '.'; });
}

// Kueue's rule for multiKueue.dispatcherName: a domain-prefixed path (`acme.io/foo`) of at most
// 63 characters.
bool is_dispatcher_name(std::string_view name) {
  const std::size_t slash = name.find('/');
  if (name.size() > 63 || slash == std::string_view::npos || slash + 1 == name.size()) return false;
  if (!is_object_name(name.substr(0, slash))) return false;
  return name.substr(slash + 1).find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/") ==
         std::string_view::npos;
}

// The `manager:` section; `clusters` are the fleet's clusters, parsed before it.
void parse_manager(Checker& c, const YAML::Node& node, const std::vector<FleetCluster>& clusters,
                   std::optional<ManagerSpec>& out) {
  const std::string path = "manager";
  if (!c.is_map(node, path)) return;
  c.only_keys(
      node, path,
      {"cluster", "dispatcher", "step_size", "round_s", "admission_check", "config", "workers"});
  ManagerSpec spec;
  const auto field = [&](const char* key) { return Checker::join(path, key); };
  const auto known = [&](const std::string& name) {
    return std::any_of(clusters.begin(), clusters.end(),
                       [&](const FleetCluster& fc) { return fc.name == name; });
  };
  if (auto n = node["cluster"]) {
    if (auto v = c.nonempty_string(n, field("cluster"))) {
      spec.cluster = *v;
      if (!known(*v)) {
        c.problem(n, field("cluster"), fmt::format("'{}' is not a cluster of clusters:", *v));
      }
    }
  } else {
    c.problem(node, field("cluster"), "missing required key");
  }
  if (auto n = node["dispatcher"]) {
    if (auto v = c.nonempty_string(n, field("dispatcher"))) {
      spec.dispatcher = *v;
      if (!is_dispatcher_name(*v)) {
        c.problem(n, field("dispatcher"),
                  fmt::format("'{}' is not a dispatcher name (a domain-prefixed path of at most "
                              "63 characters, like {})",
                              *v, kDispatcherIncremental));
      }
    }
  }
  if (auto n = node["step_size"]) assign(c.integer(n, field("step_size"), 1, 100), spec.step_size);
  if (auto n = node["round_s"]) assign(c.number(n, field("round_s"), 1, 86'400), spec.round_s);
  for (const char* key : {"admission_check", "config"}) {
    const YAML::Node n = node[key];
    if (!n) continue;
    if (auto v = c.nonempty_string(n, field(key))) {
      if (!is_object_name(*v)) {
        c.problem(n, field(key),
                  fmt::format("'{}' is not a Kubernetes object name (lower-case letters, digits, "
                              "'-' and '.', at most 253 characters)",
                              *v));
      }
      (std::string_view(key) == "config" ? spec.config : spec.admission_check) = *v;
    }
  }
  if (auto n = node["workers"]) {
    if (!n.IsSequence() || n.size() == 0) {
      c.problem(n, field("workers"), "must be a non-empty list of fleet cluster names");
    } else if (n.size() > 10) {
      c.problem(
          n, field("workers"),
          fmt::format("has {} clusters; Kueue's MultiKueueConfig takes at most 10", n.size()));
    } else {
      std::set<std::string> seen;
      for (std::size_t i = 0; i < n.size(); ++i) {
        const std::string wpath = fmt::format("{}[{}]", field("workers"), i);
        const auto v = c.nonempty_string(n[i], wpath);
        if (!v) continue;
        if (!known(*v)) {
          c.problem(n[i], wpath, fmt::format("'{}' is not a cluster of clusters:", *v));
        } else if (*v == spec.cluster) {
          c.problem(n[i], wpath, fmt::format("'{}' is the manager cluster, not a worker", *v));
        } else if (!seen.insert(*v).second) {
          c.problem(n[i], wpath, fmt::format("'{}' is listed twice", *v));
        }
        spec.workers.push_back(*v);
      }
    }
  } else {
    c.problem(node, field("workers"), "missing required key");
  }
  out = std::move(spec);
}

}  // namespace

bool FleetCluster::regional() const {
  return tools::gcp_location_kind(location) == tools::LocationKind::kRegion;
}

FleetConfigError::FleetConfigError(std::vector<std::string> problems)
    : std::runtime_error(join_lines(problems)), problems_(std::move(problems)) {}

const char* to_string(TableStyle style) { return style == TableStyle::kV17 ? "v1.7" : "v1.9"; }

const char* to_string(Outcome outcome) { return outcome == Outcome::kFail ? "fail" : "succeed"; }

std::optional<Outcome> parse_outcome(std::string_view text) {
  const std::string v = lower(text);
  if (v == "succeed" || v == "success" || v == "complete" || v == "completed") {
    return Outcome::kSucceed;
  }
  if (v == "fail" || v == "failure" || v == "failed") return Outcome::kFail;
  return std::nullopt;
}

int XpkProfile::version_number() const {
  int major = 0;
  int minor = 0;
  char tail = 0;
  if (std::sscanf(version.c_str(), "v%d.%d%c", &major, &minor, &tail) < 2) return 10000;
  if (tail != 0 && tail != '.' && tail != '-' && tail != '+') return 10000;
  return major * 100 + minor;
}

FleetConfig parse_fleet_config(std::string_view yaml_text, const std::string& source_name) {
  Checker c(source_name);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    throw FleetConfigError({fmt::format("{}:{}:{}: invalid YAML: {}", source_name, e.mark.line + 1,
                                        e.mark.column + 1, e.msg)});
  }
  FleetConfig config;
  config.source_path = source_name;
  if (!root.IsMap()) {
    throw FleetConfigError({fmt::format(
        "{}: the fleet file must be a mapping with a clusters: section", source_name)});
  }
  c.only_keys(root, "",
              {"xpk", "time_scale", "defaults", "logs", "workers_per_slice", "clusters", "buckets",
               "manager"});
  if (auto n = root["buckets"]) {
    if (!n.IsSequence()) {
      c.problem(n, "buckets", "must be a list of bucket names");
    } else {
      for (const auto& b : n) {
        const std::string name = b.IsScalar() ? b.as<std::string>() : "";
        // Cloud Storage's rule, in short: 3 to 63 lower-case letters, digits, '-', '_', '.'.
        const bool ok =
            name.size() >= 3 && name.size() <= 63 &&
            name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_.") == std::string::npos;
        if (!ok) {
          c.problem(b, "buckets", "a bucket name is 3 to 63 of a-z, 0-9, '-', '_' and '.'");
        } else {
          config.buckets.push_back(name);
        }
      }
    }
  }
  if (auto n = root["xpk"]) parse_xpk(c, n, config.xpk);
  if (auto n = root["time_scale"]) assign(c.number(n, "time_scale", 0, 1e6), config.time_scale);
  if (auto n = root["defaults"]) parse_defaults(c, n, config.defaults);
  if (auto n = root["logs"]) {
    if (c.is_map(n, "logs")) {
      c.only_keys(n, "logs", {"omit_completion_index_every"});
      if (auto e = n["omit_completion_index_every"]) {
        assign(c.integer(e, "logs.omit_completion_index_every", 0, 1'000'000),
               config.logs.omit_completion_index_every);
      }
    }
  }
  if (auto n = root["workers_per_slice"]) {
    if (c.is_map(n, "workers_per_slice")) {
      for (const auto& kv : n) {
        const std::string type = kv.first.as<std::string>();
        if (auto v = c.integer(kv.second, "workers_per_slice." + type, 1, 100'000)) {
          config.workers_per_slice[type] = static_cast<int>(*v);
        }
      }
    }
  }
  // The manager's cluster may have an empty capacity: known before the clusters are parsed.
  std::string manager_cluster;
  if (const YAML::Node m = root["manager"];
      m && m.IsMap() && m["cluster"] && m["cluster"].IsScalar()) {
    manager_cluster = m["cluster"].Scalar();
  }
  const YAML::Node clusters = root["clusters"];
  if (!clusters) {
    c.problem(root, "clusters", "missing required key");
  } else if (!clusters.IsMap() || clusters.size() == 0) {
    c.problem(clusters, "clusters", "must be a non-empty mapping of cluster name to cluster");
  } else {
    std::map<std::pair<std::string, std::string>, std::string> ids;
    for (const auto& kv : clusters) {
      FleetCluster cluster;
      const std::string name = kv.first.as<std::string>();
      parse_cluster(c, name, kv.second, cluster, manager_cluster);
      if (!cluster.project.empty() && !cluster.cluster_id.empty()) {
        auto [it, inserted] = ids.emplace(std::pair{cluster.project, cluster.cluster_id}, name);
        if (!inserted) {
          c.problem(kv.first, "clusters." + name + ".cluster_id",
                    fmt::format("cluster '{}' in project '{}' is already defined by '{}'",
                                cluster.cluster_id, cluster.project, it->second));
        }
      }
      config.clusters.push_back(std::move(cluster));
    }
  }
  if (auto n = root["manager"]) parse_manager(c, n, config.clusters, config.manager);
  if (!c.problems().empty()) throw FleetConfigError(std::move(c.problems()));
  return config;
}

FleetConfig load_fleet_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FleetConfigError({fmt::format("{}: cannot read the fleet file", path)});
  std::ostringstream text;
  text << in.rdbuf();
  return parse_fleet_config(text.str(), path);
}

}  // namespace falcon::fleet
