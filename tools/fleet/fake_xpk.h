// fleet-xpk: an xpk look-alike that the cluster layer runs exactly as it runs the real xpk.
//
// It parses real xpk's argv (xpk_args.h), then prints what xpk v1.13.1 (or the version the
// fleet file names) prints for `workload create|list|delete` and `version`: `[XPK] ` lines on
// stdout, the list table, child-tool errors on stderr, `[XPK] Exiting XPK cleanly` or
// `[XPK] XPK failed, error code N` with exit code N; argparse errors exit 2 with nothing on
// stdout. The workloads live in the fleet server (falcon-fleet), found through
// FALCON_FLEET_URL.
//
// Like xpk, every command first fetches credentials, which (when $KUBECONFIG is set) merges a
// gke_<project>_<location>_<cluster> context into that file and makes it current; kubectl's
// calls then go to the cluster the file's current context names, so processes that share one
// kubeconfig can act on each other's clusters, as real xpk does. Without $KUBECONFIG nothing
// is written (the user's ~/.kube/config is left alone) and the named cluster is used.
// The cluster's probe_latency_ms (list) or command_latency_ms (create, delete), plus
// slow_latency_ms for a slow cluster, is spent in that credentials step (real time).
#pragma once

#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace falcon::fleet {

class FleetControl;

// The fleet could not be reached, or answered with an error.
class FleetApiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The fleet's control API as fleet-xpk sees it (fleet_control.h lists the routes).
class FleetApi {
 public:
  virtual ~FleetApi() = default;
  // Sends `body` to /fleet/v1/<route>; returns the JSON answer. Blocks. Throws FleetApiError.
  virtual nlohmann::json call(const std::string& route, const nlohmann::json& body) = 0;
};

// Over HTTP, to a falcon-fleet at `base_url` (http://127.0.0.1:PORT).
class HttpFleetApi final : public FleetApi {
 public:
  explicit HttpFleetApi(std::string base_url);
  nlohmann::json call(const std::string& route, const nlohmann::json& body) override;

 private:
  std::string base_url_;
};

// In process, straight into a FleetControl (tests).
class LocalFleetApi final : public FleetApi {
 public:
  explicit LocalFleetApi(FleetControl& control) : control_(control) {}
  nlohmann::json call(const std::string& route, const nlohmann::json& body) override;

 private:
  FleetControl& control_;
};

struct FakeXpkEnv {
  std::ostream& out;
  std::ostream& err;
  std::istream& in;  // answers to prompts; EOF makes a prompt fail as Python's input() does
  std::function<std::optional<std::string>(const std::string&)> getenv;
  std::function<void(std::chrono::milliseconds)> sleep;
};

// For the fleet's executables (fleet-xpk, fleet-gcloud): the fleet at $FALCON_FLEET_URL, null
// when it is not set; and an environment of this process's standard streams, getenv and a real
// sleep.
std::unique_ptr<FleetApi> fleet_api_from_environment();
FakeXpkEnv process_env();

// Runs one invocation (`args` is argv without the program name) and returns the exit code.
// `api` is null when FALCON_FLEET_URL is not set; fleet-xpk then explains how to start the
// fleet and exits 1 (after argument parsing, which needs no fleet).
int run_fake_xpk(const std::vector<std::string>& args, FleetApi* api, const FakeXpkEnv& env);

}  // namespace falcon::fleet
