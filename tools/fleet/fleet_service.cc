#include "fleet/fleet_service.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace falcon::fleet {
namespace {

// The state without the parts that change by themselves, to tell whether saving is needed.
std::string state_fingerprint(nlohmann::json state) {
  state.erase("now");
  state.erase("now_ns");
  return state.dump();
}

}  // namespace

void GcpLogSink::write(std::vector<nlohmann::json> entries) {
  server_.write_log_entries(std::move(entries));
}

void GcpLogSink::write_lines(const nlohmann::json& shared, std::vector<TextLine> lines) {
  std::vector<fake::LogLine> converted;
  converted.reserve(lines.size());
  for (auto& line : lines) converted.push_back(fake::LogLine{line.time_ns, std::move(line.text)});
  server_.write_text_entries(shared, std::move(converted));
}

FleetService::FleetService(FleetConfig config, FleetServiceOptions options)
    : options_(std::move(options)) {
  if (!options_.real_clock) options_.real_clock = make_system_clock();
  fake::GcpServerOptions gcp_options;
  gcp_options.host = options_.host;
  gcp_options.port = options_.port;
  gcp_options.require_auth = options_.require_auth;
  gcp_options.data_dir = options_.data_dir;
  gcp_options.clock = options_.real_clock;  // receiveTimestamp on the fleet's wall clock
  gcp_ = std::make_unique<fake::GcpServer>(gcp_options);
  clock_ = std::make_shared<SimClock>(options_.real_clock,
                                      options_.time_scale.value_or(config.time_scale));
  for (const std::string& bucket : config.buckets) {
    gcp_->ensure_bucket(bucket, config.clusters.empty() ? "" : config.clusters.front().project);
  }
  simulator_ = std::make_unique<FleetSimulator>(std::move(config), clock_,
                                                std::make_shared<GcpLogSink>(*gcp_));
  if (!options_.state_file.empty() && std::filesystem::exists(options_.state_file)) {
    std::ifstream in(options_.state_file);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json state = nlohmann::json::parse(text.str(), nullptr, false);
    if (!in || state.is_discarded()) {
      throw std::runtime_error("cannot read the fleet state file " + options_.state_file);
    }
    try {
      simulator_->restore(state);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(fmt::format("{}: {}", options_.state_file, e.what()));
    }
  }
  // The jobs' storage fence is read where falcon writes it: this server's Cloud Storage. The
  // epoch object holds the number and a newline (falcon's epoch_fence.cc writes it).
  simulator_->set_fence_reader(
      [gcp = gcp_.get()](const std::string& uri) -> std::optional<std::int64_t> {
        constexpr std::string_view kScheme = "gs://";
        if (uri.compare(0, kScheme.size(), kScheme) != 0) return std::nullopt;
        const auto slash = uri.find('/', kScheme.size());
        if (slash == std::string::npos) return std::nullopt;
        const auto data = gcp->object_data(uri.substr(kScheme.size(), slash - kScheme.size()),
                                           uri.substr(slash + 1));
        if (!data) return std::nullopt;
        try {
          return std::stoll(*data);
        } catch (const std::exception&) {
          return std::nullopt;
        }
      });
  control_ = std::make_unique<FleetControl>(*simulator_, "");
  kube_ = std::make_unique<KubeApi>(*simulator_);
  register_kube_token_route(gcp_->http(), *kube_);  // before the control routes
  kube_tls_ = std::make_unique<KubeTlsServer>(*kube_);
  register_fleet_routes(gcp_->http(), *control_);
}

FleetService::~FleetService() {
  try {
    stop();
  } catch (const std::exception&) {
    // A destructor must not throw; stop() already reported what it could.
  }
}

void FleetService::start() {
  {
    std::lock_guard lock(mu_);
    if (started_) throw std::runtime_error("FleetService::start called twice");
    started_ = true;
  }
  gcp_->start();
  kube_tls_->start(options_.host);
  control_->set_server_url(gcp_->base_url());
  control_->set_kube_endpoint(kube_tls_->base_url(), kube_tls_->ca_data());
  ticker_ = std::thread([this] { tick_loop(); });
}

void FleetService::stop() {
  {
    std::lock_guard lock(mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  gcp_->stop();
  kube_tls_->stop();
  save_state();
}

void FleetService::tick_loop() {
  auto last_save = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, options_.tick, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    if (!clock_->manual()) simulator_->advance();
    if (!options_.state_file.empty() &&
        std::chrono::steady_clock::now() - last_save >= std::chrono::seconds(2)) {
      last_save = std::chrono::steady_clock::now();
      try {
        save_state();
      } catch (const std::exception&) {
        // Retried on the next round and reported by stop().
      }
    }
    lock.lock();
  }
}

void FleetService::save_state() {
  if (options_.state_file.empty()) return;
  std::lock_guard lock(save_mu_);
  const nlohmann::json state = simulator_->state();
  const std::string fingerprint = state_fingerprint(state);
  if (fingerprint == last_saved_) return;
  const std::string tmp = fmt::format("{}.tmp.{}", options_.state_file, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << state.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write the fleet state file " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, options_.state_file, ec);
  if (ec) throw std::runtime_error("cannot replace the fleet state file " + options_.state_file);
  last_saved_ = fingerprint;
}

int FleetService::port() const { return gcp_->port(); }
std::string FleetService::url() const { return gcp_->base_url(); }
std::string FleetService::kube_url() const { return kube_tls_->base_url(); }
std::string FleetService::token() const { return gcp_->valid_token(); }

nlohmann::json FleetService::ready_info() const {
  nlohmann::json clusters = nlohmann::json::array();
  for (const auto& c : simulator_->config().clusters) clusters.push_back(c.name);
  return {{"url", url()},
          {"port", port()},
          {"token", token()},
          {"pid", static_cast<long>(::getpid())},
          {"clusters", std::move(clusters)},
          {"time_scale", clock_->scale()},
          {"logging_endpoint", url()},
          {"storage_endpoint", url()},
          {"token_endpoint", url() + "/token"}};
}

}  // namespace falcon::fleet
