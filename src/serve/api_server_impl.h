// The insides of ApiServer, shared by its plumbing (api_server.cc: the HTTP server, the checks
// every request passes, errors, metrics) and its routes (api_routes.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "falcon/state_store.h"
#include "serve/api_request.h"
#include "serve/api_server.h"
#include "serve/http_server.h"
#include "serve/prometheus_text.h"
#include "serve/router.h"

namespace falcon {

// At most `per_key` slots per key (a token, or a client address): the share of one caller.
class ShareLimiter : public std::enable_shared_from_this<ShareLimiter> {
 public:
  explicit ShareLimiter(int per_key) : per_key_(per_key) {}
  // A slot of `key`, held until the returned handle is destroyed; null when `key` holds
  // per_key slots already.
  std::shared_ptr<void> try_acquire(const std::string& key);

 private:
  void release(const std::string& key);
  std::mutex mutex_;
  std::unordered_map<std::string, int> held_;  // only keys holding a slot: bounded by the slots
  int per_key_;
};

// Background exports: at most max_running at once, each on a thread of its own, at most
// max_queued waiting (in order). Shared with the export threads, so that a thread outliving the
// server (after the grace) touches nothing of it.
class ExportTracker {
 public:
  ExportTracker(std::size_t max_running, std::size_t max_queued)
      : max_running_(max_running), max_queued_(max_queued) {}

  // Admits one more export until place() or unreserve(): nullopt when max_running run and
  // max_queued wait already (or stop() came); else whether it will run at once (or wait).
  std::optional<bool> reserve();
  void unreserve();
  // Starts `job` on a thread of its own when a slot is free, else queues it. False when it can
  // be neither (stop() came, or no thread could be started): the caller records it failed.
  bool place(std::int64_t id, std::function<void()> job);
  // Called by a job as it ends: runs `record` (its end, in the store) unless stop() marked the
  // export failed already, then starts the next queued export. Under the tracker's lock, so
  // that an end is never recorded after stop() recorded a failure.
  void end(std::int64_t id, const std::function<void()>& record);
  // The place of `id` in the queue (1: next), 0 when not queued.
  std::size_t position(std::int64_t id);
  std::size_t running();
  std::size_t queued();
  // No more starts; waits up to `grace` for the running exports; returns the ids it gives up on
  // (the queued ones and the ones still running), which are then abandoned.
  std::vector<std::int64_t> stop(std::chrono::milliseconds grace);
  std::size_t abandoned();

 private:
  bool start_locked(std::int64_t id, std::function<void()> job);
  const std::size_t max_running_;
  const std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t reserved_ = 0;  // admitted, not yet placed (their row being written)
  std::set<std::int64_t> running_;
  std::deque<std::pair<std::int64_t, std::function<void()>>> queue_;
  std::set<std::int64_t> abandoned_;  // stop() marked them failed
  bool stopped_ = false;
};

// What a route does with a request, on a worker (or on the I/O thread when it never blocks).
using RouteHandler = std::function<void(serve::Request&, serve::Response&)>;

struct RouteOptions {
  bool rest = false;          // the last {parameter} takes the rest of the path
  bool needs_token = true;    // false: public (the probes, the dashboard's files, whoami)
  bool checks_host = true;    // false: answered whatever the Host (the load balancer's probes)
  bool on_io_thread = false;  // answered at once on the I/O thread: never blocks
};

struct ApiServer::Impl {
  ApiServerOptions options;
  serve::Router router;
  struct Route {
    RouteHandler handler;
    RouteOptions options;
  };
  std::vector<Route> routes;  // by the router's index
  std::unique_ptr<serve::HttpServer> http;
  std::atomic<bool> stopping{false};
  std::atomic<bool> bound{false};
  std::size_t select_route = 0;  // POST /v1/select: repeats answered on the I/O thread

  // Set by bind(): what a Host header may name, whether the address is loopback.
  std::set<std::string> allowed_hosts;  // lower case, with the port
  bool any_host = false;
  bool loopback = false;
  std::set<std::string> allowed_origins;  // lower case

  mutable std::mutex tokens_mutex;
  std::shared_ptr<const TokenTable> tokens;

  std::shared_ptr<ShareLimiter> request_shares;
  std::shared_ptr<ShareLimiter> stream_shares;
  std::atomic<int> active_follows{0};
  std::shared_ptr<std::atomic<bool>> stop_flag = std::make_shared<std::atomic<bool>>(false);
  // Set once stop() gave up waiting for the exports still running.
  std::shared_ptr<std::atomic<bool>> cancel_exports = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<ExportTracker> exports;

  // Request metrics: labels from closed sets (route templates, known methods, statuses).
  mutable std::mutex metrics_mutex;
  std::map<std::tuple<std::string, std::string, int>, std::uint64_t> requests;
  std::map<std::string, serve::LatencyHistogram> latency;
  std::map<std::string, std::uint64_t> selections;

  explicit Impl(ApiServerOptions o);

  ControlPlane& control() const { return *options.control; }
  StateStore& store() const { return *options.store; }
  StoreTime now() const { return options.clock->now(); }
  std::shared_ptr<const TokenTable> current_tokens() const {
    std::lock_guard lock(tokens_mutex);
    return tokens;
  }

  // --- The checks and the dispatch (api_server.cc).
  void route(const std::string& method, const std::string& path, RouteHandler handler,
             RouteOptions route_options = {});
  std::optional<serve::Refusal> on_head(serve::Request& req);
  std::optional<serve::Refusal> check_host(const serve::Request& req) const;
  std::optional<serve::Refusal> check_browser_safety(const serve::Request& req) const;
  std::optional<serve::Refusal> authorize(serve::Request& req, const Route& r) const;
  bool on_request(serve::Request& req, serve::Response& res);
  bool answer_repeat(serve::Request& req, serve::Response& res);
  void run(serve::Request& req, serve::Response& res);
  void refuse(const serve::Request& req, serve::Response& res, const serve::Refusal& why);
  void finished(const serve::Request& req, int status, double seconds, const std::string& error);
  static std::string answer_error(serve::Response& res);
  void count_selection(const std::string& outcome);
  std::string metrics() const;

  // --- The routes (api_routes.cc).
  void add_routes();
  void add_service_routes();
  void add_cluster_routes();
  void add_selection_routes();
  void add_workload_routes();
  void add_managed_routes();
  void add_export_routes();
  void submit(serve::Request& req, serve::Response& res);
  std::int64_t parse_selection_link(const nlohmann::json& body,
                                    const std::optional<std::string>& cluster);
  void cancel(serve::Request& req, serve::Response& res);
  void logs(serve::Request& req, serve::Response& res);
  void start_export(serve::Request& req, serve::Response& res);
  std::function<void()> export_job(std::int64_t id, ExportRequest request);
  void send_asset(const serve::Request& req, serve::Response& res, const std::string& path) const;
  nlohmann::json export_json(const ExportRecord& e) const;
};

}  // namespace falcon
