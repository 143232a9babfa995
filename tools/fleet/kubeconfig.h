// The kubeconfig side effect of `gcloud container clusters get-credentials`, which xpk runs on
// every command: an entry named gke_<project>_<location>_<cluster> merged into $KUBECONFIG and
// made the current context (namespace default). kubectl then talks to whatever cluster the
// current context names, which is how parallel xpk runs sharing one kubeconfig end up acting
// on each other's clusters; fleet-xpk reproduces that.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace falcon::fleet {

struct GkeContext {
  std::string project;
  std::string location;
  std::string cluster_id;
  std::string name() const;  // gke_<project>_<location>_<cluster_id>
};

// Parses a context name written by gcloud; nullopt for anything else.
std::optional<GkeContext> parse_gke_context(std::string_view name);

// How long a rewrite leaves the file empty, and then half-written (wall time), unless
// $FLEET_KUBECONFIG_REWRITE_MS (0..2000) says otherwise: tests of concurrent xpk calls widen it.
inline constexpr std::chrono::milliseconds kKubeconfigRewriteGap{10};
std::chrono::milliseconds kubeconfig_rewrite_gap(const std::optional<std::string>& env_value);

// Merges the context (with its cluster and user entries) into the kubeconfig at `path`,
// creating the file and its directory, and sets current-context to it. Like gcloud's
// get-credentials (and kubectl config set-context), not atomically: the file is truncated, and
// written in two halves, `gap` apart, so that two calls sharing one kubeconfig
// see each other's half-written file as real xpk calls can (reference/xpk.md, "Observed with
// xpk 1.13.1"). Throws std::runtime_error when it cannot be written.
// The user's credential plugin: gcloud writes `gke-gcloud-auth-plugin`; fleet-gcloud writes
// itself with the argument `gke-gcloud-auth-plugin` and the fleet's URL in the plugin's env, so
// that kubectl and the layer's kube probe get real tokens from the fleet.
struct AuthPlugin {
  std::string command = "gke-gcloud-auth-plugin";
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string ca_data;  // certificate-authority-data for an https server; empty: gcloud-like filler
};

// An `http://` server gets no certificate-authority-data (kubectl refuses a CA for plain HTTP).
void write_gke_kubeconfig(const std::string& path, const GkeContext& context,
                          const std::string& server_url,
                          std::chrono::milliseconds gap = kKubeconfigRewriteGap,
                          const AuthPlugin& plugin = {});

// The current-context of the kubeconfig at `path`; nullopt when the file is missing,
// unparseable or has none.
std::optional<std::string> read_current_context(const std::string& path);

}  // namespace falcon::fleet
