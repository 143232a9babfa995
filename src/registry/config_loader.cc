// Reading and validating repos.yaml: every problem is collected (not just the first) and each
// names the file, line, column and field path.
//
// Each section is read by a table of one-line field readers (read_string, read_int, read_enum,
// ...): a reader checks presence, kind, size and value, records a problem or assigns the field,
// and registers the key, so that Section::finish can report every key no reader named. Every
// string is bounded before anything else looks at it, and no check uses std::regex.
#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "falcon/accelerator_types.h"
#include "falcon/config.h"
#include "falcon/errors.h"
#include "falcon/gcs_uri.h"
#include "falcon/values.h"
#include "util/closest.h"
#include "util/names.h"

namespace falcon {
namespace {

// Bounds of what the loader accepts (docs/configuration.md lists them).
constexpr std::size_t kMaxClusterName = 63;
constexpr std::size_t kMaxAcceleratorType = 64;
constexpr std::size_t kMaxPath = 4096;
constexpr std::size_t kMaxUrl = 2048;
constexpr std::size_t kMaxHost = 261;  // a 253-character DNS name and a port
constexpr std::size_t kMaxLabelKey = 63;
constexpr std::size_t kMaxLabelValue = 256;
constexpr std::size_t kMaxArg = 4096;
constexpr std::size_t kMaxEnvName = 256;
constexpr std::size_t kMaxEnvValue = 4096;
constexpr std::size_t kMaxListItems = 256;
constexpr int kMaxPriority = 1000;
constexpr int kMaxQueueDepth = 1'000'000;
constexpr int kMaxTimeoutS = 7 * 24 * 3600;
constexpr int kMaxReadsPerMinute = 1'000'000;
constexpr int kChunkQuantum = 256 * 1024;
constexpr int kMaxChunkBytes = 1 << 30;
constexpr int kMaxParallelProbes = 256;
constexpr int kMaxBreakerFailures = 1000;
constexpr double kMaxWeight = 1000.0;
constexpr int kMaxBreakerCooldownS = 7 * 24 * 3600;
constexpr int kMaxRetentionH = 24 * 3650;
constexpr int kMaxBucketMin = 24 * 60 * 31;

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

// A key as it appears in a field path: as written when it is short and plain, else quoted.
std::string segment(std::string_view key) {
  const bool plain =
      !key.empty() && key.size() <= kMaxClusterName &&
      std::all_of(key.begin(), key.end(), [](char c) { return c > ' ' && c < 0x7F && c != '\''; });
  return plain ? std::string(key) : quote_value(key, 24);
}

// Every problem found, each `source:line:col: path: text`.
class Problems {
 public:
  explicit Problems(std::string source) : source_(std::move(source)) {}

  void add(const YAML::Mark& mark, std::string_view path, std::string_view text) {
    if (mark.is_null()) {
      list_.push_back(fmt::format("{}: {}: {}", source_, path, text));
    } else {
      list_.push_back(
          fmt::format("{}:{}:{}: {}: {}", source_, mark.line + 1, mark.column + 1, path, text));
    }
  }
  void add(const YAML::Node& node, std::string_view path, std::string_view text) {
    add(node.Mark(), path, text);
  }
  std::size_t count() const { return list_.size(); }
  [[noreturn]] void raise() { throw ClusterConfigError(std::move(list_)); }

 private:
  std::string source_;
  std::vector<std::string> list_;
};

// How a string field is checked, after the generic checks (a scalar, no NUL byte, not empty
// unless allowed, at most max_bytes).
struct StringRule {
  std::size_t max_bytes;
  bool may_be_empty = false;
  // What is wrong with the value (a phrase that quotes it), or "" when nothing is.
  std::function<std::string(std::string_view)> check;
};

// Whether a key must be present; `what` explains a missing one.
struct Required {
  const char* what = "";
};

std::string no_controls(std::string_view v) {
  const bool has = std::any_of(v.begin(), v.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
  });
  return has ? fmt::format("{} contains a control character", quote_value(v)) : "";
}

// An integer scalar: optional sign and decimal digits, no more than fit in a long long.
std::optional<long long> parse_integer(std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(std::string(text));
}

// A plain decimal scalar (digits, at most one '.', optional sign; no exponent, inf or nan).
std::optional<double> parse_decimal(std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
  if (digits.empty() || digits.size() > 24 || digits == "." ||
      std::count(digits.begin(), digits.end(), '.') > 1 ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    return std::nullopt;
  }
  return std::stod(std::string(text));
}

// A YAML map read field by field (see the file comment).
class Section {
 public:
  // `missing_at`: where a missing required key is reported (the map's own key, usually).
  Section(Problems& problems, const YAML::Node& map, std::string path, YAML::Mark missing_at)
      : problems_(problems), path_(std::move(path)), missing_at_(missing_at) {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key = it->first;
      if (!key.IsScalar()) {
        problems_.add(key, path_.empty() ? "(document)" : path_, "keys must be strings");
        continue;
      }
      if (!seen.insert(key.Scalar()).second) {
        problems_.add(key, field(key.Scalar()), "given twice");
        continue;
      }
      entries_.push_back({key, it->second});
    }
  }

  std::string field(std::string_view key) const {
    return path_.empty() ? segment(key) : path_ + "." + segment(key);
  }

  // The value of `key`, or nullopt when absent (a problem when required). Registers the key.
  std::optional<YAML::Node> take(std::string_view key, std::optional<Required> required = {}) {
    known_.emplace_back(key);
    for (const auto& [k, value] : entries_) {
      if (k.Scalar() == key) return value;
    }
    if (required) {
      problems_.add(missing_at_, field(key),
                    *required->what ? fmt::format("missing ({})", required->what) : "missing");
    }
    return std::nullopt;
  }

  // Reads a string field into *dst. False when absent or bad.
  bool read_string(std::string_view key, std::string* dst, const StringRule& rule,
                   std::optional<Required> required = {}) {
    const auto node = take(key, required);
    if (!node) return false;
    auto value = string_value(*node, field(key), rule);
    if (!value) return false;
    *dst = std::move(*value);
    return true;
  }

  // Reads an integer field in [min, max] into *dst. False when absent or bad.
  bool read_int(std::string_view key, int min, int max, int* dst) {
    const auto node = take(key);
    if (!node) return false;
    auto value = int_value(*node, field(key), min, max);
    if (!value) return false;
    *dst = *value;
    return true;
  }

