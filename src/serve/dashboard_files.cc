#include "serve/dashboard_files.h"

#include <openssl/evp.h>

#include <fmt/format.h>

#include <map>
#include <stdexcept>

#include "serve/dashboard_assets.h"

namespace falcon::serve {
namespace {

std::string content_type_of(std::string_view path) {
  auto ends = [&](std::string_view ext) {
    return path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "";
}

std::string etag_of(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("dashboard: SHA-256 of an asset failed");
  }
  std::string hex;
  for (unsigned int i = 0; i < 8 && i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return "\"" + hex + "\"";
}

const std::map<std::string, DashboardFile, std::less<>>& files() {
  static const auto* table = [] {
    auto* out = new std::map<std::string, DashboardFile, std::less<>>();
    for (const EmbeddedAsset& asset : embedded_assets()) {
      std::string type = content_type_of(asset.path);
      if (type.empty()) continue;
      (*out)[std::string(asset.path)] = {asset.bytes, std::move(type), etag_of(asset.bytes)};
    }
    return out;
  }();
  return *table;
}

}  // namespace

const DashboardFile* find_dashboard_file(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.find("..") != std::string_view::npos) {
    return nullptr;
  }
  const auto& table = files();
  const auto it = table.find(path);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace falcon::serve
