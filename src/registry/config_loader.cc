// Reading and validating repos.yaml: every problem is collected (not just the first) and each
// names the file, line, column and field path.
#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include "falcon/config.h"
#include "falcon/errors.h"

namespace falcon {
namespace {

// Closest candidate within a small edit distance, for "did you mean".
std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
      }
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

const char* kind_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "empty";
    default:
      return "undefined";
  }
}

// Collects problems while walking the document.
class Validator {
 public:
  explicit Validator(std::string source) : source_(std::move(source)) {}

  void problem(const YAML::Mark& mark, const std::string& path, const std::string& text) {
    if (mark.is_null()) {
      problems_.push_back(fmt::format("{}: {}: {}", source_, path, text));
    } else {
      problems_.push_back(
          fmt::format("{}:{}:{}: {}: {}", source_, mark.line + 1, mark.column + 1, path, text));
    }
  }
  void problem(const YAML::Node& node, const std::string& path, const std::string& text) {
    problem(node.Mark(), path, text);
  }

  std::vector<std::string>& problems() { return problems_; }

  // Checks that `map` has only `allowed` keys and no key twice; returns key -> (key node,
  // value node) in file order.
  std::vector<std::pair<YAML::Node, YAML::Node>> entries(const YAML::Node& map,
                                                         const std::string& path,
                                                         const std::vector<std::string>& allowed) {
    std::vector<std::pair<YAML::Node, YAML::Node>> out;
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      if (!key.IsScalar()) {
        problem(key, path, "keys must be strings");
        continue;
      }
      const std::string name = key.Scalar();
      const std::string key_path = path.empty() ? name : path + "." + name;
      if (!seen.insert(name).second) {
        problem(key, key_path, "given twice");
        continue;
      }
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        const std::string hint = closest(name, allowed);
        problem(key, key_path,
                hint.empty() ? fmt::format("unknown key (allowed: {})", fmt::join(allowed, ", "))
                             : fmt::format("unknown key (did you mean '{}'?)", hint));
        continue;
      }
      out.emplace_back(key, it->second);
    }
    return out;
  }

  std::optional<std::string> as_string(const YAML::Node& node, const std::string& path) {
    if (!node.IsScalar()) {
      problem(node, path, fmt::format("must be a string, got {}", kind_name(node)));
      return std::nullopt;
    }
    return node.Scalar();
  }

  std::optional<int> as_int(const YAML::Node& node, const std::string& path) {
    if (node.IsScalar()) {
      const std::string& text = node.Scalar();
      static const std::regex kInt(R"([-+]?[0-9]+)");
      if (std::regex_match(text, kInt)) {
        try {
          std::size_t used = 0;
          const long long v = std::stoll(text, &used);
          if (v >= INT32_MIN && v <= INT32_MAX) return static_cast<int>(v);
        } catch (const std::exception&) {
        }
        problem(node, path, fmt::format("'{}' is out of range", text));
        return std::nullopt;
      }
      problem(node, path, fmt::format("must be an integer, got '{}'", text));
      return std::nullopt;
    }
    problem(node, path, fmt::format("must be an integer, got {}", kind_name(node)));
    return std::nullopt;
  }

  std::optional<bool> as_bool(const YAML::Node& node, const std::string& path) {
    bool v = false;
    if (node.IsScalar() && YAML::convert<bool>::decode(node, v)) return v;
    problem(node, path,
            fmt::format("must be true or false, got {}",
                        node.IsScalar() ? "'" + node.Scalar() + "'" : kind_name(node)));
    return std::nullopt;
  }

  std::optional<std::vector<std::string>> as_string_list(const YAML::Node& node,
                                                         const std::string& path) {
    if (!node.IsSequence()) {
      problem(node, path, fmt::format("must be a list of strings, got {}", kind_name(node)));
      return std::nullopt;
    }
    std::vector<std::string> out;
    bool ok = true;
    for (std::size_t i = 0; i < node.size(); ++i) {
      auto s = as_string(node[i], fmt::format("{}[{}]", path, i));
      if (s)
        out.push_back(*s);
      else
        ok = false;
    }
    return ok ? std::optional(out) : std::nullopt;
  }

  std::optional<std::map<std::string, std::string>> as_string_map(const YAML::Node& node,
                                                                  const std::string& path) {
    if (node.IsNull()) return std::map<std::string, std::string>{};
    if (!node.IsMap()) {
      problem(node, path, fmt::format("must be a map of strings, got {}", kind_name(node)));
      return std::nullopt;
    }
    std::map<std::string, std::string> out;
    bool ok = true;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) {
        problem(it->first, path, "keys must be strings");
        ok = false;
        continue;
      }
      const std::string key = it->first.Scalar();
      const std::string key_path = path + "." + key;
      if (out.count(key)) {
        problem(it->first, key_path, "given twice");
        ok = false;
        continue;
      }
      auto v = as_string(it->second, key_path);
      if (v)
        out[key] = *v;
      else
        ok = false;
    }
    return ok ? std::optional(out) : std::nullopt;
  }

 private:
  std::string source_;
  std::vector<std::string> problems_;
};