  // Reads a field spelled as one of an enum's names. False when absent or bad.
  template <typename Enum>
  bool read_enum(std::string_view key, Enum* dst, std::optional<Enum> (*parse)(std::string_view),
                 const char* choices, std::optional<Required> required = {}) {
    const auto node = take(key, required);
    if (!node) return false;
    const StringRule rule{.max_bytes = 32};
    auto text = string_value(*node, field(key), rule);
    if (!text) return false;
    const std::optional<Enum> value = parse(*text);
    if (!value) {
      problems_.add(*node, field(key),
                    fmt::format("{} is not one of {}", quote_value(*text), choices));
      return false;
    }
    *dst = *value;
    return true;
  }

  // Reads a list of strings (at most kMaxListItems). False when absent or bad.
  bool read_string_list(std::string_view key, std::vector<std::string>* dst,
                        const StringRule& rule) {
    const auto node = take(key);
    if (!node) return false;
    const std::string path = field(key);
    if (!node->IsSequence()) {
      problems_.add(*node, path,
                    fmt::format("must be a list of strings, got {}", kind_name(*node)));
      return false;
    }
    if (node->size() > kMaxListItems) {
      problems_.add(
          *node, path,
          fmt::format("has {} items; at most {} are allowed", node->size(), kMaxListItems));
      return false;
    }
    std::vector<std::string> out;
    bool ok = true;
    for (std::size_t i = 0; i < node->size(); ++i) {
      auto s = string_value((*node)[i], fmt::format("{}[{}]", path, i), rule);
      if (s) {
        out.push_back(std::move(*s));
      } else {
        ok = false;
      }
    }
    if (ok) *dst = std::move(out);
    return ok;
  }

  // Reads a map of strings (at most kMaxListItems entries; empty when null). False when absent
  // or bad.
  bool read_string_map(std::string_view key, std::map<std::string, std::string>* dst,
                       const StringRule& key_rule, const StringRule& value_rule) {
    const auto node = take(key);
    if (!node) return false;
    const std::string path = field(key);
    if (node->IsNull()) {
      dst->clear();
      return true;
    }
    if (!node->IsMap()) {
      problems_.add(*node, path, fmt::format("must be a map of strings, got {}", kind_name(*node)));
      return false;
    }
    if (node->size() > kMaxListItems) {
      problems_.add(
          *node, path,
          fmt::format("has {} entries; at most {} are allowed", node->size(), kMaxListItems));
      return false;
    }
    std::map<std::string, std::string> out;
    bool ok = true;
    for (auto it = node->begin(); it != node->end(); ++it) {
      auto k = string_value(it->first, path + " key", key_rule);
      if (!k) {
        ok = false;
        continue;
      }
      const std::string entry_path = path + "." + segment(*k);
      if (out.count(*k)) {
        problems_.add(it->first, entry_path, "given twice");
        ok = false;
        continue;
      }
      auto v = string_value(it->second, entry_path, value_rule);
      if (v) {
        out.emplace(std::move(*k), std::move(*v));
      } else {
        ok = false;
      }
    }
    if (ok) *dst = std::move(out);
    return ok;
  }

  // Reports every key that no reader named, with the nearest known key as a hint.
  void finish() {
    for (const auto& [key, value] : entries_) {
      const std::string& name = key.Scalar();
      if (std::find(known_.begin(), known_.end(), name) != known_.end()) continue;
      const std::string hint = nearest_by_edit_distance(name, known_);
      problems_.add(key, field(name),
                    hint.empty() ? fmt::format("unknown key (allowed: {})", fmt::join(known_, ", "))
                                 : fmt::format("unknown key (did you mean '{}'?)", hint));
    }
  }

  // The checks behind read_string, for values that are not a key of this section.
  std::optional<std::string> string_value(const YAML::Node& node, const std::string& path,
                                          const StringRule& rule) {
    if (!node.IsScalar()) {
      problems_.add(node, path, fmt::format("must be a string, got {}", kind_name(node)));
      return std::nullopt;
    }
    const std::string& s = node.Scalar();
    std::string problem;
    if (s.size() > rule.max_bytes) {
      problem = fmt::format("{} is too long: at most {} bytes", quote_value(s), rule.max_bytes);
    } else if (s.find('\0') != std::string::npos) {
      problem = fmt::format("{} contains a NUL byte", quote_value(s));
    } else if (s.empty() && !rule.may_be_empty) {
      problem = "must not be empty";
    } else if (!s.empty() && rule.check) {
      problem = rule.check(s);
    }
    if (!problem.empty()) {
      problems_.add(node, path, problem);
      return std::nullopt;
    }
    return s;
  }

  std::optional<int> int_value(const YAML::Node& node, const std::string& path, int min, int max) {
    if (!node.IsScalar()) {
      problems_.add(node, path, fmt::format("must be an integer, got {}", kind_name(node)));
      return std::nullopt;
    }
    const std::optional<long long> n = parse_integer(node.Scalar());
    if (!n) {
      problems_.add(node, path,
                    fmt::format("must be an integer, got {}", quote_value(node.Scalar())));
      return std::nullopt;
    }
    if (*n < min || *n > max) {
      problems_.add(node, path, fmt::format("must be between {} and {}, got {}", min, max, *n));
      return std::nullopt;
    }
    return static_cast<int>(*n);
  }

  // Reads true or false into *dst. False when absent or bad.
  bool read_bool(std::string_view key, bool* dst) {
    const auto node = take(key);
    if (!node) return false;
    if (!node->IsScalar() || (node->Scalar() != "true" && node->Scalar() != "false")) {
      problems_.add(*node, field(key),
                    fmt::format("must be true or false, got {}",
                                node->IsScalar() ? quote_value(node->Scalar()) : kind_name(*node)));
      return false;
    }
    *dst = node->Scalar() == "true";
    return true;
  }

  // Reads a decimal number in [min, max] into *dst. False when absent or bad.
  bool read_double(std::string_view key, double min, double max, double* dst) {
    const auto node = take(key);
    if (!node) return false;
    const std::string path = field(key);
    if (!node->IsScalar()) {
      problems_.add(*node, path, fmt::format("must be a number, got {}", kind_name(*node)));
      return false;
    }
    const std::optional<double> n = parse_decimal(node->Scalar());
    if (!n) {
      problems_.add(*node, path,
                    fmt::format("must be a number, got {}", quote_value(node->Scalar())));
      return false;
    }
    if (*n < min || *n > max) {
      problems_.add(*node, path, fmt::format("must be between {} and {}, got {}", min, max, *n));
      return false;
    }
    *dst = *n;
    return true;
  }

  Problems& problems() { return problems_; }

 private:
  Problems& problems_;
  std::string path_;
  YAML::Mark missing_at_;
  std::vector<std::pair<YAML::Node, YAML::Node>> entries_;  // file order, first of each key
  std::vector<std::string> known_;
};

