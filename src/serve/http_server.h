// `falcon serve`'s HTTP/1.1 server, plain and TLS through the same code, on Boost.Beast over
// Boost.Asio. Everything a client sends is bounded (docs/serve.md, "Security"):
//
// - sizes: the request target (414), request line and headers (431), header fields (431), the
//   body (413, refused from its Content-Length before it is read); methods outside
//   GET/HEAD/POST/PUT/DELETE/PATCH/OPTIONS are 501, chunked request bodies 411;
// - time: a TLS handshake and a request's headers must arrive within header_timeout, its body
//   within body_timeout, an idle keep-alive connection is closed after idle_timeout, an answer
//   must be written within write_timeout;
// - input: a connection is read only while it has no request in progress, into a buffer bounded
//   by the header limit: a client that pipelines requests and never reads the answers is held up
//   by the kernel's socket buffers, not by memory of the server's, and closed when its answer
//   cannot be written in time;
// - memory: request bodies announced at once (max_body_bytes_in_flight; beyond it 503) and read
//   buffers grown past their first 4 KiB by long heads (max_header_bytes_in_flight; beyond it a
//   head waits, unread, within header_timeout);
// - connections: at most max_connections (beyond it the oldest connection that is idle or still
//   sending its headers is closed to make room, else the new one), of them at most
//   max_handshakes in a TLS handshake (beyond it the oldest handshake is closed: one holds
//   about 100 KiB until it ends), at most max_connections_per_address from one client address
//   (beyond it new ones are closed);
// - work: requests that may block run on `workers` threads, at most max_queued waiting for one
//   (beyond it 503 with Retry-After); streamed answers run on threads of their own, at most
//   max_streams (beyond it 503).
//
// A request is first offered to the application on the I/O thread (on_request: it must not
// block; /healthz and the repeated select are answered there, so they stay prompt whatever the
// workers are doing), then, unless answered, handed to a worker (handle).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "serve/http_message.h"

namespace falcon::serve {

struct HttpServerOptions {
  HttpLimits limits;
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_address = 128;
  std::size_t max_handshakes = 256;                  // TLS connections still in their handshake
  std::chrono::milliseconds idle_timeout{10'000};    // keep-alive: until a request starts
  std::chrono::milliseconds header_timeout{10'000};  // TLS handshake; a request's headers
  std::chrono::milliseconds body_timeout{30'000};    // a request's body
  std::chrono::milliseconds write_timeout{60'000};   // an answer (a streamed chunk)
  int io_threads = 2;
  int workers = 16;
  std::size_t max_queued = 256;  // requests waiting for a worker
  std::size_t max_streams = 64;  // streamed answers at once
  // Request bodies held at once, counted from their Content-Length before they are read; a
  // request that would pass it is answered 503 with Retry-After, unread.
  std::size_t max_body_bytes_in_flight = 64 << 20;
  // Read buffers held at once beyond each connection's first 4 KiB (kReadChunk): what request
  // heads longer than that take. A head that would pass it waits, unread, until some is given
  // back (the oldest waiting first) or header_timeout ends; a buffer gives back what it took
  // once its request is read.
  std::size_t max_header_bytes_in_flight = 32 << 20;

  // On an I/O thread, once a request's head is in and within the limits, before its body is
  // read: nullopt lets it go on, a Refusal answers it (the body unread, the connection closed
  // after the answer). Must not block. Optional.
  std::function<std::optional<Refusal>(Request&)> on_head;
  // On an I/O thread, for every request within the limits: must not block. True when `res` is
  // the answer; false hands the request to a worker.
  std::function<bool(Request&, Response&)> on_request;
  // On a worker thread: the full handler. Must not throw (a throw is answered 500).
  std::function<void(Request&, Response&)> handle;
  // Fills `res` (body, type) for a request the server refused itself (malformed, over a limit,
  // too slow, overloaded); `req` holds what could be read of it (method and path may be empty).
  // Called on an I/O thread; must not block.
  std::function<void(const Request& req, Response& res, const Refusal& why)> refuse;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves HTTPS with the PEM certificate chain and key: TLS 1.2 or 1.3 only, and in TLS 1.2
  // only forward-secret AEAD suites (ECDHE with AES-GCM or ChaCha20-Poly1305); no
  // renegotiation, no compression. Call before bind(); call again (SIGHUP) to replace them:
  // connections made afterwards use the new ones. Throws std::runtime_error naming the file
  // when they cannot be used (the previous ones stay).
  void use_tls(const std::string& cert_file, const std::string& key_file);
  bool tls() const;
  // What use_tls() would throw for these files, without a server (checked before anything
  // else starts).
  static void check_tls(const std::string& cert_file, const std::string& key_file);
  // The address bind() would listen on for `host` (numeric). Throws std::runtime_error naming
  // the host when it does not resolve.
  static std::string resolve(const std::string& host);

  // Resolves `host` (an address or a name), binds the first address it resolves to and listens.
  // Returns the port (port 0: one the OS picked). Throws std::runtime_error naming the address.
  int bind(const std::string& host, int port);
  // The address bound (no port), e.g. "127.0.0.1" or "::1"; empty before bind().
  std::string bound_address() const;
  // Whether `address` (numeric) is a loopback address: 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104.
  static bool is_loopback_address(const std::string& address);

  // Runs the I/O threads until stop(); returns once every connection is closed, every worker
  // idle and every stream ended. Requires bind().
  void serve();
  // Stops accepting; connections waiting for a request close at once, busy ones after their
  // answer; streams see their sink close. Returns at once; serve() returns when all is done.
  void stop();
  bool stopping() const;

  struct Stats {
    std::uint64_t connections_open = 0;
    std::uint64_t connections_idle = 0;  // of those open, waiting for a request (evictable)
    std::uint64_t handshakes = 0;        // of those open, in a TLS handshake (of max_handshakes)
    std::uint64_t connections_accepted = 0;
    std::uint64_t connections_refused = 0;  // over a connection limit (closed at once)
    std::uint64_t connections_evicted = 0;  // idle or slow, closed to make room
    std::uint64_t timeouts = 0;             // connections closed for a timeout
    std::uint64_t overloaded = 0;           // requests refused: no worker or stream free
    std::uint64_t workers_busy = 0;         // requests on or waiting for a worker now
    std::uint64_t streams_open = 0;
    std::uint64_t body_bytes_in_flight = 0;
    std::uint64_t header_bytes_in_flight = 0;  // of max_header_bytes_in_flight
  };
  Stats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Parses `bytes` as the start of a connection's input the way a connection of the server does
// (the same parser, limits and checks) and returns the first request or why it is refused;
// nullopt when the bytes are not a whole request yet. For tests and the fuzz target.
struct ParsedRequest {
  bool refused = false;
  Refusal refusal;  // refused
  Request request;  // not refused
  std::size_t consumed = 0;
};
std::optional<ParsedRequest> parse_request_bytes(std::string_view bytes, const HttpLimits& limits);

}  // namespace falcon::serve
