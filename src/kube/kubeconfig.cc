#include "kube/kubeconfig.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "util/base64.h"

namespace falcon::kube {
namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error(fmt::format("kubeconfig {}: {}", source, what));
}

std::string scalar(const YAML::Node& node, const char* key) {
  const YAML::Node v = node[key];
  return v && v.IsScalar() ? v.Scalar() : std::string();
}

// The `inner` map of the entry of list `list` whose name is `name`.
YAML::Node named(const YAML::Node& root, const char* list, const char* inner,
                 const std::string& name, const std::string& source) {
  const YAML::Node entries = root[list];
  if (entries && entries.IsSequence()) {
    for (const YAML::Node& e : entries) {
      if (e.IsMap() && scalar(e, "name") == name) {
        const YAML::Node v = e[inner];
        if (v && v.IsMap()) return v;
        fail(source, fmt::format("{} entry '{}' has no {} map", list, name, inner));
      }
    }
  }
  fail(source,
       fmt::format("the current context names {} '{}', which is not in {}", inner, name, list));
}

}  // namespace

KubeTarget parse_kubeconfig(std::string_view yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    fail(source, "not YAML: " + e.msg);
  }
  if (!root.IsMap()) fail(source, "not a kubeconfig (not a map)");
  KubeTarget t;
  t.context = scalar(root, "current-context");
  if (t.context.empty()) fail(source, "no current-context");
  const YAML::Node ctx = named(root, "contexts", "context", t.context, source);
  const std::string cluster_name = scalar(ctx, "cluster");
  const std::string user_name = scalar(ctx, "user");
  t.namespace_ = scalar(ctx, "namespace");
  if (t.namespace_.empty()) t.namespace_ = "default";

  const YAML::Node cluster = named(root, "clusters", "cluster", cluster_name, source);
  t.server = scalar(cluster, "server");
  if (t.server.empty()) fail(source, fmt::format("cluster '{}' has no server", cluster_name));
  while (!t.server.empty() && t.server.back() == '/') t.server.pop_back();
  if (scalar(cluster, "insecure-skip-tls-verify") == "true") {
    fail(source, fmt::format("cluster '{}' sets insecure-skip-tls-verify, which falcon does not "
                             "support; give its certificate-authority-data",
                             cluster_name));
  }
  if (const std::string data = scalar(cluster, "certificate-authority-data"); !data.empty()) {
    auto pem = base64_decode(data, Base64::kStandard, /*skip_whitespace=*/true);
    if (!pem) {
      fail(source,
           fmt::format("cluster '{}': certificate-authority-data is not base64", cluster_name));
    }
    t.ca_pem = std::move(*pem);
  } else if (const std::string file = scalar(cluster, "certificate-authority"); !file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail(source, fmt::format("cannot read certificate-authority {}", file));
    std::ostringstream ss;
    ss << in.rdbuf();
    t.ca_pem = ss.str();
  }

  const YAML::Node user = named(root, "users", "user", user_name, source);
  if (user["auth-provider"] || user["client-certificate-data"] || user["client-certificate"]) {
    fail(source, fmt::format("user '{}' authenticates with an auth-provider or a client "
                             "certificate; falcon supports a token or an exec plugin",
                             user_name));
  }
  t.token = scalar(user, "token");
  if (const YAML::Node exec = user["exec"]; exec && exec.IsMap()) {
    ExecPlugin p;
    p.api_version = scalar(exec, "apiVersion");
    p.command = scalar(exec, "command");
    if (p.command.empty()) fail(source, fmt::format("user '{}': exec has no command", user_name));
    if (const YAML::Node args = exec["args"]; args && args.IsSequence()) {
      for (const YAML::Node& a : args) p.args.push_back(a.IsScalar() ? a.Scalar() : "");
    }
    if (const YAML::Node env = exec["env"]; env && env.IsSequence()) {
      for (const YAML::Node& e : env) {
        if (e.IsMap()) p.env[scalar(e, "name")] = scalar(e, "value");
      }
    }
    p.provide_cluster_info = scalar(exec, "provideClusterInfo") == "true";
    t.exec = std::move(p);
  }
  if (!t.exec && t.token.empty()) {
    fail(source, fmt::format("user '{}' has neither a token nor an exec plugin", user_name));
  }
  return t;
}

KubeTarget read_kubeconfig(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      throw std::runtime_error(fmt::format("no kubeconfig at {}", path.string()));
    }
    throw std::runtime_error(fmt::format("cannot read kubeconfig {}", path.string()));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_kubeconfig(ss.str(), path.string());
}

}  // namespace falcon::kube
