#include "kube/manager_api.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "gcp/json_fields.h"
#include "gcp/url.h"

namespace falcon::kube {
namespace {

using gcp::integer_field;
using gcp::member_or_null;
using gcp::string_field;
using nlohmann::json;

// A body from the manager, parsed with a bound on nesting (a hostile or broken server).
json parse_body(const std::string& body, const std::string& what) {
  constexpr int kMaxDepth = 64;
  json j = json::parse(
      body,
      [&](int depth, json::parse_event_t, json&) {
        if (depth > kMaxDepth) {
          throw KubeError(
              0, "", fmt::format("{}: the answer nests deeper than {} levels", what, kMaxDepth));
        }
        return true;
      },
      false);
  if (j.is_discarded()) throw KubeError(0, "", fmt::format("{}: the answer is not JSON", what));
  return j;
}

class KubeManagerApi final : public ManagerApi {
 public:
  KubeManagerApi(std::shared_ptr<KubeClient> client, std::string api_version,
                 double watch_timeout_s)
      : client_(std::move(client)),
        base_("/apis/kueue.x-k8s.io/" + api_version),
        watch_timeout_s_(std::max(1, static_cast<int>(std::lround(watch_timeout_s)))) {}

  std::string server() const override { return client_->server(); }

  WorkloadList list_workloads() override {
    WorkloadList out;
    ListCursor pages(fmt::format("the list of {}/workloads", base_));
    std::string next;
    do {
      std::string path = base_ + "/workloads?limit=500";
      if (!pages.token().empty()) path += "&continue=" + gcp::percent_encode(pages.token());
      const json page = parse_body(client_->request("GET", path).body, path);
      if (const auto it = page.find("items"); it != page.end() && it->is_array()) {
        for (const json& item : *it) {
          try {
            out.items.push_back(parse_manager_workload(item));
          } catch (const std::invalid_argument&) {
            // Not a Workload falcon can name: nothing to nominate for.
          }
        }
      }
      const json& meta = member_or_null(page, "metadata");
      if (const std::string v = string_field(meta, "resourceVersion"); !v.empty()) {
        out.resource_version = v;
      }
      next = string_field(meta, "continue");
    } while (pages.advance(next));
    return out;
  }

  void watch_workloads(const std::string& resource_version,
                       const std::function<bool(const ManagerEvent&)>& on_event,
                       const std::function<bool()>& stop) override {
    const std::string path = fmt::format(
        "{}/workloads?watch=true&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds={}",
        base_, gcp::percent_encode(resource_version), watch_timeout_s_);
    client_->watch(
        path,
        [&](std::string_view line) {
          const json event = parse_body(std::string(line), "a watch event");
          ManagerEvent e;
          e.type = string_field(event, "type");
          const json& object = member_or_null(event, "object");
          if (e.type == "ERROR") {
            const std::string message = string_field(object, "message");
            throw KubeError(integer_field(object, "code", 0), string_field(object, "reason"),
                            fmt::format("the watch of {}/workloads ended: {}", base_,
                                        message.empty() ? "an ERROR event" : message));
          }
          if (e.type == "BOOKMARK") {
            e.workload.resource_version =
                string_field(member_or_null(object, "metadata"), "resourceVersion");
          } else {
            try {
              e.workload = parse_manager_workload(object);
            } catch (const std::invalid_argument&) {
              return true;
            }
          }
          return on_event(e);
        },
        stop, std::chrono::seconds(watch_timeout_s_ + 10));
  }

  MultiKueueWiring wiring() override {
    const auto get = [&](const char* resource) {
      const std::string path = base_ + "/" + resource;
      return parse_body(client_->request("GET", path).body, path);
    };
    return parse_multikueue_wiring(get("admissionchecks"), get("multikueueconfigs"),
                                   get("multikueueclusters"));
  }

  void nominate(const ManagerWorkload& w, const std::vector<std::string>& clusters,
                const std::string& field_manager) override {
    json patch = {{"status", {{"nominatedClusterNames", clusters}}}};
    if (!w.resource_version.empty()) {
      patch["metadata"] = {{"resourceVersion", w.resource_version}};
    }
    const std::string path =
        fmt::format("{}/namespaces/{}/workloads/{}/status?fieldManager={}", base_,
                    gcp::percent_encode(w.namespace_), gcp::percent_encode(w.name),
                    gcp::percent_encode(field_manager));
    client_->request("PATCH", path, patch.dump(), "application/merge-patch+json");
  }

  std::optional<std::string> kueue_dispatcher() override {
    KubeAnswer a;
    try {
      a = client_->request("GET",
                           "/api/v1/namespaces/kueue-system/configmaps/kueue-manager-config");
    } catch (const KubeError& e) {
      if (e.status() == 403 || e.status() == 404) return std::nullopt;
      throw;
    }
    const json cm = parse_body(a.body, "the ConfigMap kueue-system/kueue-manager-config");
    const std::string text =
        string_field(member_or_null(cm, "data"), "controller_manager_config.yaml");
    if (text.empty()) return std::nullopt;
    try {
      const YAML::Node config = YAML::Load(text);
      const YAML::Node name = config["multiKueue"]["dispatcherName"];
      // Kueue's default when the key is absent.
      return name && name.IsScalar() ? name.as<std::string>()
                                     : "kueue.x-k8s.io/multikueue-dispatcher-all-at-once";
    } catch (const YAML::Exception&) {
      return std::nullopt;
    }
  }

 private:
  std::shared_ptr<KubeClient> client_;
  std::string base_;
  int watch_timeout_s_;
};

}  // namespace

std::shared_ptr<ManagerApi> make_kube_manager_api(std::shared_ptr<KubeClient> client,
                                                  std::string api_version, double watch_timeout_s) {
  if (!client) throw std::invalid_argument("make_kube_manager_api: null client");
  return std::make_shared<KubeManagerApi>(std::move(client), std::move(api_version),
                                          watch_timeout_s);
}

}  // namespace falcon::kube
