#include "fleet/fake_gcloud.h"

#include <filesystem>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "common/names.h"
#include "fleet/kubeconfig.h"

namespace falcon::fleet {
namespace {

constexpr std::string_view kCommand = "gcloud.container.clusters.get-credentials";

struct GetCredentialsArgs {
  std::string cluster;
  std::string project;
  std::string location;
};

// `--name=value` or `--name value` at args[i]; advances i past what it used.
std::optional<std::string> flag_value(const std::vector<std::string>& args, std::size_t& i,
                                      std::string_view name) {
  const std::string& arg = args[i];
  if (arg.size() > name.size() && arg.starts_with(name) && arg[name.size()] == '=') {
    return arg.substr(name.size() + 1);
  }
  if (arg == name && i + 1 < args.size()) return args[++i];
  return std::nullopt;
}

int usage_error(const FakeXpkEnv& env, const std::string& message) {
  env.err << "ERROR: (" << kCommand << ") " << message << "\n" << std::flush;
  return 2;
}

int get_credentials(const std::vector<std::string>& args, FleetApi* api, const FakeXpkEnv& env) {
  GetCredentialsArgs a;
  for (std::size_t i = 3; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (auto v = flag_value(args, i, "--project")) {
      a.project = *v;
    } else if (auto l = flag_value(args, i, "--location")) {
      a.location = *l;
    } else if (auto z = flag_value(args, i, "--zone")) {
      a.location = *z;
    } else if (auto r = flag_value(args, i, "--region")) {
      a.location = *r;
    } else if (arg == "--dns-endpoint" || arg == "--internal-ip" || arg == "--quiet" ||
               arg == "-q") {
      continue;
    } else if (arg.starts_with("-")) {
      return usage_error(env, fmt::format("unrecognized arguments: {}", arg));
    } else if (a.cluster.empty()) {
      a.cluster = arg;
    } else {
      return usage_error(env, fmt::format("unrecognized arguments: {}", arg));
    }
  }
  if (a.cluster.empty()) return usage_error(env, "argument NAME: Must be specified.");
  if (a.project.empty()) {
    env.err << "ERROR: (" << kCommand << ") The required property [project] is not currently set.\n"
            << std::flush;
    return 1;
  }
  if (a.location.empty()) {
    env.err << "ERROR: (" << kCommand
            << ") One of [--location, --zone, --region] must be supplied: Please specify "
               "location.\n"
            << std::flush;
    return 1;
  }
  if (api == nullptr) {
    env.err << "fleet-gcloud: FALCON_FLEET_URL is not set; start falcon-fleet and export the URL "
               "it prints\n"
            << std::flush;
    return 1;
  }

  std::string kubeconfig;
  if (auto k = env.getenv("KUBECONFIG"); k && !k->empty()) {
    kubeconfig = k->substr(0, k->find(':'));
  } else if (auto home = env.getenv("HOME"); home && !home->empty()) {
    kubeconfig = *home + "/.kube/config";
  } else {
    env.err << "ERROR: (" << kCommand << ") neither KUBECONFIG nor HOME is set\n" << std::flush;
    return 1;
  }

  env.err << "Fetching cluster endpoint and auth data.\n" << std::flush;
  if (!tools::gcp_location_kind(a.location)) {
    env.err << "ERROR: (" << kCommand
            << fmt::format(") ResponseError: code=400, message=Location \"{}\" does not exist.\n",
                           a.location)
            << std::flush;
    return 1;
  }
  const std::string not_found = fmt::format(
      "ERROR: ({}) ResponseError: code=404, message=Not found: "
      "projects/{}/locations/{}/clusters/{}.\n",
      kCommand, a.project, a.location, a.cluster);
  try {
    const nlohmann::json cred = api->call("credentials", {{"project", a.project},
                                                          {"zone", a.location},
                                                          {"cluster", a.cluster},
                                                          {"kubeconfig", kubeconfig}});
    if (!cred.value("found", false)) {
      env.err << not_found << std::flush;
      return 1;
    }
    // gcloud looks at exactly this location; a cluster of the name elsewhere is only a hint.
    const std::string location = cred.value("location", a.location);
    if (location != a.location) {
      env.err << not_found
              << fmt::format("Could not find [{}] in [{}].\nDid you mean [{}] in [{}]?\n",
                             a.cluster, a.location, a.cluster, location)
              << std::flush;
      return 1;
    }
    const int ms = cred.contains("latency_ms") ? cred["latency_ms"].value("list", 0) : 0;
    if (ms > 0) env.sleep(std::chrono::milliseconds(ms));
    const std::optional<GkeContext> context = parse_gke_context(cred.value("context", ""));
    if (!context) throw FleetApiError("the fleet answered without a GKE context");
    // The auth plugin is this executable (fleet-gcloud gke-gcloud-auth-plugin), asking the
    // fleet it was told about for tokens.
    AuthPlugin plugin;
    plugin.command = env.getenv("FLEET_AUTH_PLUGIN").value_or("");
    if (plugin.command.empty()) {
      std::error_code ec;
      plugin.command = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    }
    plugin.args = {"gke-gcloud-auth-plugin"};
    plugin.env = {{"FALCON_FLEET_URL", env.getenv("FALCON_FLEET_URL").value_or("")}};
    plugin.ca_data = cred.value("certificate_authority_data", "");
    write_gke_kubeconfig(kubeconfig, *context, cred.value("server", ""), kKubeconfigRewriteGap,
                         plugin);
  } catch (const FleetApiError& e) {
    env.err << "fleet-gcloud: " << e.what() << "\n" << std::flush;
    return 1;
  } catch (const std::runtime_error& e) {
    env.err << "ERROR: (" << kCommand << ") Unable to write file [" << kubeconfig
            << "]: " << e.what() << "\n"
            << std::flush;
    return 1;
  }
  env.err << "kubeconfig entry generated for " << a.cluster << ".\n" << std::flush;
  return 0;
}

}  // namespace

int run_fake_gcloud(const std::vector<std::string>& args, FleetApi* api, const FakeXpkEnv& env) {
  if (!args.empty() && args[0] == "gke-gcloud-auth-plugin") {
    // The credential plugin of the kubeconfigs get-credentials writes: an ExecCredential.
    if (api == nullptr) {
      env.err << "fleet-gcloud gke-gcloud-auth-plugin: FALCON_FLEET_URL is not set\n" << std::flush;
      return 1;
    }
    try {
      env.out << api->call("kube:token", nlohmann::json::object()).dump() << "\n" << std::flush;
      return 0;
    } catch (const std::exception& e) {
      env.err << "fleet-gcloud gke-gcloud-auth-plugin: " << e.what() << "\n" << std::flush;
      return 1;
    }
  }
  if (args.size() == 1 && (args[0] == "version" || args[0] == "--version")) {
    env.out << "fleet-gcloud (the local fleet's stand-in for Google Cloud SDK; simulates "
               "container clusters get-credentials)\n"
            << std::flush;
    return 0;
  }
  if (args.size() >= 3 && args[0] == "container" && args[1] == "clusters" &&
      args[2] == "get-credentials") {
    return get_credentials(args, api, env);
  }
  std::string joined;
  for (const std::string& a : args) joined += (joined.empty() ? "" : " ") + a;
  env.err << "fleet-gcloud: only `container clusters get-credentials` and `version` are "
             "simulated; got `"
          << joined << "`\n"
          << std::flush;
  return 2;
}

}  // namespace falcon::fleet
