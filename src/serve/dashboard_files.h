// The dashboard's files as the API server serves them: bytes, content type and ETag.
#pragma once

#include <string>
#include <string_view>

namespace falcon::serve {

struct DashboardFile {
  std::string_view bytes;
  std::string content_type;  // from the extension: text/html, text/css, text/javascript, ...
  std::string etag;          // "\"<first 16 hex digits of the bytes' SHA-256>\""
};

// The file at `path` (relative to src/serve/dashboard: "index.html", "js/app.js"), or null.
// Paths with "..", a leading "/" or an unknown extension are never found.
const DashboardFile* find_dashboard_file(std::string_view path);

}  // namespace falcon::serve