// --- Rules of the string fields.

std::string check_project(std::string_view v) {
  return is_gcp_project_id(v)
             ? ""
             : fmt::format(
                   "{} is not a GCP project id (lowercase letters, digits and '-', starting "
                   "with a letter, at most 30 characters)",
                   quote_value(v));
}

std::string check_location(std::string_view v) {
  return gcp_location_kind(v)
             ? ""
             : fmt::format("{} is not a GCP zone or region (like us-central2-b or us-central1)",
                           quote_value(v));
}

std::string check_cluster_id(std::string_view v) {
  return is_xpk_name(v) ? ""
                        : fmt::format(
                              "{} is not a name xpk accepts ([a-z]([-a-z0-9]*[a-z0-9])?, at "
                              "most 40 characters)",
                              quote_value(v));
}

std::string check_namespace(std::string_view v) {
  return is_dns_label(v) ? ""
                         : fmt::format("{} is not a Kubernetes namespace name", quote_value(v));
}

std::string check_gcs(std::string_view v) {
  try {
    (void)parse_gcs_uri(v);
    return "";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
}

std::string check_url(std::string_view v) {
  if (!v.starts_with("http://") && !v.starts_with("https://")) {
    return fmt::format("{} must be a URL starting with http:// or https://", quote_value(v));
  }
  return no_controls(v);
}

std::string check_provider(std::string_view v) {
  return v == "gke" ? "" : fmt::format("{} is not supported (only gke)", quote_value(v));
}

const StringRule kProjectRule{.max_bytes = 284, .check = check_project};
const StringRule kLocationRule{.max_bytes = kGcpLocationMaxLength, .check = check_location};
const StringRule kClusterIdRule{.max_bytes = kXpkNameMaxLength, .check = check_cluster_id};
const StringRule kNamespaceRule{.max_bytes = 63, .check = check_namespace};
const StringRule kGcsRule{.max_bytes = kGcsUriMaxBytes, .check = check_gcs};
const StringRule kOptionalGcsRule{
    .max_bytes = kGcsUriMaxBytes, .may_be_empty = true, .check = [](std::string_view v) {
      return v.empty() ? std::string() : check_gcs(v);
    }};
// LOCATION/BUCKET_ID of a log bucket.
std::string check_log_bucket(std::string_view v) {
  const auto slash = v.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == v.size() ||
      v.find('/', slash + 1) != std::string_view::npos) {
    return fmt::format("{} is not LOCATION/BUCKET_ID (e.g. global/_Default)", quote_value(v));
  }
  return no_controls(v);
}
const StringRule kLogBucketRule{.max_bytes = 200, .check = check_log_bucket};
const StringRule kProviderRule{.max_bytes = 16, .check = check_provider};
const StringRule kAcceleratorRule{.max_bytes = kMaxAcceleratorType, .check = no_controls};
const StringRule kLabelKeyRule{.max_bytes = kMaxLabelKey, .check = no_controls};
const StringRule kLabelValueRule{
    .max_bytes = kMaxLabelValue, .may_be_empty = true, .check = no_controls};
const StringRule kPathRule{.max_bytes = kMaxPath, .check = no_controls};
const StringRule kOptionalPathRule{
    .max_bytes = kMaxPath, .may_be_empty = true, .check = no_controls};
const StringRule kUrlRule{.max_bytes = kMaxUrl, .may_be_empty = true, .check = check_url};
const StringRule kOptionalUrlOrPathRule{
    .max_bytes = kMaxUrl, .may_be_empty = true, .check = no_controls};
const StringRule kHostRule{.max_bytes = kMaxHost, .may_be_empty = true, .check = no_controls};
// host:port, the host a name, an IPv4 address or an IPv6 address in brackets, the port 0..65535.
std::string check_listen(std::string_view v) {
  const auto colon = v.rfind(':');
  const std::string_view host = colon == std::string_view::npos ? "" : v.substr(0, colon);
  const std::string_view port = colon == std::string_view::npos ? "" : v.substr(colon + 1);
  const bool port_ok =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      std::stoi(std::string(port)) <= 65535;
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  const bool host_ok = !host.empty() &&
                       (bracketed || host.find_first_of("[]:") == std::string_view::npos) &&
                       std::all_of(host.begin(), host.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                                c == '-' || c == ':' || c == '[' || c == ']' || c == '%';
                       });
  if (!host_ok || !port_ok) {
    return fmt::format(
        "{} is not host:port (like 127.0.0.1:8787, 0.0.0.0:8787 or [::1]:8787; port 0..65535)",
        quote_value(v));
  }
  return "";
}

const StringRule kListenRule{.max_bytes = kMaxHost, .check = check_listen};
// serve.allowed_hosts: a Host header value, "host" or "host:port" (IPv6 in brackets), or "*".
std::string check_allowed_host(std::string_view v) {
  if (v == "*") return "";
  const bool ok = std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
           c == '[' || c == ']' || c == '_';
  });
  return ok ? "" : fmt::format("{} is not a host or host:port (or *)", quote_value(v));
}
// serve.allowed_origins: scheme://host[:port], as browsers send it in Origin.
std::string check_origin(std::string_view v) {
  const std::size_t scheme = v.find("://");
  if ((!v.starts_with("http://") && !v.starts_with("https://")) || v.size() <= scheme + 3 ||
      v.find('/', scheme + 3) != std::string_view::npos) {
    return fmt::format("{} is not an origin (http[s]://host[:port], no path)", quote_value(v));
  }
  return check_allowed_host(v.substr(scheme + 3));
}
const StringRule kAllowedHostRule{.max_bytes = kMaxHost, .check = check_allowed_host};
const StringRule kOriginRule{.max_bytes = kMaxHost + 8, .check = check_origin};
const StringRule kArgRule{.max_bytes = kMaxArg, .may_be_empty = true};
const StringRule kEnvNameRule{.max_bytes = kMaxEnvName, .check = [](std::string_view v) {
                                return v.find('=') == std::string_view::npos
                                           ? no_controls(v)
                                           : fmt::format("{} contains '='", quote_value(v));
                              }};
const StringRule kEnvValueRule{.max_bytes = kMaxEnvValue, .may_be_empty = true};

// --- Sections.

