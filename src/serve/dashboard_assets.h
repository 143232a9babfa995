// The dashboard's files (src/serve/dashboard/), compiled into the binary by the build
// (cmake/embed_files.cmake): `falcon serve` needs no file on disk and no network to serve them.
#pragma once

#include <span>
#include <string_view>

namespace falcon::serve {

struct EmbeddedAsset {
  std::string_view path;  // relative to src/serve/dashboard: "index.html", "js/app.js"
  std::string_view bytes;
};

// Every asset, in the order the build listed them.
std::span<const EmbeddedAsset> embedded_assets();

}  // namespace falcon::serve