const std::regex kClusterName("[a-z0-9-]+");
// xpk validates --cluster and --workload with this pattern and a 40-character limit.
const std::regex kXpkName("[a-z]([-a-z0-9]*[a-z0-9])?");
// A Kubernetes namespace (DNS label).
const std::regex kNamespace("[a-z0-9]([-a-z0-9]*[a-z0-9])?");

AcceleratorSlot parse_slot(Validator& v, const YAML::Node& node, const std::string& path,
                           bool& ok) {
  AcceleratorSlot slot;
  if (!node.IsMap()) {
    v.problem(
        node, path,
        fmt::format("must be a map with type, device_class and priority, got {}", kind_name(node)));
    ok = false;
    return slot;
  }
  bool has_type = false, has_class = false;
  for (auto& [key, value] : v.entries(node, path, {"type", "device_class", "priority"})) {
    const std::string name = key.Scalar();
    const std::string field = path + "." + name;
    if (name == "type") {
      has_type = true;
      auto s = v.as_string(value, field);
      if (!s) {
        ok = false;
        continue;
      }
      if (s->empty()) {
        v.problem(value, field, "must not be empty");
        ok = false;
      }
      slot.type = *s;
    } else if (name == "device_class") {
      has_class = true;
      auto s = v.as_string(value, field);
      if (!s) {
        ok = false;
        continue;
      }
      if (*s != "tpu" && *s != "gpu" && *s != "cpu") {
        v.problem(value, field, fmt::format("'{}' is not one of tpu, gpu, cpu", *s));
        ok = false;
      }
      slot.device_class = *s;
    } else if (name == "priority") {
      auto n = v.as_int(value, field);
      if (!n) {
        ok = false;
        continue;
      }
      if (*n < 1) {
        v.problem(value, field, fmt::format("must be an integer >= 1, got {}", *n));
        ok = false;
      }
      slot.priority = *n;
    }
  }
  if (!has_type) {
    v.problem(node, path + ".type", "missing");
    ok = false;
  }
  if (!has_class) {
    v.problem(node, path + ".device_class", "missing (tpu, gpu or cpu)");
    ok = false;
  }
  return slot;
}

