// falcon-gcp-server: the local Cloud Logging / Cloud Storage / OAuth server as a process.
//
//   falcon-gcp-server [--host 127.0.0.1] [--port 0] [--data-dir DIR] [--no-auth]
//                     [--token TOKEN]... [--print-json] [--scan-budget N]
//                     [--logging-reads-per-minute N] [--verbose]
//
// Prints `falcon-gcp-server listening on http://HOST:PORT` (and with --print-json a JSON line
// {"url","port","token"}) on stdout once it accepts connections, then serves until SIGINT or
// SIGTERM.
#include <signal.h>

#include <cstdio>
#include <iostream>

#include <httplib.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gcp_server/gcp_server.h"

int main(int argc, char** argv) {
  CLI::App app{"A local server speaking the Cloud Logging, Cloud Storage and OAuth protocols"};
  falcon::fake::GcpServerOptions options;
  bool no_auth = false;
  bool print_json = false;
  bool verbose = false;
  app.add_option("--host", options.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", options.port, "Port (0: chosen by the OS)")->capture_default_str();
  app.add_option("--data-dir", options.data_dir, "Persist logs and objects here");
  app.add_flag("--no-auth", no_auth, "Do not require bearer tokens");
  app.add_option("--token", options.fixed_tokens, "A bearer token to accept (repeatable)");
  app.add_flag("--print-json", print_json, "Also print a JSON line with url, port and token");
  app.add_option("--scan-budget", options.list_scan_budget,
                 "Entries one entries:list call examines before returning a partial page");
  app.add_option("--logging-reads-per-minute", options.logging_reads_per_minute,
                 "Cloud Logging's read quota: entries:list calls per project in any 60 s "
                 "window before 429 RESOURCE_EXHAUSTED (0: no quota)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--strict-credentials", options.strict_credentials,
               "Reject JWTs of unregistered issuers and unknown refresh tokens");
  app.add_flag("--verbose", verbose, "Log every request to stderr");
  CLI11_PARSE(app, argc, argv);
  options.require_auth = !no_auth;

  // Block the stop signals before any thread starts, so that only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    falcon::fake::GcpServer server(options);
    if (verbose) {
      server.http().set_logger([](const httplib::Request& req, const httplib::Response& res) {
        std::cerr << req.method << ' ' << req.target << " -> " << res.status << '\n';
      });
    }
    server.start();
    std::cout << "falcon-gcp-server listening on " << server.base_url() << std::endl;
    if (print_json) {
      std::cout << nlohmann::json{{"url", server.base_url()},
                                  {"port", server.port()},
                                  {"token", server.valid_token()}}
                       .dump()
                << std::endl;
    }
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
  } catch (const std::exception& e) {
    std::cerr << "falcon-gcp-server: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
