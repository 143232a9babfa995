#include "cli/cli.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

namespace falcon::cli {

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
    fabric_ = std::make_unique<ClusterFabric>(config_path(), std::move(deps));
  }
  return *fabric_;
}

void print_json(const nlohmann::json& value) { std::cout << value.dump(2) << "\n"; }

void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
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

std::string parse_since(const std::string& flag, const std::string& text) {
  try {
    return resolve_since(text, std::chrono::system_clock::now());
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}", flag, e.what()));
  }
}

}  // namespace falcon::cli
