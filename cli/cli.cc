#include "cli/cli.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iostream>

namespace falcon::cli {
namespace {

// The most of one table cell shown: a cause or a reason, not a dump.
constexpr std::size_t kMaxCellBytes = 512;

// The bearer token: the first line of --token-file, else $FALCON_TOKEN; empty when neither.
std::string read_token(const std::string& token_file) {
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    std::string line;
    if (!in || !std::getline(in, line)) {
      throw UsageError(fmt::format("--token-file: cannot read a token from {}", token_file));
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())) != 0) {
      line.pop_back();
    }
    if (line.empty()) throw UsageError(fmt::format("--token-file: {} is empty", token_file));
    return line;
  }
  if (const char* env = std::getenv("FALCON_TOKEN"); env != nullptr) return env;
  return "";
}

}  // namespace

std::string Context::config_path() const {
  if (!config_flag.empty()) return config_flag;
  if (const char* env = std::getenv("FALCON_CONFIG"); env != nullptr && *env != '\0') return env;
  return "repos.yaml";
}

ClusterFabric& Context::fabric() {
  if (!fabric_) {
    FabricDependencies deps;  // the real effects
    // The library prints nothing: say here why a log read or export is waiting.
    deps.on_log_wait = [](const LogWaitNotice& notice) {
      std::cerr << "falcon: " << notice.message << std::endl;
    };
    // ... and when the state store (falcon.db) cannot be used: the command goes on without it.
    deps.on_notice = [](const std::string& message) {
      std::cerr << "falcon: " << message << std::endl;
    };
    fabric_ = std::make_shared<ClusterFabric>(config_path(), std::move(deps));
  }
  return *fabric_;
}

FabricClient& Context::client() {
  if (!client_) {
    if (remote()) {
      ApiClientOptions options;
      options.url = server_url();
      options.token = read_token(token_file);
      try {
        client_ = make_remote_client(std::move(options));
      } catch (const std::invalid_argument& e) {
        throw UsageError(
            fmt::format("{}: {}", server_flag.empty() ? "FALCON_SERVER" : "--server", e.what()));
      }
    } else {
      fabric();
      client_ = make_local_client(fabric_, [](const std::string& message) {
        std::cerr << "falcon: " << message << std::endl;
      });
    }
  }
  return *client_;
}

std::string Context::server_url() const {
  if (!server_flag.empty()) return server_flag;
  if (const char* env = std::getenv("FALCON_SERVER"); env != nullptr) return env;
  return "";
}

void Context::refuse_remote(const std::string& command, const std::string& why) const {
  if (!remote()) return;
  throw UsageError(fmt::format("{} does not run through a falcon server ({}{}): {}", command,
                               server_flag.empty() ? "FALCON_SERVER=" : "--server ", server_url(),
                               why));
}

void print_json(const nlohmann::json& value) { std::cout << value.dump(2) << "\n"; }

void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& given) {
  // Every cell on one line, whatever it holds (a multi-line xpk cause, an escape sequence).
  std::vector<std::vector<std::string>> rows = given;
  for (auto& row : rows) {
    for (auto& cell : row) cell = printable(cell, kMaxCellBytes);
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i + 1 == row.size()) {
        line += row[i];
      } else {
        line += fmt::format("{:<{}}  ", row[i], width[i]);
      }
    }
    std::cout << line << "\n";
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);
}

std::string or_dash(const std::optional<std::string>& value) {
  return value && !value->empty() ? *value : "-";
}

std::string or_dash(const std::optional<int>& value) {
  return value ? std::to_string(*value) : "-";
}

}  // namespace falcon::cli