// The accelerator type in its canonical spelling, or nullopt after a problem: a name xpk does
// not know, or one of another class than `device_class`.
std::optional<std::string> check_accelerator(Problems& problems, const YAML::Node& node,
                                             const std::string& path, const std::string& type,
                                             std::optional<DeviceClass> device_class) {
  const std::optional<std::string> canonical = canonical_accelerator_type(type);
  if (!canonical) {
    // The names the user most likely meant: for a GKE accelerator name, xpk's names of it;
    // else the closest names of the class (the spec's "tpu-" prefix aside), as xpk would say.
    std::vector<std::string> hints;
    for (const XpkAcceleratorType& t : xpk_accelerator_types()) {
      if (hints.size() < 5 && !t.gke_accelerator.empty() && t.gke_accelerator == type) {
        hints.push_back(t.name);
      }
    }
    if (hints.empty()) {
      std::string_view base = type;
      if (device_class == DeviceClass::kTpu && base.starts_with("tpu-")) base.remove_prefix(4);
      hints = suggest_xpk_accelerator_types(base, device_class);
    }
    problems.add(
        node, path,
        fmt::format("{} is not an accelerator type xpk {} accepts (closest valid types: {})",
                    quote_value(type), kXpkAcceleratorTableVersion, fmt::join(hints, ", ")));
    return std::nullopt;
  }
  const DeviceClass actual = find_xpk_accelerator_type(*canonical)->device_class;
  if (device_class && actual != *device_class) {
    problems.add(
        node, path,
        fmt::format("{} is a {} type in xpk {}, but device_class is {}", quote_value(type),
                    to_string(actual), kXpkAcceleratorTableVersion, to_string(*device_class)));
    return std::nullopt;
  }
  return canonical;
}

std::optional<AcceleratorSlot> parse_slot(Problems& problems, const YAML::Node& node,
                                          const std::string& path) {
  if (!node.IsMap()) {
    problems.add(
        node, path,
        fmt::format("must be a map with type, device_class and priority, got {}", kind_name(node)));
    return std::nullopt;
  }
  const std::size_t before = problems.count();
  Section s(problems, node, path, node.Mark());
  AcceleratorSlot slot;
  std::string type;
  const bool has_type = s.read_string("type", &type, kAcceleratorRule, Required{});
  DeviceClass device_class = DeviceClass::kTpu;
  const bool has_class = s.read_enum("device_class", &device_class, parse_device_class,
                                     "tpu, gpu, cpu", Required{"tpu, gpu or cpu"});
  s.read_int("priority", 1, kMaxPriority, &slot.priority);
  s.finish();
  if (has_type) {
    const auto type_node = node["type"];
    auto canonical = check_accelerator(problems, type_node, s.field("type"), type,
                                       has_class ? std::optional(device_class) : std::nullopt);
    if (canonical) slot.type = std::move(*canonical);
  }
  slot.device_class = device_class;
  if (problems.count() > before) return std::nullopt;
  return slot;
}

void parse_slots(Problems& problems, const YAML::Node& node, const std::string& path,
                 ClusterConfig& c) {
  if (!node.IsSequence()) {
    problems.add(node, path,
                 fmt::format("must be a list of accelerators, got {}", kind_name(node)));
    return;
  }
  if (node.size() == 0) {
    problems.add(node, path, "must list at least one accelerator");
    return;
  }
  if (node.size() > kMaxListItems) {
    problems.add(
        node, path,
        fmt::format("lists {} accelerators; at most {} are allowed", node.size(), kMaxListItems));
    return;
  }
  std::map<std::string, std::size_t> seen;  // canonical type -> index
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string slot_path = fmt::format("{}[{}]", path, i);
    std::optional<AcceleratorSlot> slot = parse_slot(problems, node[i], slot_path);
    if (!slot) continue;
    auto [it, inserted] = seen.emplace(slot->type, i);
    if (!inserted) {
      problems.add(node[i], slot_path + ".type",
                   fmt::format("{} is listed twice (also at {}[{}])", quote_value(slot->type), path,
                               it->second));
      continue;
    }
    c.accelerator_slots.push_back(std::move(*slot));
  }
}

// `zone` is what xpk gets as --zone and `location` where the GKE cluster is. xpk 1.13 asks
// gcloud for the cluster at `zone` when a cluster of that name is there, else at zone's region
// (core/gcloud_context.py, get_cluster_location), so: a zonal cluster is reached only through
// its own zone, a regional one through its region or any zone of it.
void check_zone_and_location(Problems& problems, const YAML::Node& node, const std::string& path,
                             const ClusterConfig& c) {
  const auto zone_kind = gcp_location_kind(c.zone);
  const auto location_kind = gcp_location_kind(c.location);
  if (!zone_kind || !location_kind || c.zone == c.location) return;
  const YAML::Node at = node["location"];
  const std::string field = path + ".location";
  if (region_of(c.zone) != region_of(c.location)) {
    problems.add(at, field,
                 fmt::format("{} is not in the region of zone {}: zone must be the cluster's "
                             "location or, for a regional cluster, a zone of its region",
                             quote_value(c.location), quote_value(c.zone)));
  } else if (*location_kind == LocationKind::kZone && *zone_kind == LocationKind::kRegion) {
    problems.add(at, field,
                 fmt::format("the cluster is zonal ({}) but zone is the region {}: xpk would ask "
                             "gcloud for the cluster in {} and get a 404; set zone: {}",
                             c.location, c.zone, c.zone, c.location));
  } else if (*location_kind == LocationKind::kZone) {
    problems.add(at, field,
                 fmt::format("the cluster is zonal ({}) but zone is {}: xpk reaches a zonal "
                             "cluster only through its own zone; set zone: {}",
                             c.location, c.zone, c.location));
  }
}

std::optional<ClusterConfig> parse_cluster(Problems& problems, const YAML::Node& key,
                                           const YAML::Node& node) {
  const std::string& name = key.Scalar();
  const std::string path = "clusters." + segment(name);
  const std::size_t before = problems.count();
  if (!is_dns_label(name, kMaxClusterName)) {
    problems.add(key, path,
                 "cluster name must be lowercase letters, digits and '-', at most 63 characters");
  }
  if (!node.IsMap()) {
    problems.add(node, path,
                 fmt::format("must be a map of cluster settings, got {}", kind_name(node)));
    return std::nullopt;
  }
  ClusterConfig c;
  c.name = name;
  c.provider = "gke";
  Section s(problems, node, path, key.Mark());
  s.read_string("provider", &c.provider, kProviderRule);
  s.read_string("project", &c.project, kProjectRule, Required{"the GCP project id"});
  const bool has_zone = s.read_string("zone", &c.zone, kLocationRule,
                                      Required{"the zone or region xpk gets as --zone"});
  const bool has_location = s.read_string("location", &c.location, kLocationRule);
  s.read_string("cluster_id", &c.cluster_id, kClusterIdRule, Required{"the GKE cluster name"});
  if (auto accelerators = s.take("accelerator_types", Required{"list at least one accelerator"})) {
    parse_slots(problems, *accelerators, s.field("accelerator_types"), c);
  }
  s.read_string("default_namespace", &c.default_namespace, kNamespaceRule);
  s.read_string("gcs_bucket", &c.gcs_bucket, kGcsRule);
  s.read_int("max_queue_depth", 0, kMaxQueueDepth, &c.max_queue_depth);
  s.read_int("probe_timeout_s", 1, kMaxTimeoutS, &c.probe_timeout_s);
  s.read_string_map("labels", &c.labels, kLabelKeyRule, kLabelValueRule);
  if (auto probe = s.take("probe")) {
    if (probe->IsMap()) {
      Section p(problems, *probe, s.field("probe"), probe->Mark());
      ProbeBackend backend = ProbeBackend::kXpk;
      if (p.read_enum("backend", &backend, parse_probe_backend, "xpk, kube")) {
        c.probe_backend = backend;
      }
      p.finish();
    } else if (!probe->IsNull()) {
      problems.add(*probe, s.field("probe"),
                   fmt::format("must be a map, got {}", kind_name(*probe)));
    }
  }
  s.finish();
  if (!has_location) c.location = c.zone;
  if (has_zone && has_location) check_zone_and_location(problems, node, path, c);
  if (problems.count() > before) return std::nullopt;
  return c;
}

