// What falcon refuses to hand to `xpk workload create` (issue 11, "hostile or careless input").
//
// xpk pastes --docker-image, --command and --env values into the JobSet YAML it generates,
// without escaping (reference/xpk.md §2.3):
//   image: {docker_image}                 a plain scalar
//   - |                                   TPU: the command in a literal block scalar
//     ... {command} ...
//   value: "{value}"                      env values, and on GPU/CPU the command again
//                                         (env COMMAND: "{command}"), in double quotes
// A line break ends a block scalar or starts a new key; `"` ends a double-quoted scalar and `\`
// starts an escape; in a plain scalar `: `, ` #`, quotes and flow characters change its meaning.
// So a value that could do any of that is refused, whatever the device class, and the image
// must look like a container image reference.
//
// --xpk-arg values go after falcon's own flags, where argparse lets the last one win: a
// pass-through argument naming a flag that falcon sets itself would put the workload somewhere
// other than where falcon records it. Such arguments are refused in every spelling argparse
// accepts: `--flag`, `--flag=value`, `--flag value`, and any unique prefix (`--clu`, `--wor=x`;
// argparse's allow_abbrev). xpk 1.13 defines no single-dash alias for these flags, and argparse
// never matches a single-dash token (`-cluster`) against a `--` option, so those need no rule.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace falcon::workload {

// Longest image reference accepted (Docker allows 255 for the name plus tag and digest).
inline constexpr std::size_t kMaxImageLength = 1024;

// Why `image` cannot be passed as --docker-image, or nullopt. An image is 1..kMaxImageLength
// characters of [A-Za-z0-9._/:@-] starting with a letter or digit (registry/path:tag@digest).
std::optional<std::string> docker_image_problem(std::string_view image);

// Why the joined command line cannot be passed as --command, or nullopt: a control character
// other than tab, a YAML line break (U+0085, U+2028, U+2029), and, when `double_quoted` (xpk
// also pastes it inside double quotes: GPU and CPU workloads), `"` or `\`.
std::optional<std::string> command_problem(std::string_view command_line, bool double_quoted);

// Why `value` cannot be the value of --env KEY=..., or nullopt: `"`, `\`, a control character
// other than tab, or a YAML line break.
std::optional<std::string> env_value_problem(std::string_view key, std::string_view value);

// Why the pass-through arguments cannot be appended to `xpk workload create`, or nullopt: the
// first one that names (in any spelling above) a flag falcon sets itself or relies on:
// --cluster --project --zone --region --workload --docker-image --base-docker-image
// --script-dir --command --tpu-type --device-type --priority --namespace --env --env-file
// --quiet --dry-run.
std::optional<std::string> xpk_args_problem(const std::vector<std::string>& args);

}  // namespace falcon::workload