std::optional<ClusterConfig> parse_cluster(Validator& v, const std::string& name,
                                           const YAML::Node& key, const YAML::Node& node) {
  const std::string path = "clusters." + name;
  bool ok = true;
  if (!std::regex_match(name, kClusterName) || name.size() > 63) {
    v.problem(key, path,
              "cluster name must be lowercase letters, digits and '-', at most 63 characters");
    ok = false;
  }
  if (!node.IsMap()) {
    v.problem(node, path,
              fmt::format("must be a map of cluster settings, got {}", kind_name(node)));
    return std::nullopt;
  }
  ClusterConfig c;
  c.name = name;
  c.provider = "gke";
  bool has_project = false, has_zone = false, has_cluster_id = false, has_accels = false;
  static const std::vector<std::string> kKeys = {
      "provider",   "project",           "zone",
      "cluster_id", "accelerator_types", "default_namespace",
      "gcs_bucket", "max_queue_depth",   "probe_timeout_s",
      "labels"};
  for (auto& entry : v.entries(node, path, kKeys)) {
    // Named references, not a structured binding: clang 14 (the fuzz build) cannot capture
    // structured bindings in the lambdas below.
    const YAML::Node& k = entry.first;
    YAML::Node& value = entry.second;
    const std::string field_name = k.Scalar();
    const std::string field = path + "." + field_name;
    auto required_string = [&](std::string& out, bool& present) {
      present = true;
      auto s = v.as_string(value, field);
      if (!s) {
        ok = false;
        return;
      }
      if (s->empty()) {
        v.problem(value, field, "must not be empty");
        ok = false;
      }
      out = *s;
    };
    if (field_name == "provider") {
      auto s = v.as_string(value, field);
      if (!s) {
        ok = false;
        continue;
      }
      if (*s != "gke") {
        v.problem(value, field, fmt::format("'{}' is not supported (only gke)", *s));
        ok = false;
      }
      c.provider = *s;
    } else if (field_name == "project") {
      required_string(c.project, has_project);
    } else if (field_name == "zone") {
      required_string(c.zone, has_zone);
    } else if (field_name == "cluster_id") {
      required_string(c.cluster_id, has_cluster_id);
      if (!c.cluster_id.empty() &&
          (!std::regex_match(c.cluster_id, kXpkName) || c.cluster_id.size() > 40)) {
        v.problem(value, field,
                  fmt::format("'{}' is not a name xpk accepts ([a-z]([-a-z0-9]*[a-z0-9])?, at "
                              "most 40 characters)",
                              c.cluster_id));
        ok = false;
      }
    } else if (field_name == "accelerator_types") {
      has_accels = true;
      if (!value.IsSequence()) {
        v.problem(value, field,
                  fmt::format("must be a list of accelerators, got {}", kind_name(value)));
        ok = false;
        continue;
      }
      if (value.size() == 0) {
        v.problem(value, field, "must list at least one accelerator");
        ok = false;
      }
      std::map<std::string, std::size_t> seen;
      for (std::size_t i = 0; i < value.size(); ++i) {
        const std::string slot_path = fmt::format("{}[{}]", field, i);
        AcceleratorSlot slot = parse_slot(v, value[i], slot_path, ok);
        if (!slot.type.empty()) {
          auto [it, inserted] = seen.emplace(slot.type, i);
          if (!inserted) {
            v.problem(
                value[i], slot_path + ".type",
                fmt::format("'{}' is listed twice (also at {}[{}])", slot.type, field, it->second));
            ok = false;
          }
        }
        c.accelerator_slots.push_back(std::move(slot));
      }
    } else if (field_name == "default_namespace") {
      auto s = v.as_string(value, field);
      if (!s) {
        ok = false;
        continue;
      }
      if (!std::regex_match(*s, kNamespace) || s->size() > 63) {
        v.problem(value, field, fmt::format("'{}' is not a Kubernetes namespace name", *s));
        ok = false;
      }
      c.default_namespace = *s;
    } else if (field_name == "gcs_bucket") {
      auto s = v.as_string(value, field);
      if (!s) {
        ok = false;
        continue;
      }
      if (s->rfind("gs://", 0) != 0 || s->size() <= 5) {
        v.problem(value, field, fmt::format("'{}' must start with gs:// and name a bucket", *s));
        ok = false;
      }
      c.gcs_bucket = *s;
    } else if (field_name == "max_queue_depth") {
      auto n = v.as_int(value, field);
      if (!n) {
        ok = false;
        continue;
      }
      if (*n < 0) {
        v.problem(value, field, fmt::format("must be >= 0, got {}", *n));
        ok = false;
      }
      c.max_queue_depth = *n;
    } else if (field_name == "probe_timeout_s") {
      auto n = v.as_int(value, field);
      if (!n) {
        ok = false;
        continue;
      }
      if (*n <= 0) {
        v.problem(value, field, fmt::format("must be > 0, got {}", *n));
        ok = false;
      }
      c.probe_timeout_s = *n;
    } else if (field_name == "labels") {
      auto m = v.as_string_map(value, field);
      if (!m) {
        ok = false;
        continue;
      }
      c.labels = *m;
    }
  }
  if (!has_project) {
    v.problem(key, path + ".project", "missing (the GCP project id)");
    ok = false;
  }
  if (!has_zone) {
    v.problem(key, path + ".zone", "missing (the cluster's zone or region)");
    ok = false;
  }
  if (!has_cluster_id) {
    v.problem(key, path + ".cluster_id", "missing (the GKE cluster name)");
    ok = false;
  }
  if (!has_accels) {
    v.problem(key, path + ".accelerator_types", "missing (list at least one accelerator)");
    ok = false;
  }
  if (!ok) return std::nullopt;
  return c;
}