void parse_clusters(Problems& problems, const YAML::Node& node, FabricConfig& config) {
  if (!node.IsMap()) {
    problems.add(node, "clusters",
                 fmt::format("must be a map of cluster name to settings, got {}", kind_name(node)));
    return;
  }
  std::map<std::string, int> first_line;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) {
      problems.add(it->first, "clusters", "cluster names must be strings");
      continue;
    }
    const std::string& name = it->first.Scalar();
    auto [seen, inserted] = first_line.emplace(name, it->first.Mark().line + 1);
    if (!inserted) {
      problems.add(it->first, "clusters." + segment(name),
                   fmt::format("cluster name given twice (first at line {})", seen->second));
      continue;
    }
    if (auto c = parse_cluster(problems, it->first, it->second)) {
      config.clusters.push_back(std::move(*c));
    }
  }
}

// The settings sections: a null value keeps the defaults.
std::optional<Section> settings_section(Problems& problems, const std::optional<YAML::Node>& node,
                                        const char* name) {
  if (!node || node->IsNull()) return std::nullopt;
  if (!node->IsMap()) {
    problems.add(*node, name, fmt::format("must be a map, got {}", kind_name(*node)));
    return std::nullopt;
  }
  return Section(problems, *node, name, node->Mark());
}

void parse_xpk(Problems& problems, const std::optional<YAML::Node>& node, XpkSettings& out) {
  auto s = settings_section(problems, node, "xpk");
  if (!s) return;
  s->read_string("binary", &out.binary, kPathRule);
  s->read_string_list("extra_args", &out.extra_args, kArgRule);
  s->read_string_map("env", &out.env, kEnvNameRule, kEnvValueRule);
  s->read_enum("namespace_flag", &out.namespace_flag, parse_namespace_flag,
               "auto, supported, unsupported");
  s->read_int("command_timeout_s", 1, kMaxTimeoutS, &out.command_timeout_s);
  s->read_string("gcloud_binary", &out.gcloud_binary, kPathRule);
  s->read_string("state_dir", &out.state_dir, kOptionalPathRule);
  s->read_string("runtime_dir", &out.runtime_dir, kOptionalPathRule);
  s->finish();
}

void parse_gcp(Problems& problems, const std::optional<YAML::Node>& node, GcpSettings& out) {
  auto s = settings_section(problems, node, "gcp");
  if (!s) return;
  s->read_string("logging_endpoint", &out.logging_endpoint, kUrlRule);
  s->read_string("storage_endpoint", &out.storage_endpoint, kUrlRule);
  s->read_string("token_endpoint", &out.token_endpoint, kUrlRule);
  s->read_string("metadata_host", &out.metadata_host, kHostRule);
  s->read_string("access_token_file", &out.access_token_file, kOptionalPathRule);
  s->read_string("ca_file", &out.ca_file, kOptionalPathRule);
  s->read_int("logging_reads_per_minute", 1, kMaxReadsPerMinute, &out.logging_reads_per_minute);
  s->read_int("http_timeout_s", 1, kMaxTimeoutS, &out.http_timeout_s);
  s->read_string("log_archive", &out.log_archive, kOptionalGcsRule);
  s->read_int("log_archive_lag_s", 0, kMaxTimeoutS, &out.log_archive_lag_s);
  s->read_bool("log_copy", &out.log_copy);
  s->read_string("log_copy_staging", &out.log_copy_staging, kOptionalGcsRule);
  s->read_string("log_copy_source", &out.log_copy_source, kLogBucketRule);
  s->read_int("log_copy_poll_s", 1, 3600, &out.log_copy_poll_s);
  s->read_int("log_copy_permission_wait_s", 0, 3600, &out.log_copy_permission_wait_s);
  int chunk = out.upload_chunk_bytes;
  if (s->read_int("upload_chunk_bytes", 1, kMaxChunkBytes, &chunk)) {
    if (chunk % kChunkQuantum != 0) {
      problems.add((*node)["upload_chunk_bytes"], "gcp.upload_chunk_bytes",
                   fmt::format("must be a multiple of {} (256 KiB), got {}", kChunkQuantum, chunk));
    } else {
      out.upload_chunk_bytes = chunk;
    }
  }
  s->finish();
}

