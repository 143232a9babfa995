// The part of a kubeconfig a client needs to reach the current context's cluster: its server,
// its CA, and the user's credential (a static token or an `exec` plugin such as
// gke-gcloud-auth-plugin). Written by `gcloud container clusters get-credentials`, which
// `falcon cluster warm-up` runs into <state_dir>/kube/<cluster>/config.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace falcon::kube {

struct ExecPlugin {
  std::string api_version;  // client.authentication.k8s.io/v1beta1 or /v1
  std::string command;      // a path, or a name looked up in PATH
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  bool provide_cluster_info = false;
  bool operator==(const ExecPlugin&) const = default;
};

struct KubeTarget {
  std::string context;
  std::string server;      // https://host[:port][/path], no trailing slash
  std::string ca_pem;      // certificate-authority-data decoded, or the certificate-authority
                           // file's contents; empty: the system's trust store
  std::string namespace_;  // the context's namespace, "default" when unset
  std::string token;       // a static bearer token (user.token), when no exec plugin
  std::optional<ExecPlugin> exec;
};

// Reads the current context of the kubeconfig text. Throws std::runtime_error naming
// `source` and the missing or bad field (no current-context, a context, cluster or user it
// names not present, no server, bad base64, insecure-skip-tls-verify, client certificates or
// an auth-provider, which this reader does not support).
KubeTarget parse_kubeconfig(std::string_view yaml_text, const std::string& source);
// Same, from a file; the error names the path, and says when the file does not exist.
KubeTarget read_kubeconfig(const std::filesystem::path& path);

}  // namespace falcon::kube
