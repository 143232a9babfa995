#include "serve/http_message.h"

#include <fmt/format.h>

#include <array>
#include <cctype>

namespace falcon::serve {

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in` ("+" as a space when `plus_is_space`); false for a malformed escape.
bool percent_decode(std::string_view in, bool plus_is_space, std::string& out) {
  out.clear();
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return true;
}

bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

}  // namespace

void Fields::add(std::string name, std::string value) {
  items_.emplace_back(std::move(name), std::move(value));
}

void Fields::set(std::string name, std::string value) {
  std::erase_if(items_, [&](const auto& item) { return iequals(item.first, name); });
  add(std::move(name), std::move(value));
}

std::optional<std::string_view> Fields::get(std::string_view name) const {
  for (const auto& [k, v] : items_) {
    if (iequals(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    if (const std::size_t semi = item.find(';'); semi != std::string_view::npos) {
      item = item.substr(0, semi);
    }
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (iequals(item, token)) return true;
  }
  return false;
}

std::optional<std::string> Request::query_value(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return v;
  }
  return std::nullopt;
}

void Response::set_content(std::string text, std::string_view content_type) {
  body = std::move(text);
  headers.set("Content-Type", std::string(content_type));
}

bool is_known_method(std::string_view method) {
  static constexpr std::array<std::string_view, 7> kMethods = {"GET",    "HEAD",  "POST",   "PUT",
                                                               "DELETE", "PATCH", "OPTIONS"};
  for (const std::string_view m : kMethods) {
    if (method == m) return true;
  }
  return false;
}

std::optional<Refusal> decode_target(std::string_view target, Request& out) {
  if (target.empty() || target.front() != '/') {
    return Refusal{400, "the request target must be a path starting with /"};
  }
  const std::size_t q = target.find('?');
  const std::string_view raw_path = target.substr(0, q);
  out.segments.clear();
  out.path.clear();
  std::string decoded;
  std::size_t pos = 1;
  while (true) {
    const std::size_t slash = raw_path.find('/', pos);
    const std::string_view raw = raw_path.substr(
        pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
    if (!percent_decode(raw, false, decoded)) {
      return Refusal{400, "the request path has a malformed percent escape"};
    }
    for (const char c : decoded) {
      if (is_control(c)) return Refusal{400, "the request path holds a control character"};
      if (c == '/') return Refusal{400, "a segment of the request path holds an encoded '/'"};
    }
    out.path += '/';
    out.path += decoded;
    out.segments.push_back(decoded);
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  // "/" is one empty segment; "/v1/x" is {"v1", "x"}; a trailing "/" leaves an empty last one.
  if (out.segments.size() == 1 && out.segments.front().empty()) out.segments.clear();
  out.query.clear();
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  std::string key;
  std::string value;
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    if (!percent_decode(pair.substr(0, eq), true, key) ||
        !percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1),
                        true, value)) {
      return Refusal{400, "the request query has a malformed percent escape"};
    }
    out.query.emplace_back(key, value);
  }
  return std::nullopt;
}

}  // namespace falcon::serve