void parse_selection(Problems& problems, const std::optional<YAML::Node>& node,
                     SelectionSettings& out) {
  auto s = settings_section(problems, node, "selection");
  if (!s) return;
  s->read_int("max_parallel_probes", 1, kMaxParallelProbes, &out.max_parallel_probes);
  s->read_enum("policy", &out.policy, parse_selection_policy, "priority, score, least-wait");
  const auto by_accelerator = s->take("policy_by_accelerator");
  const auto weights_node = s->take("weights");
  const auto signals_node = s->take("signals");
  const auto breaker_node = s->take("breaker");
  const auto fragmentation_node = s->take("fragmentation");
  s->finish();

  // policy_by_accelerator: {<accelerator type>: <policy>}, types in either spelling.
  if (by_accelerator && !by_accelerator->IsNull()) {
    if (!by_accelerator->IsMap()) {
      problems.add(*by_accelerator, "selection.policy_by_accelerator",
                   fmt::format("must be a map of accelerator type to policy, got {}",
                               kind_name(*by_accelerator)));
    } else {
      for (auto it = by_accelerator->begin(); it != by_accelerator->end(); ++it) {
        const std::string type = it->first.IsScalar() ? it->first.Scalar() : "";
        const std::string path = "selection.policy_by_accelerator." + segment(type);
        const auto canonical = check_accelerator(problems, it->first, path, type, std::nullopt);
        if (!canonical) continue;
        const std::string text = it->second.IsScalar() ? it->second.Scalar() : "";
        const auto policy = parse_selection_policy(text);
        if (!policy) {
          problems.add(
              it->second, path,
              fmt::format("{} is not one of priority, score, least-wait", quote_value(text)));
          continue;
        }
        if (!out.policy_by_accelerator.emplace(*canonical, *policy).second) {
          problems.add(it->first, path, "given twice (in either spelling)");
        }
      }
    }
  }

  if (auto w = settings_section(problems, weights_node, "selection.weights")) {
    w->read_double("priority", 0.0, kMaxWeight, &out.weights.priority);
    w->read_double("queue", 0.0, kMaxWeight, &out.weights.queue);
    w->read_double("wait", 0.0, kMaxWeight, &out.weights.wait);
    w->read_double("recent_wait", 0.0, kMaxWeight, &out.weights.recent_wait);
    w->read_double("health", 0.0, kMaxWeight, &out.weights.health);
    w->read_double("latency", 0.0, kMaxWeight, &out.weights.latency);
    w->read_double("capacity", 0.0, kMaxWeight, &out.weights.capacity);
    w->finish();
    const ScoreWeights& ws = out.weights;
    if (ws.priority + ws.queue + ws.wait + ws.recent_wait + ws.health + ws.latency <= 0.0) {
      problems.add(*weights_node, "selection.weights",
                   "at least one weight must be positive besides capacity (the score divides "
                   "by their sum, and capacity is left out when not known)");
    }
  }

  if (auto f = settings_section(problems, fragmentation_node, "selection.fragmentation")) {
    FragmentationSettings& fs = out.fragmentation;
    f->read_double("low", 0.0, 1.0, &fs.low);
    f->read_double("high", 0.0, 1.0, &fs.high);
    f->read_double("weight_low", 0.0, 1.0, &fs.weight_low);
    f->read_double("weight_mid", 0.0, 1.0, &fs.weight_mid);
    f->read_double("weight_high", 0.0, 1.0, &fs.weight_high);
    if (const auto fit = f->take("require_fit")) {
      const std::string text = fit->IsScalar() ? fit->Scalar() : "";
      if (text == "true" || text == "false") {
        fs.require_fit = text == "true";
      } else {
        problems.add(*fit, "selection.fragmentation.require_fit",
                     fmt::format("must be true or false, got {}", quote_value(text)));
      }
    }
    f->finish();
    if (fs.high <= fs.low) {
      problems.add(*fragmentation_node, "selection.fragmentation.high",
                   fmt::format("must be above low ({}), got {}", fs.low, fs.high));
    }
  }

  if (auto g = settings_section(problems, signals_node, "selection.signals")) {
    g->read_int("window_s", 60, kMaxTimeoutS, &out.signals.window_s);
    g->read_double("wait_scale_s", 1.0, 604800.0, &out.signals.wait_scale_s);
    g->read_double("latency_scale_ms", 1.0, 3600000.0, &out.signals.latency_scale_ms);
    g->read_double("prior_drain_per_min", 0.001, 100000.0, &out.signals.prior_drain_per_min);
    g->finish();
  }

  auto b = settings_section(problems, breaker_node, "selection.breaker");
  if (!b) return;
  b->read_int("failures", 1, kMaxBreakerFailures, &out.breaker.failures);
  b->read_int("cooldown_s", 1, kMaxTimeoutS, &out.breaker.cooldown_s);
  b->read_int("cooldown_max_s", 1, kMaxBreakerCooldownS, &out.breaker.cooldown_max_s);
  b->finish();
  if (out.breaker.cooldown_max_s < out.breaker.cooldown_s) {
    problems.add((*breaker_node)["cooldown_max_s"], "selection.breaker.cooldown_max_s",
                 fmt::format("must be at least cooldown_s ({}), got {}", out.breaker.cooldown_s,
                             out.breaker.cooldown_max_s));
  }
}

std::optional<RepeatRecords> parse_repeat_records(std::string_view text) {
  if (text == "none") return RepeatRecords::kNone;
  if (text == "written") return RepeatRecords::kWritten;
  if (text == "durable") return RepeatRecords::kDurable;
  return std::nullopt;
}

std::optional<AccessLog> parse_access_log(std::string_view text) {
  if (text == "all") return AccessLog::kAll;
  if (text == "errors") return AccessLog::kErrors;
  if (text == "none") return AccessLog::kNone;
  return std::nullopt;
}

