#include "kube/exec_credential.h"

#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gcp/json_fields.h"
#include "util/time_format.h"

namespace falcon::kube {
namespace {

constexpr std::chrono::seconds kExpirySkew{30};

std::string last_line(const std::string& text) {
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const auto nl = s.rfind('\n');
  s = nl == std::string::npos ? s : s.substr(nl + 1);
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

}  // namespace

ExecToken parse_exec_credential(const std::string& stdout_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(stdout_text);
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error("its output is not JSON (an ExecCredential was expected)");
  }
  if (gcp::string_field(j, "kind") != "ExecCredential") {
    throw std::runtime_error("its output is not an ExecCredential");
  }
  const auto status = j.find("status");
  if (status == j.end() || !status->is_object() || !status->contains("token") ||
      !(*status)["token"].is_string() || (*status)["token"].get<std::string>().empty()) {
    throw std::runtime_error("its ExecCredential has no status.token");
  }
  ExecToken t;
  t.token = (*status)["token"].get<std::string>();
  if (status->contains("expirationTimestamp") && !(*status)["expirationTimestamp"].is_null()) {
    const auto& e = (*status)["expirationTimestamp"];
    auto when = e.is_string() ? parse_rfc3339(e.get<std::string>()) : std::nullopt;
    if (!when) throw std::runtime_error("its ExecCredential has a bad status.expirationTimestamp");
    t.expires = *when;
  }
  return t;
}

ExecCredentialCache::ExecCredentialCache(std::shared_ptr<CommandRunner> runner,
                                         std::shared_ptr<Clock> clock)
    : runner_(std::move(runner)), clock_(std::move(clock)) {
  if (!runner_ || !clock_) throw std::invalid_argument("ExecCredentialCache: runner and clock");
}

std::shared_ptr<ExecCredentialCache::Entry> ExecCredentialCache::entry(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& e = entries_[key];
  if (!e) e = std::make_shared<Entry>();
  return e;
}

std::string ExecCredentialCache::token(const std::string& key, const ExecPlugin& plugin,
                                       const std::string& server,
                                       std::chrono::milliseconds timeout) {
  const auto e = entry(key);
  const auto valid = [&]() -> std::optional<std::string> {
    std::lock_guard<std::mutex> lock(mu_);
    if (e->token && (!e->token->expires || clock_->now() + kExpirySkew < *e->token->expires)) {
      return e->token->token;
    }
    return std::nullopt;
  };
  if (auto t = valid()) return *t;
  std::lock_guard<std::mutex> refresh(e->refresh);
  if (auto t = valid()) return *t;  // another caller refreshed it while this one waited

  CommandSpec spec;
  spec.argv.push_back(plugin.command);
  spec.argv.insert(spec.argv.end(), plugin.args.begin(), plugin.args.end());
  spec.env = plugin.env;
  nlohmann::json info = {
      {"kind", "ExecCredential"},
      {"apiVersion",
       plugin.api_version.empty() ? "client.authentication.k8s.io/v1beta1" : plugin.api_version},
      {"spec", {{"interactive", false}}}};
  if (plugin.provide_cluster_info) info["spec"]["cluster"] = {{"server", server}};
  spec.env["KUBERNETES_EXEC_INFO"] = info.dump();
  spec.timeout = timeout;
  spec.max_output_bytes = 1 << 20;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++runs_;
  }
  CommandResult r;
  try {
    r = runner_->run(spec);
  } catch (const std::exception& ex) {
    throw std::runtime_error(
        fmt::format("credential plugin {} could not start: {}", plugin.command, ex.what()));
  }
  if (r.timed_out) {
    throw std::runtime_error(
        fmt::format("credential plugin {} timed out after {} ms", plugin.command, timeout.count()));
  }
  if (!r.ok()) {
    const std::string why = last_line(r.stderr_text);
    throw std::runtime_error(fmt::format("credential plugin {} failed ({}){}{}", plugin.command,
                                         r.term_signal != 0
                                             ? fmt::format("signal {}", r.term_signal)
                                             : fmt::format("exit code {}", r.exit_code),
                                         why.empty() ? "" : ": ", why));
  }
  ExecToken fresh;
  try {
    fresh = parse_exec_credential(r.stdout_text);
  } catch (const std::exception& ex) {
    throw std::runtime_error(fmt::format("credential plugin {} gave no usable credential: {}",
                                         plugin.command, ex.what()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  e->token = fresh;
  return fresh.token;
}

void ExecCredentialCache::invalidate(const std::string& key) {
  const auto e = entry(key);
  std::lock_guard<std::mutex> lock(mu_);
  e->token.reset();
}

int ExecCredentialCache::runs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_;
}

}  // namespace falcon::kube
