#include "fleet/kubeconfig.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace falcon::fleet {
namespace {

// Replaces the entry named `name` in the sequence `list` (or appends it).
void upsert(YAML::Node root, const char* list, const std::string& name, const YAML::Node& entry) {
  YAML::Node seq = root[list];
  if (!seq || !seq.IsSequence()) {
    root[list] = YAML::Node(YAML::NodeType::Sequence);
    seq = root[list];
  }
  for (std::size_t i = 0; i < seq.size(); ++i) {
    if (seq[i]["name"] && seq[i]["name"].as<std::string>("") == name) {
      seq[i] = entry;
      return;
    }
  }
  seq.push_back(entry);
}

}  // namespace

std::string GkeContext::name() const {
  return fmt::format("gke_{}_{}_{}", project, location, cluster_id);
}

std::optional<GkeContext> parse_gke_context(std::string_view name) {
  if (name.substr(0, 4) != "gke_") return std::nullopt;
  name.remove_prefix(4);
  const auto first = name.find('_');
  if (first == std::string_view::npos) return std::nullopt;
  const auto second = name.find('_', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  GkeContext c{std::string(name.substr(0, first)),
               std::string(name.substr(first + 1, second - first - 1)),
               std::string(name.substr(second + 1))};
  if (c.project.empty() || c.location.empty() || c.cluster_id.empty()) return std::nullopt;
  return c;
}

std::chrono::milliseconds kubeconfig_rewrite_gap(const std::optional<std::string>& env_value) {
  if (!env_value || env_value->empty()) return kKubeconfigRewriteGap;
  int ms = 0;
  const char* end = env_value->data() + env_value->size();
  const auto [ptr, ec] = std::from_chars(env_value->data(), end, ms);
  if (ec != std::errc() || ptr != end || ms < 0 || ms > 2000) return kKubeconfigRewriteGap;
  return std::chrono::milliseconds(ms);
}

void write_gke_kubeconfig(const std::string& path, const GkeContext& context,
                          const std::string& server_url, std::chrono::milliseconds gap,
                          const AuthPlugin& plugin) {
  YAML::Node root;
  try {
    if (std::filesystem::exists(path)) root = YAML::LoadFile(path);
  } catch (const YAML::Exception&) {
    root = YAML::Node();  // gcloud would complain; start afresh rather than fail the command
  }
  if (!root.IsMap()) root = YAML::Node(YAML::NodeType::Map);
  root["apiVersion"] = "v1";
  root["kind"] = "Config";
  if (!root["preferences"]) root["preferences"] = YAML::Node(YAML::NodeType::Map);
  const std::string name = context.name();
  YAML::Node cluster;
  cluster["name"] = name;
  cluster["cluster"]["server"] = server_url;
  if (server_url.rfind("http://", 0) != 0) {
    cluster["cluster"]["certificate-authority-data"] =
        plugin.ca_data.empty() ? "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ=="
                               : plugin.ca_data;
  }
  YAML::Node ctx;
  ctx["name"] = name;
  ctx["context"]["cluster"] = name;
  ctx["context"]["user"] = name;
  ctx["context"]["namespace"] = "default";
  YAML::Node user;
  user["name"] = name;
  user["user"]["exec"]["apiVersion"] = "client.authentication.k8s.io/v1beta1";
  user["user"]["exec"]["command"] = plugin.command;
  for (const std::string& a : plugin.args) user["user"]["exec"]["args"].push_back(a);
  for (const auto& [env_name, env_value] : plugin.env) {
    YAML::Node e;
    e["name"] = env_name;
    e["value"] = env_value;
    user["user"]["exec"]["env"].push_back(e);
  }
  user["user"]["exec"]["installHint"] =
      "Install gke-gcloud-auth-plugin for use with kubectl by following "
      "https://cloud.google.com/kubernetes-engine/docs/how-to/"
      "cluster-access-for-kubectl#install_plugin";
  user["user"]["exec"]["provideClusterInfo"] = true;
  user["user"]["exec"]["interactiveMode"] = "IfAvailable";
  upsert(root, "clusters", name, cluster);
  upsert(root, "contexts", name, ctx);
  upsert(root, "users", name, user);
  root["current-context"] = name;

  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  // As gcloud and kubectl do: truncate, then write, in place. A reader in between sees an empty
  // or half-written file.
  const std::string text = YAML::Dump(root) + "\n";
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  if (!out) throw std::runtime_error("cannot write kubeconfig " + path);
  out.flush();
  std::this_thread::sleep_for(gap);
  const std::size_t half = text.size() / 2;
  out.write(text.data(), static_cast<std::streamsize>(half));
  out.flush();
  std::this_thread::sleep_for(gap);
  out.write(text.data() + half, static_cast<std::streamsize>(text.size() - half));
  out.flush();
  if (!out) throw std::runtime_error("cannot write kubeconfig " + path);
}

std::optional<std::string> read_current_context(const std::string& path) {
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap() || !root["current-context"]) return std::nullopt;
    const std::string value = root["current-context"].as<std::string>("");
    if (value.empty()) return std::nullopt;
    return value;
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

}  // namespace falcon::fleet