void parse_serve(Problems& problems, const std::optional<YAML::Node>& node, ServeSettings& out) {
  auto s = settings_section(problems, node, "serve");
  if (!s) return;
  s->read_string("listen", &out.listen, kListenRule);
  s->read_string("state", &out.state, kOptionalUrlOrPathRule);
  s->read_string("tokens_file", &out.tokens_file, kOptionalPathRule);
  s->read_int("probe_interval_s", 1, kMaxTimeoutS, &out.probe_interval_s);
  s->read_double("probe_jitter", 0.0, 0.5, &out.probe_jitter);
  s->read_int("max_probe_age_s", 1, kMaxTimeoutS, &out.max_probe_age_s);
  s->read_int("select_reuse_ms", 0, 60000, &out.select_reuse_ms);
  s->read_enum("record_repeats", &out.record_repeats, parse_repeat_records,
               "none, written, durable");
  s->read_enum("access_log", &out.access_log, parse_access_log, "all, errors, none");
  if (const auto old = s->take("durable_repeats")) {
    problems.add(*old, "serve.durable_repeats",
                 "replaced by serve.record_repeats: durable (was true) or written (was false); "
                 "none, the default, stores no row per repeat");
  }
  s->read_int("unreachable_backoff_max_s", 1, kMaxTimeoutS, &out.unreachable_backoff_max_s);
  s->read_int("max_parallel_probes", 1, kMaxParallelProbes, &out.max_parallel_probes);
  s->read_int("probe_retention_full_h", 0, kMaxRetentionH, &out.probe_retention_full_h);
  s->read_int("probe_bucket_min", 1, kMaxBucketMin, &out.probe_bucket_min);
  s->read_int("probe_drop_after_h", 0, kMaxRetentionH, &out.probe_drop_after_h);
  s->read_int("selection_retention_h", 0, kMaxRetentionH, &out.selection_retention_h);
  s->read_int("shutdown_grace_s", 0, kMaxTimeoutS, &out.shutdown_grace_s);
  s->read_int("http_threads", 2, 1024, &out.http_threads);
  s->read_int("http_loops", 1, 64, &out.http_loops);
  s->read_int("probe_nice", 0, 19, &out.probe_nice);
  s->read_string_list("allowed_hosts", &out.allowed_hosts, kAllowedHostRule);
  s->read_string_list("allowed_origins", &out.allowed_origins, kOriginRule);
  const auto limits_node = s->take("limits");
  s->finish();
  if (auto l = settings_section(problems, limits_node, "serve.limits")) {
    ServeLimits& m = out.limits;
    constexpr int kMaxBytes = 1 << 30;
    if (int n = 0; l->read_int("max_connections", 1, 1000000, &n)) m.max_connections = n;
    l->read_int("max_connections_per_address", 1, 1000000, &m.max_connections_per_address);
    l->read_int("max_tls_handshakes", 1, 1000000, &m.max_tls_handshakes);
    l->read_int("max_target_bytes", 256, 1 << 20, &m.max_target_bytes);
    l->read_int("max_header_bytes", 1024, 1 << 20, &m.max_header_bytes);
    l->read_int("max_header_fields", 8, 10000, &m.max_header_fields);
    l->read_int("max_body_bytes", 1024, 64 << 20, &m.max_body_bytes);
    l->read_int("max_body_bytes_in_flight", 1024, kMaxBytes, &m.max_body_bytes_in_flight);
    l->read_int("max_header_bytes_in_flight", 1024, kMaxBytes, &m.max_header_bytes_in_flight);
    l->read_int("max_json_depth", 4, 1000, &m.max_json_depth);
    l->read_int("max_json_values", 16, 10000000, &m.max_json_values);
    l->read_double("idle_timeout_s", 0.01, 86400.0, &m.idle_timeout_s);
    l->read_double("header_timeout_s", 0.01, 3600.0, &m.header_timeout_s);
    l->read_double("body_timeout_s", 0.01, 3600.0, &m.body_timeout_s);
    l->read_double("write_timeout_s", 0.01, 3600.0, &m.write_timeout_s);
    l->read_int("max_queued_requests", 0, 1000000, &m.max_queued_requests);
    l->read_int("max_requests_per_token", 1, 100000, &m.max_requests_per_token);
    l->read_int("max_streams", 1, 100000, &m.max_streams);
    l->read_int("max_streams_per_token", 1, 100000, &m.max_streams_per_token);
    l->read_int("max_exports", 1, 1000, &m.max_exports);
    l->read_int("max_queued_exports", 0, 100000, &m.max_queued_exports);
    l->read_int("max_answer_bytes", 64 << 10, kMaxBytes, &m.max_answer_bytes);
    l->finish();
    // Unset, max_connections depends on TLS (--tls-cert): checked against the smaller default.
    if (m.max_connections_per_address > m.connection_limit(true)) {
      problems.add(
          (*limits_node)["max_connections_per_address"], "serve.limits.max_connections_per_address",
          fmt::format("must be at most max_connections ({}{}), got {}", m.connection_limit(true),
                      m.max_connections ? "" : ", its default over TLS: set it to allow more",
                      m.max_connections_per_address));
    }
    if (m.max_body_bytes_in_flight < m.max_body_bytes) {
      problems.add((*limits_node)["max_body_bytes_in_flight"],
                   "serve.limits.max_body_bytes_in_flight",
                   fmt::format("must be at least max_body_bytes ({}), got {}", m.max_body_bytes,
                               m.max_body_bytes_in_flight));
    }
  }
  if (out.probe_drop_after_h > 0 && out.probe_drop_after_h < out.probe_retention_full_h) {
    problems.add((*node)["probe_drop_after_h"], "serve.probe_drop_after_h",
                 fmt::format("must be 0 (keep) or at least probe_retention_full_h ({}), got {}",
                             out.probe_retention_full_h, out.probe_drop_after_h));
  }
}

void parse_supervisor(Problems& problems, const std::optional<YAML::Node>& node,
                      SupervisorSettings& out) {
  auto s = settings_section(problems, node, "supervisor");
  if (!s) return;
  constexpr double kMaxS = 7 * 86400.0;
  s->read_bool("enabled", &out.enabled);
  s->read_double("interval_s", 0.01, 3600.0, &out.interval_s);
  s->read_double("lease_ttl_s", 0.05, 3600.0, &out.lease_ttl_s);
  s->read_double("unreachable_grace_s", 0.0, kMaxS, &out.unreachable_grace_s);
  s->read_double("readmit_grace_s", 0.0, kMaxS, &out.readmit_grace_s);
  s->read_double("fencing_lease_s", 0.0, kMaxS, &out.fencing_lease_s);
  s->read_double("fenced_poll_s", 0.01, 3600.0, &out.fenced_poll_s);
  s->read_double("backoff_s", 0.0, 3600.0, &out.backoff_s);
  s->read_double("backoff_max_s", 0.0, 86400.0, &out.backoff_max_s);
  s->read_int("max_submit_attempts", 1, 100, &out.max_submit_attempts);
  s->read_int("max_recoveries", 0, 1000, &out.max_recoveries);
  s->read_double("stable_after_s", 0.0, kMaxS, &out.stable_after_s);
  s->read_double("move_queued_after_s", 0.0, kMaxS, &out.move_queued_after_s);
  s->read_string("fence", &out.fence, kOptionalGcsRule);
  s->finish();
  if (out.fencing_lease_s < out.unreachable_grace_s) {
    problems.add((*node)["fencing_lease_s"], "supervisor.fencing_lease_s",
                 fmt::format("must be at least unreachable_grace_s ({}), got {}",
                             out.unreachable_grace_s, out.fencing_lease_s));
  }
  if (out.backoff_max_s < out.backoff_s) {
    problems.add(
        (*node)["backoff_max_s"], "supervisor.backoff_max_s",
        fmt::format("must be at least backoff_s ({}), got {}", out.backoff_s, out.backoff_max_s));
  }
}

