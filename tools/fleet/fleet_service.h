// The whole local fleet in one object, on one port: the local Google-protocol server
// (falcon::fake::GcpServer: Logging, Storage, tokens) with the fleet's control routes
// (fleet_control.h) added to it, the simulator writing its pods' logs into that server's
// Logging store, and a background thread that keeps scaled time moving (and saves the state
// file). falcon-fleet is a thin main() around it; tests start one in process on port 0.
//
//   FleetService fleet(load_fleet_config("examples/local-fleet.yaml"), {});
//   fleet.start();                     // binds 127.0.0.1:<OS-chosen port>
//   setenv("FALCON_FLEET_URL", fleet.url().c_str(), 1);   // for fleet-xpk
//   ...
//   fleet.stop();                      // also done by the destructor
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "falcon/clock.h"
#include "fleet/fleet_config.h"
#include "fleet/fleet_control.h"
#include "fleet/kube_api.h"
#include "fleet/simulator.h"
#include "gcp_server/gcp_server.h"

namespace falcon::fleet {

struct FleetServiceOptions {
  std::string host = "127.0.0.1";
  int port = 0;                      // 0: the OS chooses
  std::optional<double> time_scale;  // overrides the fleet file's time_scale
  std::string state_file;    // empty: none; else restored at start, saved while running and at stop
  std::string data_dir;      // the Google server's persistence (logs, objects); empty: memory
  bool require_auth = true;  // Logging and Storage need a bearer token (token())
  std::chrono::milliseconds tick{200};  // how often scaled time is simulated in the background
  std::shared_ptr<Clock> real_clock;    // null: the system clock
};

// Hands simulated log entries to the Google server's Logging store; runs of lines take its
// bulk path (write_text_entries), which keeps the shared part of the entries once.
class GcpLogSink final : public LogSink {
 public:
  explicit GcpLogSink(fake::GcpServer& server) : server_(server) {}
  void write(std::vector<nlohmann::json> entries) override;
  void write_lines(const nlohmann::json& shared, std::vector<TextLine> lines) override;

 private:
  fake::GcpServer& server_;
};

class FleetService {
 public:
  // Builds everything but does not listen. Throws std::runtime_error when the state file exists
  // but cannot be read or does not fit the fleet file, and std::invalid_argument for a negative
  // time scale.
  FleetService(FleetConfig config, FleetServiceOptions options);
  ~FleetService();
  FleetService(const FleetService&) = delete;
  FleetService& operator=(const FleetService&) = delete;

  // Binds, serves and starts the background thread; returns once connections are accepted.
  // Throws std::runtime_error when the address cannot be bound. Not restartable.
  void start();
  // Stops serving, joins the background thread and saves the state file. Idempotent.
  void stop();

  int port() const;
  std::string url() const;    // http://127.0.0.1:<port>: FALCON_FLEET_URL and Google endpoints
  std::string token() const;  // a bearer token the Google routes accept
  // {"url", "port", "token", "pid", "clusters": [names], "time_scale", "logging_endpoint",
  // "storage_endpoint", "token_endpoint"}: what falcon-fleet prints with --print-json and writes
  // to --ready-file (FALCON_FLEET_URL is "url").
  nlohmann::json ready_info() const;

  FleetSimulator& simulator() { return *simulator_; }
  SimClock& clock() { return *clock_; }
  fake::GcpServer& gcp() { return *gcp_; }
  // The clusters' Kubernetes API (kube_api.h): https://127.0.0.1:<port>, and its CA (PEM).
  std::string kube_url() const;
  const std::string& kube_ca_pem() const { return kube_tls_->ca_pem(); }

  // Writes the state file now (no-op without one). Throws std::runtime_error on I/O failure.
  void save_state();

 private:
  void tick_loop();

  FleetServiceOptions options_;
  std::unique_ptr<fake::GcpServer> gcp_;
  std::shared_ptr<SimClock> clock_;
  std::unique_ptr<FleetSimulator> simulator_;
  std::unique_ptr<FleetControl> control_;
  std::unique_ptr<KubeApi> kube_;
  std::unique_ptr<KubeTlsServer> kube_tls_;
  std::thread ticker_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool started_ = false;
  bool stopped_ = false;
  std::mutex save_mu_;
  std::string last_saved_;
};

}  // namespace falcon::fleet
