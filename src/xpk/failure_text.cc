#include "xpk/failure_text.h"

#include <string.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <deque>
#include <vector>

#include <fmt/format.h>

#include "xpk/list_parser.h"

namespace falcon::xpk {
namespace {

constexpr std::size_t kMaxLines = 20;
constexpr std::size_t kMaxChars = 2000;
constexpr std::string_view kXpkPrefix = "[XPK] ";

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_star_rule(std::string_view line) {
  line = trim(line);
  if (line.substr(0, kXpkPrefix.size()) == kXpkPrefix) line = trim(line.substr(kXpkPrefix.size()));
  return line.size() >= 10 &&
         std::all_of(line.begin(), line.end(), [](char c) { return c == '*'; });
}

bool is_bytes_repr(std::string_view s) {
  return s.size() >= 3 && s[0] == 'b' && (s[1] == '\'' || s[1] == '"') && s.back() == s[1];
}

bool reports_error(std::string_view line) {
  const std::string l = lower(line);
  if (l.find("is implemented by") != std::string::npos) return false;  // a command echo
  static constexpr std::array<std::string_view, 12> kWords = {
      "error",     "failed", "failure",   "not found", "notfound", "does not exist",
      "exception", "denied", "forbidden", "invalid",   "unable",   "already exists"};
  for (std::string_view w : kWords) {
    if (l.find(w) != std::string::npos) return true;
  }
  // `Task `X` terminated with code `1``: a streamed child failed.
  const auto pos = l.find("terminated with code `");
  return pos != std::string::npos && l.find("terminated with code `0`") == std::string::npos;
}

// Keeps the last `max_lines` lines and at most `max_chars` characters (whole lines, newest
// kept), then joins them with '\n'.
std::string tail(const std::vector<std::string>& lines, std::size_t max_lines,
                 std::size_t max_chars) {
  std::deque<std::string> kept;
  std::size_t chars = 0;
  for (auto it = lines.rbegin(); it != lines.rend() && kept.size() < max_lines; ++it) {
    if (chars + it->size() > max_chars && !kept.empty()) break;
    std::string line = *it;
    if (line.size() > max_chars) line = line.substr(0, max_chars) + "...";
    chars += line.size() + 1;
    kept.push_front(std::move(line));
  }
  std::string out;
  for (const auto& line : kept) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

}  // namespace

std::string FailureText::full() const {
  return details.empty() ? summary : summary + ": " + details;
}

std::string decode_bytes_repr(std::string_view text) {
  if (!is_bytes_repr(text)) return std::string(text);
  std::string_view body = text.substr(2, text.size() - 3);
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'x':
        if (i + 2 < body.size() && std::isxdigit(static_cast<unsigned char>(body[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(body[i + 2]))) {
          out += static_cast<char>(std::stoi(std::string(body.substr(i + 1, 2)), nullptr, 16));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

std::string xpk_error_lines(std::string_view stdout_text) {
  std::vector<std::string> picked;
  bool in_frame = false;
  auto add = [&](std::string line) {
    if (line.empty() || (!picked.empty() && picked.back() == line)) return;
    picked.push_back(std::move(line));
  };
  for (std::string_view raw : split_output_lines(stdout_text)) {
    if (is_star_rule(raw)) {
      in_frame = !in_frame;
      continue;
    }
    std::string_view line = trim(raw);
    const bool prefixed = line.substr(0, kXpkPrefix.size()) == kXpkPrefix;
    const std::string_view body = prefixed ? trim(line.substr(kXpkPrefix.size())) : line;
    if (is_bytes_repr(body)) {
      // A captured child's output: keep its decoded lines.
      const std::string decoded = decode_bytes_repr(body);
      for (std::string_view l : split_output_lines(decoded)) {
        add(std::string(trim(l)));
      }
      continue;
    }
    if (in_frame || (prefixed && reports_error(body))) add(std::string(line));
  }
  return tail(picked, kMaxLines, kMaxChars);
}

FailureText describe_failure(const CommandResult& result) {
  FailureText text;
  if (result.timed_out) {
    text.summary = fmt::format("timed out after {:.1f}s", result.elapsed.count() / 1000.0);
  } else if (result.term_signal != 0) {
    const char* abbrev = ::sigabbrev_np(result.term_signal);
    text.summary = abbrev != nullptr
                       ? fmt::format("killed by signal {} (SIG{})", result.term_signal, abbrev)
                       : fmt::format("killed by signal {}", result.term_signal);
  } else {
    text.summary = fmt::format("exit code {}", result.exit_code);
  }

  std::vector<std::string> stderr_lines;
  for (std::string_view l : split_output_lines(result.stderr_text)) {
    if (!trim(l).empty()) stderr_lines.emplace_back(trim(l));
  }
  std::vector<std::string> parts;
  if (auto s = tail(stderr_lines, kMaxLines, kMaxChars); !s.empty()) parts.push_back(std::move(s));
  if (auto x = xpk_error_lines(result.stdout_text); !x.empty()) parts.push_back(std::move(x));
  if (result.stdout_truncated || result.stderr_truncated) {
    parts.push_back(fmt::format("({} truncated)", result.stdout_truncated && result.stderr_truncated
                                                      ? "stdout and stderr"
                                                  : result.stdout_truncated ? "stdout"
                                                                            : "stderr"));
  }
  for (const auto& p : parts) {
    if (!text.details.empty()) text.details += '\n';
    text.details += p;
  }
  return text;
}

}  // namespace falcon::xpk