void parse_xpk(Validator& v, const YAML::Node& node, XpkSettings& out) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    v.problem(node, "xpk", fmt::format("must be a map, got {}", kind_name(node)));
    return;
  }
  for (auto& [k, value] : v.entries(node, "xpk",
                                    {"binary", "extra_args", "env", "namespace_flag",
                                     "command_timeout_s", "gcloud_binary", "state_dir"})) {
    const std::string name = k.Scalar();
    const std::string field = "xpk." + name;
    if (name == "binary" || name == "gcloud_binary" || name == "state_dir") {
      auto s = v.as_string(value, field);
      if (!s) continue;
      if (s->empty() && name != "state_dir") {
        v.problem(value, field, "must not be empty");
        continue;
      }
      (name == "binary"          ? out.binary
       : name == "gcloud_binary" ? out.gcloud_binary
                                 : out.state_dir) = *s;
    } else if (name == "extra_args") {
      if (auto l = v.as_string_list(value, field)) out.extra_args = *l;
    } else if (name == "env") {
      if (auto m = v.as_string_map(value, field)) out.env = *m;
    } else if (name == "namespace_flag") {
      auto s = v.as_string(value, field);
      if (!s) continue;
      if (*s != "auto" && *s != "supported" && *s != "unsupported") {
        v.problem(value, field, fmt::format("'{}' is not one of auto, supported, unsupported", *s));
        continue;
      }
      out.namespace_flag = *s;
    } else if (name == "command_timeout_s") {
      auto n = v.as_int(value, field);
      if (!n) continue;
      if (*n <= 0) {
        v.problem(value, field, fmt::format("must be > 0, got {}", *n));
        continue;
      }
      out.command_timeout_s = *n;
    }
  }
}

void parse_gcp(Validator& v, const YAML::Node& node, GcpSettings& out) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    v.problem(node, "gcp", fmt::format("must be a map, got {}", kind_name(node)));
    return;
  }
  const std::vector<std::string> keys = {
      "logging_endpoint",  "storage_endpoint", "token_endpoint",           "metadata_host",
      "access_token_file", "ca_file",          "logging_reads_per_minute", "http_timeout_s",
      "upload_chunk_bytes"};
  for (auto& [k, value] : v.entries(node, "gcp", keys)) {
    const std::string name = k.Scalar();
    const std::string field = "gcp." + name;
    if (name == "logging_reads_per_minute" || name == "http_timeout_s" ||
        name == "upload_chunk_bytes") {
      auto n = v.as_int(value, field);
      if (!n) continue;
      if (*n <= 0) {
        v.problem(value, field, fmt::format("must be > 0, got {}", *n));
        continue;
      }
      if (name == "upload_chunk_bytes" && *n % (256 * 1024) != 0) {
        v.problem(value, field, fmt::format("must be a multiple of 262144 (256 KiB), got {}", *n));
        continue;
      }
      (name == "logging_reads_per_minute" ? out.logging_reads_per_minute
       : name == "http_timeout_s"         ? out.http_timeout_s
                                          : out.upload_chunk_bytes) = *n;
      continue;
    }
    auto s = v.as_string(value, field);
    if (!s) continue;
    if ((name == "logging_endpoint" || name == "storage_endpoint" || name == "token_endpoint") &&
        !s->empty() && s->rfind("http://", 0) != 0 && s->rfind("https://", 0) != 0) {
      v.problem(value, field,
                fmt::format("'{}' must be a URL starting with http:// or https://", *s));
      continue;
    }
    if (name == "logging_endpoint")
      out.logging_endpoint = *s;
    else if (name == "storage_endpoint")
      out.storage_endpoint = *s;
    else if (name == "token_endpoint")
      out.token_endpoint = *s;
    else if (name == "metadata_host")
      out.metadata_host = *s;
    else if (name == "access_token_file")
      out.access_token_file = *s;
    else if (name == "ca_file")
      out.ca_file = *s;
  }
}

