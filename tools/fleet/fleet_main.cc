// falcon-fleet: the local fleet as a process (see fleet/fleet_service.h).
//
//   falcon-fleet --fleet examples/local-fleet.yaml [--host 127.0.0.1] [--port 0]
//                [--time-scale X] [--state-file PATH] [--data-dir DIR] [--no-auth]
//                [--print-json] [--ready-file PATH] [--token-file PATH]
//                [--env-file PATH] [--repos-file examples/local-repos.yaml]
//
// Once it accepts connections it prints how to reach it and the `export` lines that point the
// falcon CLI at it (fleet/fleet_env.h; with --print-json also one JSON line
// {"url","port","token","pid","clusters","time_scale","logging_endpoint","storage_endpoint",
// "token_endpoint"}, the same object --ready-file gets), writes the token, env and ready files
// in that order, then serves until SIGINT or SIGTERM and exits 0 after a clean stop. Exit 1 when
// the fleet file is invalid or the port cannot be bound, 2 for a bad command line.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "fleet/fleet_env.h"
#include "fleet/fleet_service.h"

namespace {

// Writes `text` to `path` through a temporary file, so a reader never sees half of it.
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

// `path` made absolute, so that the export lines hold wherever they are sourced.
std::string absolute_path(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The local fleet: simulated GKE clusters behind fleet-xpk, plus local Cloud "
      "Logging, Cloud Storage and OAuth endpoints, on one port"};
  std::string fleet_file;
  falcon::fleet::FleetServiceOptions options;
  bool no_auth = false;
  bool print_json = false;
  std::string ready_file;
  std::string token_file;
  std::string env_file;
  std::string repos_file;
  app.add_option("--fleet", fleet_file, "The fleet file (YAML)")->required();
  app.add_option("--host", options.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", options.port, "Port (0: chosen by the OS)")->capture_default_str();
  app.add_option("--time-scale", options.time_scale,
                 "Simulated seconds per real second: durations shrink by it, times stay the wall "
                 "clock's (0: only clock:advance moves time); overrides the fleet file")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--state-file", options.state_file,
                 "Restore workloads from this file at start and keep it up to date");
  app.add_option("--data-dir", options.data_dir, "Persist logs and objects here");
  app.add_flag("--no-auth", no_auth, "Do not require bearer tokens on Logging and Storage");
  app.add_flag("--print-json", print_json, "Also print one JSON line with url, port, token, pid");
  app.add_option("--ready-file", ready_file, "Write that JSON object to this file when ready");
  app.add_option("--token-file", token_file, "Write the bearer token to this file when ready");
  app.add_option("--env-file", env_file,
                 "Write the export lines that point the falcon CLI at the fleet to this file when "
                 "ready (the token goes to --token-file, else to this path plus .token)");
  app.add_option("--repos-file", repos_file,
                 "The layer's repos.yaml for this fleet's clusters: FALCON_CONFIG in the export "
                 "lines")
      ->check(CLI::ExistingFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; any mistake: 2
  }
  options.require_auth = !no_auth;

  // A script that read the start-up lines and closed the pipe must not kill the fleet.
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    falcon::fleet::FleetService fleet(falcon::fleet::load_fleet_config(fleet_file), options);
    fleet.start();
    const nlohmann::json info = fleet.ready_info();
    const auto& config = fleet.simulator().config();
    std::string names;
    for (const auto& c : config.clusters) names += (names.empty() ? "" : ", ") + c.name;
    if (token_file.empty() && !env_file.empty()) token_file = env_file + ".token";
    const std::string env_script = falcon::fleet::fleet_env_script({
        .url = fleet.url(),
        .bin_dir = falcon::fleet::fleet_bin_dir(),
        .repos_file = repos_file.empty() ? "" : absolute_path(repos_file),
        .token_file = token_file.empty() ? "" : absolute_path(token_file),
    });
    // The files first: whoever reads the banner (or the ready file) may read them at once.
    if (!token_file.empty()) write_atomically(token_file, fleet.token() + "\n");
    if (!env_file.empty()) write_atomically(env_file, env_script);
    std::cout << fmt::format(
        "falcon-fleet: {} cluster(s) ({}) at {}; xpk {}; time x{}\n"
        "# Logging, Storage and token endpoints: {} (bearer token: --token-file or "
        "--print-json)\n"
        "# The falcon CLI reaches this fleet with these variables ({}):\n{}",
        config.clusters.size(), names, fleet.url(), config.xpk.version, fleet.clock().scale(),
        fleet.url(), env_file.empty() ? "--env-file writes them to a file" : "source " + env_file,
        env_script);
    if (print_json) std::cout << info.dump() << "\n";
    std::cout << std::flush;
    if (!ready_file.empty()) write_atomically(ready_file, info.dump() + "\n");
    int signal = 0;
    sigwait(&stop_signals, &signal);
    fleet.stop();
    std::cout << "falcon-fleet: stopped (" << (signal == SIGINT ? "SIGINT" : "SIGTERM") << ")"
              << std::endl;
    return 0;
  } catch (const falcon::fleet::FleetConfigError& e) {
    std::cerr << "falcon-fleet: invalid fleet file:\n" << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "falcon-fleet: " << e.what() << std::endl;
    return 1;
  }
}