void parse_dispatch(Problems& problems, const std::optional<YAML::Node>& node,
                    DispatchSettings& out) {
  auto s = settings_section(problems, node, "dispatch");
  if (!s) return;
  s->read_string("manager_kubeconfig", &out.manager_kubeconfig, kOptionalPathRule);
  s->read_string("dispatcher_name", &out.dispatcher_name, kLabelKeyRule);
  s->read_string_list("admission_checks", &out.admission_checks, kLabelKeyRule);
  s->read_int("width", 1, 20, &out.width);
  s->read_double("renominate_after_s", 1.0, 7 * 86400.0, &out.renominate_after_s);
  s->read_bool("hold_until_room", &out.hold_until_room);
  s->read_bool("keep_room", &out.keep_room);
  s->read_double("retry_s", 0.05, 3600.0, &out.retry_s);
  s->read_double("watch_timeout_s", 1.0, 3600.0, &out.watch_timeout_s);
  s->read_string_map("clusters", &out.clusters, kLabelKeyRule, kLabelKeyRule);
  static const StringRule kApiVersionRule{
      .max_bytes = 16, .check = [](std::string_view v) -> std::string {
        if (v == "v1beta1" || v == "v1beta2") return "";
        return fmt::format("must be v1beta2 or v1beta1, got '{}'", v);
      }};
  s->read_string("api_version", &out.api_version, kApiVersionRule);
  double preempt_after_s = 0;
  if (s->read_double("preempt_after_s", 0.0, 7 * 86400.0, &preempt_after_s)) {
    out.preempt_after_s = preempt_after_s;
  }
  s->read_int("preempt_min_priority", -1'000'000'000, 1'000'000'000, &out.preempt_min_priority);
  s->read_double("preempt_confirm_s", 1.0, 7 * 86400.0, &out.preempt_confirm_s);
  s->read_string_list("preempting_workers", &out.preempting_workers, kLabelKeyRule);
  s->finish();
}

void parse_probe(Problems& problems, const std::optional<YAML::Node>& node, ProbeSettings& out) {
  auto s = settings_section(problems, node, "probe");
  if (!s) return;
  s->read_enum("backend", &out.backend, parse_probe_backend, "xpk, kube");
  s->finish();
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

const char* to_string(NamespaceFlag flag) {
  switch (flag) {
    case NamespaceFlag::kAuto:
      return "auto";
    case NamespaceFlag::kSupported:
      return "supported";
    case NamespaceFlag::kUnsupported:
      return "unsupported";
  }
  return "auto";
}

std::optional<NamespaceFlag> parse_namespace_flag(std::string_view text) {
  for (NamespaceFlag f :
       {NamespaceFlag::kAuto, NamespaceFlag::kSupported, NamespaceFlag::kUnsupported}) {
    if (text == to_string(f)) return f;
  }
  return std::nullopt;
}

const char* to_string(SelectionPolicy policy) {
  switch (policy) {
    case SelectionPolicy::kPriority:
      return "priority";
    case SelectionPolicy::kScore:
      return "score";
    case SelectionPolicy::kLeastWait:
      return "least-wait";
  }
  return "priority";
}

std::optional<SelectionPolicy> parse_selection_policy(std::string_view text) {
  for (SelectionPolicy p :
       {SelectionPolicy::kPriority, SelectionPolicy::kScore, SelectionPolicy::kLeastWait}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

SelectionPolicy SelectionSettings::policy_for(const std::string& accelerator_type) const {
  if (policy_by_accelerator.empty()) return policy;
  const std::string canonical =
      canonical_accelerator_type(accelerator_type).value_or(accelerator_type);
  const auto it = policy_by_accelerator.find(canonical);
  return it == policy_by_accelerator.end() ? policy : it->second;
}

double FragmentationSettings::weight_for(double fragmentation) const {
  if (fragmentation < low) return weight_low;
  if (fragmentation < high) return weight_mid;
  return weight_high;
}

FabricConfig parse_fabric_config(std::string_view yaml_text, const std::string& source_name) {
  Problems problems(source_name);
  if (yaml_text.size() > kMaxConfigBytes) {
    problems.add(YAML::Mark::null_mark(), "(document)",
                 fmt::format("the file is {} bytes; at most {} are read", yaml_text.size(),
                             kMaxConfigBytes));
    problems.raise();
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    problems.add(e.mark, "(document)", "YAML syntax error: " + e.msg);
    problems.raise();
  }
  if (!root.IsMap()) {
    problems.add(root, "(document)",
                 fmt::format("must be a map with a 'clusters' section, got {}", kind_name(root)));
    problems.raise();
  }
  FabricConfig config;
  config.source_path = source_name;
  Section s(problems, root, "", root.Mark());
  if (auto clusters = s.take("clusters", Required{"the map of clusters"})) {
    parse_clusters(problems, *clusters, config);
  }
  parse_xpk(problems, s.take("xpk"), config.xpk);
  parse_gcp(problems, s.take("gcp"), config.gcp);
  parse_selection(problems, s.take("selection"), config.selection);
  parse_serve(problems, s.take("serve"), config.serve);
  parse_probe(problems, s.take("probe"), config.probe);
  parse_supervisor(problems, s.take("supervisor"), config.supervisor);
  parse_dispatch(problems, s.take("dispatch"), config.dispatch);
  s.finish();
  if (problems.count() > 0) problems.raise();

  config.xpk.binary = resolve_relative(config.xpk.binary, source_name);
  config.xpk.state_dir = resolve_relative(config.xpk.state_dir, source_name);
  config.xpk.runtime_dir = resolve_relative(config.xpk.runtime_dir, source_name);
  config.gcp.access_token_file = resolve_relative(config.gcp.access_token_file, source_name);
  config.gcp.ca_file = resolve_relative(config.gcp.ca_file, source_name);
  config.serve.tokens_file = resolve_relative(config.serve.tokens_file, source_name);
  config.dispatch.manager_kubeconfig =
      resolve_relative(config.dispatch.manager_kubeconfig, source_name);
  // A plain path (no scheme) names an SQLite file; a URL is taken as written.
  if (config.serve.state.find("://") == std::string::npos) {
    config.serve.state = resolve_relative(config.serve.state, source_name);
  }
  return config;
}

FabricConfig load_fabric_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    std::string problem =
        fmt::format("{}: cannot read the configuration: {}", path, std::strerror(error));
    if (error == ENOENT) {
      problem +=
          " (name the file with --config FILE or FALCON_CONFIG; without either falcon reads "
          "./repos.yaml. The repository's examples/repos.yaml is a starting point, and "
          "examples/local-repos.yaml points at the local fleet)";
    }
    throw ClusterConfigError({problem});
  }
  // An oversized file is refused with its real size, before reading it.
  std::error_code size_error;
  if (const auto size = std::filesystem::file_size(path, size_error);
      !size_error && size > kMaxConfigBytes) {
    throw ClusterConfigError({fmt::format(
        "{}: (document): the file is {} bytes; at most {} are read", path, size, kMaxConfigBytes)});
  }
  // One byte more than the bound, so that an oversized file is reported as such.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    throw ClusterConfigError(
        {fmt::format("{}: cannot read the configuration: {}", path, std::strerror(errno))});
  }
  text.resize(static_cast<std::size_t>(in.gcount()));
  return parse_fabric_config(text, path);
}

}  // namespace falcon
