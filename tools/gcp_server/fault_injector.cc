#include "gcp_server/fault_injector.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace falcon::fake {

using nlohmann::json;

json Fault::to_json() const {
  return json{{"route", route},
              {"times", times},
              {"status", status},
              {"message", message},
              {"delay_ms", delay.count()},
              {"cut_connection", cut_connection},
              {"cut_after_bytes", cut_after_bytes},
              {"retry_delay", retry_delay}};
}

Fault Fault::from_json(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("a fault must be a JSON object");
  Fault f;
  for (const auto& [key, v] : j.items()) {
    auto need = [&](bool ok, const char* type) {
      if (!ok) throw std::invalid_argument("fault field '" + key + "' must be " + type);
    };
    if (key == "route") {
      need(v.is_string(), "a string");
      f.route = v.get<std::string>();
    } else if (key == "times") {
      need(v.is_number_integer(), "an integer");
      f.times = v.get<int>();
    } else if (key == "status") {
      need(v.is_number_integer(), "an integer");
      f.status = v.get<int>();
    } else if (key == "message") {
      need(v.is_string(), "a string");
      f.message = v.get<std::string>();
    } else if (key == "delay_ms") {
      need(v.is_number_integer(), "an integer");
      f.delay = std::chrono::milliseconds(v.get<std::int64_t>());
    } else if (key == "cut_connection") {
      need(v.is_boolean(), "a boolean");
      f.cut_connection = v.get<bool>();
    } else if (key == "cut_after_bytes") {
      need(v.is_number_integer(), "an integer");
      f.cut_after_bytes = v.get<std::int64_t>();
    } else if (key == "retry_delay") {
      need(v.is_string(), "a string");
      f.retry_delay = v.get<std::string>();
    } else {
      throw std::invalid_argument("unknown fault field '" + key + "'");
    }
  }
  if (f.times == 0 || f.times < -1) throw std::invalid_argument("times must be >= 1 or -1");
  if (f.status != 0 && (f.status < 100 || f.status > 599)) {
    throw std::invalid_argument("status must be an HTTP status code");
  }
  return f;
}

void FaultInjector::add(Fault fault) {
  std::lock_guard lock(mutex_);
  faults_.push_back(std::move(fault));
}

void FaultInjector::fail_next(std::string route, int status, int times) {
  Fault f;
  f.route = std::move(route);
  f.status = status;
  f.times = times;
  add(std::move(f));
}

void FaultInjector::cut_next(std::string route, std::int64_t after_bytes, int times) {
  Fault f;
  f.route = std::move(route);
  f.cut_connection = true;
  f.cut_after_bytes = after_bytes;
  f.times = times;
  add(std::move(f));
}

void FaultInjector::delay_next(std::string route, std::chrono::milliseconds delay, int times) {
  Fault f;
  f.route = std::move(route);
  f.delay = delay;
  f.times = times;
  add(std::move(f));
}

void FaultInjector::clear() {
  std::lock_guard lock(mutex_);
  faults_.clear();
}

std::vector<Fault> FaultInjector::pending() const {
  std::lock_guard lock(mutex_);
  return faults_;
}

std::optional<Fault> FaultInjector::take(std::string_view route) {
  std::lock_guard lock(mutex_);
  for (auto it = faults_.begin(); it != faults_.end(); ++it) {
    if (it->route != "*" && it->route != route) continue;
    Fault f = *it;
    if (it->times > 0 && --it->times == 0) faults_.erase(it);
    return f;
  }
  return std::nullopt;
}

}  // namespace falcon::fake
