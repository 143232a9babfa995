// The HTTP request and answer as `falcon serve`'s routes see them, independent of the library
// that reads them off the wire (src/serve/http_server.h: Boost.Beast). Plain values: a route
// takes a Request and fills a Response.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace falcon::serve {

// Header fields in arrival order; names compare case-insensitively.
class Fields {
 public:
  void add(std::string name, std::string value);
  // Replaces every field of that name.
  void set(std::string name, std::string value);
  // The first field of that name.
  std::optional<std::string_view> get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name).has_value(); }
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// ASCII case-insensitive equality (header names, tokens).
bool iequals(std::string_view a, std::string_view b);
// Whether the comma-separated header value `value` lists `token` (case-insensitively, ignoring
// parameters after ';'): has_token("gzip, br;q=0.5", "br").
bool has_token(std::string_view value, std::string_view token);

struct Request {
  // As sent, upper case; a HEAD request has method "GET" and head set (every GET route answers
  // HEAD, without the body).
  std::string method;
  bool head = false;
  std::string target;                 // as sent: the path and query, percent-encoded
  std::vector<std::string> segments;  // the path's segments, each percent-decoded
  std::string path;                   // the decoded segments joined by "/", for logs
  std::vector<std::pair<std::string, std::string>> query;  // decoded, in order
  Fields headers;
  std::string body;
  int version = 11;        // HTTP/1.1: 11, HTTP/1.0: 10
  bool keep_alive = true;  // the client keeps the connection after this answer
  std::string peer;        // the client's address, without its port
  bool tls = false;

  // Filled by the application's router: the route matched (-1: none) and the values of its
  // {name} segments, in order.
  int route = -1;
  std::vector<std::string> params;
  // Filled by the application: who is asking, for per-caller limits (a token's digest, or the
  // address when no token is needed).
  std::string principal;
  // The application's, released with the request once its answer is written (a caller's share
  // of the workers).
  std::shared_ptr<void> hold;

  std::optional<std::string_view> header(std::string_view name) const { return headers.get(name); }
  // The first query parameter called `name`.
  std::optional<std::string> query_value(std::string_view name) const;
  bool has_query(std::string_view name) const { return query_value(name).has_value(); }
};

// Where a streamed answer's body goes (log lines as they are read).
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // Sends `data` (not empty) as one chunk and waits until it is written. False once the client
  // has gone, the write timed out or the server is stopping: the producer should stop.
  virtual bool write(std::string_view data) = 0;
  // False once the client closed the connection or the server is stopping. Never blocks.
  virtual bool open() const = 0;
};

struct Response {
  int status = 200;
  Fields headers;
  std::string body;
  // Set for a body produced over time: the server sends the status and headers (chunked, the
  // connection closed after it), then runs this on a thread of its own; it returns when the body
  // is complete (the server then ends it) or when the sink closed. It must not throw.
  std::function<void(ChunkSink&)> stream;

  void set_content(std::string text, std::string_view content_type);
};

// Bounds on what a client may send and how long it may take; each has a key in `serve:`
// (docs/serve.md, "Security"). Defaults are the keys' defaults.
struct HttpLimits {
  std::size_t max_target_bytes = 8 << 10;   // the request target (path and query): 414
  std::size_t max_header_bytes = 16 << 10;  // request line and header fields together: 431
  std::size_t max_header_fields = 100;      // 431
  std::size_t max_body_bytes = 1 << 20;     // 413, refused from its Content-Length, unread
};

// A request refused before any route ran, with the status to answer: by the server (malformed,
// over a limit, too slow, overloaded) or by the application's checks of its head (auth, Host,
// Origin, an unknown route).
struct Refusal {
  int status = 400;
  std::string message;
  std::string type;  // the error type answered; empty: one for the status
  Fields headers;    // sent with the answer (Allow, Retry-After, WWW-Authenticate)
};

// The methods the server serves; anything else is answered 501.
bool is_known_method(std::string_view method);

// Splits a request target into its decoded path segments and query parameters ("+" in the
// query is a space). Refuses (400) a target that is not an absolute path, a malformed percent
// escape, and a control character or a "/" produced by decoding a segment (no name falcon knows
// holds one, and a decoded "/" would let one segment pass for two).
std::optional<Refusal> decode_target(std::string_view target, Request& out);

}  // namespace falcon::serve
