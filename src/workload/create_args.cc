#include "workload/create_args.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "falcon/values.h"

namespace falcon::workload {
namespace {

struct Reserved {
  std::string_view flag;
  std::string_view why;
};

// The flags of `xpk workload create` that falcon sets itself or relies on.
constexpr std::array<Reserved, 17> kReserved = {{
    {"--cluster", "falcon passes the cluster it records"},
    {"--project", "falcon passes the cluster's project"},
    {"--zone", "falcon passes the cluster's zone"},
    {"--region", "falcon passes the cluster's location as --zone"},
    {"--workload", "falcon passes the workload name it records"},
    {"--docker-image", "falcon passes the image (--image)"},
    {"--base-docker-image", "it cannot be combined with the image falcon passes"},
    {"--script-dir", "it cannot be combined with the image falcon passes"},
    {"--command", "falcon passes the command (after --)"},
    {"--tpu-type", "falcon passes the accelerator type"},
    {"--device-type", "falcon passes the accelerator type"},
    {"--priority", "falcon passes the priority (--priority)"},
    {"--namespace", "falcon decides the namespace (--namespace, xpk.namespace_flag)"},
    {"--env", "falcon passes the environment (--env)"},
    {"--env-file", "falcon passes the environment (--env)"},
    {"--quiet", "it makes xpk silently replace a workload of the same name"},
    {"--dry-run", "nothing would be created, yet falcon would record a submission"},
}};

// A YAML line break other than \n and \r (which are control characters): NEL (C2 85),
// LINE SEPARATOR (E2 80 A8), PARAGRAPH SEPARATOR (E2 80 A9), at `i`. Returns its length or 0.
std::size_t yaml_line_break_at(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  if (byte(i) == 0xC2 && i + 1 < s.size() && byte(i + 1) == 0x85) return 2;
  if (byte(i) == 0xE2 && i + 2 < s.size() && byte(i + 1) == 0x80 &&
      (byte(i + 2) == 0xA8 || byte(i + 2) == 0xA9)) {
    return 3;
  }
  return 0;
}

bool is_control(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7F; }

// The first character of `s` that xpk cannot paste (see the header), described, or nullopt.
std::optional<std::string> unpastable(std::string_view s, bool double_quoted) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (is_control(c)) {
      return c == '\n'   ? std::string("a newline")
             : c == '\r' ? std::string("a carriage return")
                         : fmt::format("the control character \\x{:02X}", c);
    }
    if (yaml_line_break_at(s, i) != 0) return std::string("a Unicode line or paragraph separator");
    if (double_quoted && c == '"') return std::string("a double quote");
    if (double_quoted && c == '\\') return std::string("a backslash");
  }
  return std::nullopt;
}

bool image_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '/' || c == ':' || c == '@' || c == '-';
}

bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

}  // namespace

std::optional<std::string> docker_image_problem(std::string_view image) {
  if (image.empty()) return std::string("docker_image is empty");
  if (image.size() > kMaxImageLength) {
    return fmt::format("docker_image {} is too long: at most {} characters are accepted",
                       quote_value(image), kMaxImageLength);
  }
  const bool ok = alnum(image.front()) &&
                  std::all_of(image.begin(), image.end(), [](char c) { return image_char(c); });
  if (!ok) {
    return fmt::format(
        "docker_image {} is not an image reference: it must start with a letter or digit and "
        "contain only letters, digits and . _ / : @ - (xpk pastes it into the workload's YAML "
        "unescaped)",
        quote_value(image));
  }
  return std::nullopt;
}

std::optional<std::string> command_problem(std::string_view command_line, bool double_quoted) {
  if (auto what = unpastable(command_line, double_quoted)) {
    return fmt::format(
        "the command {} contains {}, which xpk would paste unescaped into the workload's "
        "YAML{}",
        quote_value(command_line), *what,
        double_quoted ? " (for GPU and CPU workloads also inside double quotes, so a single "
                        "quote in an argument, quoted as '\\'', is refused too)"
                      : "");
  }
  return std::nullopt;
}

std::optional<std::string> env_value_problem(std::string_view key, std::string_view value) {
  if (auto what = unpastable(value, /*double_quoted=*/true)) {
    return fmt::format(
        "the value of environment variable {} contains {}, which xpk would paste unescaped "
        "into the workload's YAML",
        quote_value(key), *what);
  }
  return std::nullopt;
}

std::optional<std::string> xpk_args_problem(const std::vector<std::string>& args) {
  for (const auto& arg : args) {
    if (arg.size() <= 2 || arg[0] != '-' || arg[1] != '-') continue;
    const std::string_view name = std::string_view(arg).substr(0, arg.find('='));
    if (name.size() <= 2) continue;
    for (const auto& r : kReserved) {
      if (r.flag.substr(0, name.size()) != name) continue;
      const std::string spelled =
          name == r.flag ? ""
                         : fmt::format(" ('{}' is a prefix argparse expands to {})", name, r.flag);
      return fmt::format(
          "--xpk-arg {} would set xpk's {}{}, which falcon does not pass through: {}",
          quote_value(arg), r.flag, spelled, r.why);
    }
  }
  return std::nullopt;
}

}  // namespace falcon::workload
