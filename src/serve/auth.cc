// Bearer tokens (serve.tokens_file) and listen addresses.
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "serve/api_server.h"

namespace falcon {
namespace {

std::string sha256(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

constexpr std::size_t kMinTokenLength = 16;

}  // namespace

TokenTable TokenTable::load(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw ApiServerError(fmt::format("serve.tokens_file {}: {}", path, std::strerror(errno)));
  }
  // Others may not read it, nor the group change it. Group read is allowed: Kubernetes mounts
  // a Secret as root:<fsGroup> with group read added.
  if ((st.st_mode & (S_IRWXO | S_IWGRP)) != 0) {
    throw ApiServerError(
        fmt::format("serve.tokens_file {}: mode {:o} lets others read it or the group change it; "
                    "run chmod 600 {}",
                    path, st.st_mode & 0777, path));
  }
  std::ifstream in(path);
  if (!in) throw ApiServerError(fmt::format("serve.tokens_file {}: cannot be read", path));
  TokenTable table;
  std::map<std::string, int> first_line;  // token digest -> the line it is on
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string token, role, extra;
    if (!(words >> token)) continue;  // blank or comment
    const auto where = fmt::format("serve.tokens_file {}:{}", path, number);
    if (!(words >> role) || (words >> extra)) {
      throw ApiServerError(
          fmt::format("{}: expected `<token> <role>` (role read or operate)", where));
    }
    if (token.size() < kMinTokenLength) {
      throw ApiServerError(
          fmt::format("{}: a token must have at least {} characters", where, kMinTokenLength));
    }
    if (role != "read" && role != "operate") {
      throw ApiServerError(fmt::format("{}: unknown role '{}' (expected read or operate)",
                                       where.substr(0, 300), role.substr(0, 40)));
    }
    const std::string digest = sha256(token);
    if (const auto it = first_line.find(digest); it != first_line.end()) {
      // A token with two roles would be decided by its order in the file: refused instead.
      throw ApiServerError(fmt::format("{}: this token is listed already on line {}",
                                       where.substr(0, 300), it->second));
    }
    first_line.emplace(digest, number);
    table.add(token, role == "read" ? TokenRole::kRead : TokenRole::kOperate);
  }
  if (table.empty()) throw ApiServerError(fmt::format("serve.tokens_file {}: no tokens", path));
  return table;
}

void TokenTable::add(const std::string& token, TokenRole role) {
  std::string digest = sha256(token);
  for (const auto& entry : entries_) {
    if (entry.first == digest) throw ApiServerError("a token is listed twice");
  }
  entries_.emplace_back(std::move(digest), role);
}

std::optional<TokenTable::Match> TokenTable::match(const std::string& token) const {
  // Digests have one length, so CRYPTO_memcmp takes the same time for every token; every entry
  // is compared, so the time does not tell which one matched either.
  const std::string digest = sha256(token);
  const std::pair<std::string, TokenRole>* found = nullptr;
  for (const auto& entry : entries_) {
    if (CRYPTO_memcmp(entry.first.data(), digest.data(), digest.size()) == 0) found = &entry;
  }
  if (found == nullptr) return std::nullopt;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (std::size_t i = 0; i < 6; ++i) {
    const auto byte = static_cast<unsigned char>(digest[i]);
    id += kHex[byte >> 4];
    id += kHex[byte & 15];
  }
  return Match{found->second, std::move(id)};
}

std::optional<TokenRole> TokenTable::find(const std::string& token) const {
  if (auto m = match(token)) return m->role;
  return std::nullopt;
}

std::pair<std::string, int> split_listen_address(const std::string& listen) {
  std::string host;
  std::string port_text;
  if (!listen.empty() && listen.front() == '[') {
    const auto close = listen.find(']');
    if (close == std::string::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
      throw ApiServerError(fmt::format("listen address '{}': expected [v6-address]:port", listen));
    }
    host = listen.substr(1, close - 1);
    port_text = listen.substr(close + 2);
  } else {
    const auto colon = listen.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      throw ApiServerError(fmt::format("listen address '{}': expected host:port", listen));
    }
    host = listen.substr(0, colon);
    port_text = listen.substr(colon + 1);
  }
  int port = -1;
  if (!port_text.empty() && port_text.size() <= 5 &&
      port_text.find_first_not_of("0123456789") == std::string::npos) {
    port = std::stoi(port_text);
  }
  if (port < 0 || port > 65535) {
    throw ApiServerError(
        fmt::format("listen address '{}': the port must be a number 0..65535", listen));
  }
  return {host, port};
}

}  // namespace falcon