void parse_selection(Validator& v, const YAML::Node& node, SelectionSettings& out) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    v.problem(node, "selection", fmt::format("must be a map, got {}", kind_name(node)));
    return;
  }
  for (auto& [k, value] : v.entries(node, "selection", {"max_parallel_probes"})) {
    const std::string field = "selection." + k.Scalar();
    auto n = v.as_int(value, field);
    if (!n) continue;
    if (*n < 1 || *n > 256) {
      v.problem(value, field, fmt::format("must be between 1 and 256, got {}", *n));
      continue;
    }
    out.max_parallel_probes = *n;
  }
}

// Paths in `xpk:` and `gcp:` that are relative are taken relative to the config file's folder,
// so a repos.yaml can sit beside the binaries and tokens it names.
std::string resolve_relative(const std::string& value, const std::string& source) {
  if (value.empty() || value.front() == '/' || value.find('/') == std::string::npos) return value;
  const auto slash = source.rfind('/');
  if (slash == std::string::npos) return value;
  return source.substr(0, slash + 1) + value;
}

}  // namespace

FabricConfig parse_fabric_config(std::string_view yaml_text, const std::string& source_name) {
  Validator v(source_name);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    v.problem(e.mark, "(document)", "YAML syntax error: " + e.msg);
    throw ClusterConfigError(std::move(v.problems()));
  }
  FabricConfig config;
  config.source_path = source_name;
  if (!root.IsMap()) {
    v.problem(root, "(document)",
              fmt::format("must be a map with a 'clusters' section, got {}", kind_name(root)));
    throw ClusterConfigError(std::move(v.problems()));
  }
  bool has_clusters = false;
  for (auto& [key, value] : v.entries(root, "", {"clusters", "xpk", "gcp", "selection"})) {
    const std::string name = key.Scalar();
    if (name == "clusters") {
      has_clusters = true;
      if (!value.IsMap()) {
        v.problem(
            value, "clusters",
            fmt::format("must be a map of cluster name to settings, got {}", kind_name(value)));
        continue;
      }
      std::map<std::string, int> first_line;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!it->first.IsScalar()) {
          v.problem(it->first, "clusters", "cluster names must be strings");
          continue;
        }
        const std::string cluster_name = it->first.Scalar();
        auto [seen, inserted] = first_line.emplace(cluster_name, it->first.Mark().line + 1);
        if (!inserted) {
          v.problem(it->first, "clusters." + cluster_name,
                    fmt::format("cluster name given twice (first at line {})", seen->second));
          continue;
        }
        if (auto c = parse_cluster(v, cluster_name, it->first, it->second)) {
          config.clusters.push_back(std::move(*c));
        }
      }
    } else if (name == "xpk") {
      parse_xpk(v, value, config.xpk);
    } else if (name == "gcp") {
      parse_gcp(v, value, config.gcp);
    } else if (name == "selection") {
      parse_selection(v, value, config.selection);
    }
  }
  if (!has_clusters) v.problem(root, "clusters", "missing (the map of clusters)");
  if (!v.problems().empty()) throw ClusterConfigError(std::move(v.problems()));

  config.xpk.binary = resolve_relative(config.xpk.binary, source_name);
  config.xpk.state_dir = resolve_relative(config.xpk.state_dir, source_name);
  config.gcp.access_token_file = resolve_relative(config.gcp.access_token_file, source_name);
  config.gcp.ca_file = resolve_relative(config.gcp.ca_file, source_name);
  return config;
}

FabricConfig load_fabric_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ClusterConfigError(
        {fmt::format("{}: cannot read the configuration: {}", path, std::strerror(errno))});
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_fabric_config(text.str(), path);
}

}  // namespace falcon
