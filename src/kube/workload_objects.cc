#include "kube/workload_objects.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gcp/json_fields.h"
#include "util/time_format.h"

namespace falcon::kube {
namespace {

using gcp::member_or_null;
using nlohmann::json;

std::string text(const json& value) {
  return value.is_string() ? value.get<std::string>() : std::string();
}

std::string or_none(std::string value) { return value.empty() ? std::string(xpk::kNone) : value; }

// Python's int() of what JSON gave: a whole number, or a string of one; anything else 0.
long long count_of(const json& value) {
  if (value.is_number_integer()) return value.get<long long>();
  if (value.is_string()) {
    try {
      std::size_t used = 0;
      const std::string s = value.get<std::string>();
      const long long n = std::stoll(s, &used);
      return used == s.size() ? n : 0;
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

bool names_accelerator(const json& resources) {
  if (!resources.is_object()) return false;
  return resources.contains("google.com/tpu") || resources.contains("nvidia.com/gpu");
}

bool is_accelerator_pod_set(const json& pod_set) {
  const json& spec = member_or_null(member_or_null(pod_set, "template"), "spec");
  const json& selector = member_or_null(spec, "nodeSelector");
  if (selector.is_object() && (selector.contains("cloud.google.com/gke-tpu-accelerator") ||
                               selector.contains("cloud.google.com/gke-accelerator"))) {
    return true;
  }
  for (const char* list : {"containers", "initContainers"}) {
    const json& containers = member_or_null(spec, list);
    if (!containers.is_array()) continue;
    for (const json& c : containers) {
      const json& resources = member_or_null(c, "resources");
      if (names_accelerator(member_or_null(resources, "requests")) ||
          names_accelerator(member_or_null(resources, "limits"))) {
        return true;
      }
    }
  }
  return false;
}

// `<none>` for an empty or absent list, else the sum of `count` over entries whose `name`
// is an accelerator pod set.
std::string accelerator_sum(const json& list, const std::set<std::string>& accelerators) {
  if (!list.is_array() || list.empty()) return std::string(xpk::kNone);
  long long sum = 0;
  for (const json& entry : list) {
    if (accelerators.count(text(member_or_null(entry, "name"))) > 0)
      sum += count_of(member_or_null(entry, "count"));
  }
  return std::to_string(sum);
}

std::string status_word(const std::string& type) {
  for (const char* known : {"Admitted", "Evicted", "QuotaReserved", "Finished"}) {
    if (type == known) return type;
  }
  return "Unknown";
}

// Members workload_row (or the list's paging) reads; under the three maps whose keys are
// label or resource names, every member is kept.
bool kept_key(std::string_view key) {
  static const std::set<std::string_view> kKept = {"items",
                                                   "metadata",
                                                   "continue",
                                                   "ownerReferences",
                                                   "name",
                                                   "creationTimestamp",
                                                   "spec",
                                                   "priorityClassName",
                                                   "podSets",
                                                   "template",
                                                   "nodeSelector",
                                                   "containers",
                                                   "initContainers",
                                                   "resources",
                                                   "requests",
                                                   "limits",
                                                   "count",
                                                   "status",
                                                   "admission",
                                                   "podSetAssignments",
                                                   "reclaimablePods",
                                                   "conditions",
                                                   "type",
                                                   "message",
                                                   "lastTransitionTime"};
  return kKept.count(key) > 0;
}

bool keeps_all_below(std::string_view key) {
  return key == "nodeSelector" || key == "requests" || key == "limits";
}

// A SAX handler that builds the DOM of the kept members only (see parse_workload_list).
class KeptMembers {
 public:
  explicit KeptMembers(json& root) : root_(root) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(json::number_integer_t v) { return value(v); }
  bool number_unsigned(json::number_unsigned_t v) { return value(v); }
  bool number_float(json::number_float_t v, const std::string&) { return value(v); }
  bool string(std::string& v) { return value(std::move(v)); }
  bool binary(json::binary_t& v) { return value(std::move(v)); }
  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (skip_depth_ > 0) return true;
    const Frame& f = stack_.back();
    skip_next_ = !f.keep_all && !kept_key(k);
    if (!skip_next_) {
      next_keep_all_ = f.keep_all || keeps_all_below(k);
      key_ = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  struct Frame {
    json* node;
    bool keep_all;
  };

  // Where the next value goes, or null when it is skipped.
  json* slot() {
    if (stack_.empty()) return &root_;
    json& parent = *stack_.back().node;
    if (parent.is_array()) {
      parent.push_back(nullptr);
      return &parent.back();
    }
    return &parent[key_];
  }

  template <typename T>
  bool value(T&& v) {
    if (skip_depth_ > 0) return true;
    if (skip_next_) {
      skip_next_ = false;
      return true;
    }
    *slot() = std::forward<T>(v);
    return true;
  }

  bool open(json::value_t type) {
    if (skip_depth_ > 0 || skip_next_) {
      skip_next_ = false;
      ++skip_depth_;
      return true;
    }
    const bool keep_all = stack_.empty()                   ? false
                          : stack_.back().node->is_array() ? stack_.back().keep_all
                                                           : next_keep_all_;
    json* node = slot();
    *node = json(type);
    stack_.push_back({node, keep_all});
    return true;
  }

  bool close() {
    if (skip_depth_ > 0) {
      --skip_depth_;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  json& root_;
  std::vector<Frame> stack_;
  std::string key_;
  bool skip_next_ = false;
  bool next_keep_all_ = false;
  int skip_depth_ = 0;
};

}  // namespace

json parse_workload_list(const std::string& body) {
  json root;
  KeptMembers handler(root);
  if (!json::sax_parse(body, &handler)) throw std::invalid_argument("the body is not JSON");
  return root;
}

xpk::ListRow workload_row(const json& item) {
  xpk::ListRow row;
  const json& metadata = member_or_null(item, "metadata");
  const json& spec = member_or_null(item, "spec");
  const json& status = member_or_null(item, "status");

  const json& owners = member_or_null(metadata, "ownerReferences");
  row.jobset_name =
      or_none(owners.is_array() && !owners.empty() ? text(member_or_null(owners[0], "name"))
                                                   : std::string());
  row.created_time = or_none(text(member_or_null(metadata, "creationTimestamp")));

  const json& pod_sets = member_or_null(spec, "podSets");
  std::string priority = text(member_or_null(spec, "priorityClassName"));
  if (priority.empty() && pod_sets.is_array() && !pod_sets.empty()) {
    priority = text(member_or_null(member_or_null(member_or_null(pod_sets[0], "template"), "spec"),
                                   "priorityClassName"));
  }
  row.priority = or_none(priority);

  std::set<std::string> accelerators;
  if (pod_sets.is_array()) {
    for (const json& ps : pod_sets) {
      if (is_accelerator_pod_set(ps)) accelerators.insert(text(member_or_null(ps, "name")));
    }
  }
  row.vms_needed = accelerator_sum(pod_sets, accelerators);
  row.vms_running = accelerator_sum(
      member_or_null(member_or_null(status, "admission"), "podSetAssignments"), accelerators);
  row.vms_done = accelerator_sum(member_or_null(status, "reclaimablePods"), accelerators);

  const json& conditions = member_or_null(status, "conditions");
  const json* latest = nullptr;
  std::string latest_time;
  if (conditions.is_array()) {
    for (const json& c : conditions) {
      const std::string t = text(member_or_null(c, "lastTransitionTime"));
      if (latest == nullptr || t > latest_time) {
        latest = &c;
        latest_time = t;
      }
    }
  }
  if (latest == nullptr) {
    row.status = row.status_message = row.status_time = std::string(xpk::kNone);
  } else {
    row.status = status_word(text(member_or_null(*latest, "type")));
    row.status_message = or_none(text(member_or_null(*latest, "message")));
    row.status_time = or_none(latest_time);
  }
  return row;
}

std::vector<xpk::ListedWorkload> classify_workload_list(const json& list) {
  const json& items = member_or_null(list, "items");
  if (!items.is_array()) {
    throw std::invalid_argument("the response is not a list of Workload objects (no items array)");
  }
  std::vector<xpk::ListedWorkload> out;
  out.reserve(items.size());
  for (const json& item : items) {
    xpk::ListRow row = workload_row(item);
    std::string state = xpk::map_row_state(row);
    out.push_back({std::move(row), std::move(state)});
  }
  return out;
}

std::optional<double> admission_delay_s(const json& list, std::chrono::system_clock::time_point now,
                                        std::size_t last) {
  const json& items = member_or_null(list, "items");
  if (!items.is_array() || last == 0) return std::nullopt;
  // (when the wait ended, how long it was)
  std::vector<std::pair<std::chrono::system_clock::time_point, double>> waits;
  for (const json& item : items) {
    const json& conditions = member_or_null(member_or_null(item, "status"), "conditions");
    if (!conditions.is_array()) continue;
    std::optional<std::chrono::system_clock::time_point> reserved, admitted;
    bool is_admitted = false, finished = false;
    for (const json& c : conditions) {
      if (text(member_or_null(c, "status")) != "True") continue;
      const std::string type = text(member_or_null(c, "type"));
      const auto at = parse_rfc3339(text(member_or_null(c, "lastTransitionTime")));
      if (type == "QuotaReserved") {
        reserved = at;
      } else if (type == "Admitted") {
        is_admitted = true;
        admitted = at;
      } else if (type == "Finished") {
        finished = true;
      }
    }
    if (!reserved || (is_admitted && !admitted) || (!is_admitted && finished)) continue;
    const auto end = is_admitted ? *admitted : now;
    if (end < *reserved) continue;
    waits.emplace_back(end, std::chrono::duration<double>(end - *reserved).count());
  }
  if (waits.empty()) return std::nullopt;
  const std::size_t n = std::min(last, waits.size());
  std::partial_sort(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(n), waits.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += waits[i].second;
  return sum / static_cast<double>(n);
}

}  // namespace falcon::kube
