// An event-driven HTTP/1.1 server for `falcon serve` (plain HTTP; TLS stays on cpp-httplib).
//
// A few loop threads own every connection (epoll, non-blocking sockets): they read, parse and
// write. A request is answered in one of three ways, chosen by the application per request:
// - on the loop at once (GET /healthz: nothing that can block);
// - in a batch: the requests the loops parsed while the batch before was being finished are
//   finished by one call on the batcher thread (POST /v1/select repeating a standing decision:
//   one commit records them all; the loops go on reading while it waits for the disk);
// - on a worker thread (everything else: handlers that read the store, run xpk, stream logs).
// A connection holds no thread while it waits for its next request, so thousands of keep-alive
// clients cost buffers, not threads, and a burst of requests shares one commit instead of
// queueing a thread each behind the others.
//
// Requests and answers are cpp-httplib's structs, so the same handlers serve both servers.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace falcon::serve {

// One request and its answer, from parse to write.
struct Exchange {
  httplib::Request req;
  httplib::Response res;
  std::shared_ptr<void> state;  // the application's, from on_loop to on_loop_batch
  bool to_worker = false;       // set by on_loop_batch: finish it on a worker after all

  // The server's.
  std::uint64_t conn = 0;
  std::size_t loop = 0;
  int fd = -1;             // its socket, while a worker has it
  bool head = false;       // HEAD: the answer without its body
  bool keep_alive = true;  // the client keeps the connection after this answer
  bool gzip_ok = false;    // the client accepts gzip
  std::string wire;        // the serialized answer (not for streamed bodies)
  bool streamed = false;   // the worker wrote a streamed body itself: close the connection
};

enum class LoopAnswer {
  kAnswered,  // res is the answer
  kBatched,   // finished by on_loop_batch on the batcher thread, with others
  kWorker,    // to a worker thread
};

struct EventServerOptions {
  int loops = 2;                                  // threads owning connections
  int workers = 16;                               // threads running handlers (and streaming bodies)
  std::size_t max_body_bytes = 1 << 20;           // larger: 413
  std::size_t max_header_bytes = 64 << 10;        // request line and headers; larger: 431
  std::size_t max_connections = 10000;            // more are closed at once
  std::chrono::milliseconds idle_timeout{10000};  // a keep-alive connection with no request
  std::chrono::milliseconds request_timeout{30000};  // a request must arrive whole within this
  std::chrono::milliseconds write_timeout{30000};    // an answer must make progress within this

  // On a loop thread, for every parsed request: must not block.
  std::function<LoopAnswer(Exchange&)> on_loop;
  // On the batcher thread, for the requests on_loop batched since its last call (from every
  // loop): may block (one commit for all of them). Sets each one's res, or its to_worker.
  std::function<void(std::vector<Exchange*>&)> on_loop_batch;
  // On a worker thread: the full handler.
  std::function<void(Exchange&)> handle;
  // A request refused before it reached the application (malformed, too large): fill `res` with
  // the error body for `status`.
  std::function<void(Exchange&, int status, const std::string& message)> refuse;
};

// One request read from the front of a connection's buffer (parse_request).
struct RequestParse {
  enum Kind { kIncomplete, kRequest, kRefused };
  Kind kind = kIncomplete;
  std::size_t consumed = 0;      // kRequest: the bytes it took (empty lines before it included)
  int status = 0;                // kRefused: the answer's status (400, 411, 413, 431, 505)
  std::string message;           // kRefused: why
  bool expect_continue = false;  // kIncomplete: the headers are in and ask for 100 Continue
};

// Parses the request at the front of `in` (HTTP/1.1 or 1.0; the body by Content-Length) into
// ex.req (method, target, path decoded, params, headers, body) and ex.keep_alive, ex.gzip_ok,
// ex.head (HEAD is parsed as GET). Refuses what the server does not take: a malformed request
// line or header, a control character in the target or a header value, a chunked body, headers
// over `max_header_bytes`, a body over `max_body_bytes` (from its Content-Length, unread).
RequestParse parse_request(std::string_view in, std::size_t max_header_bytes,
                           std::size_t max_body_bytes, Exchange& ex);

struct Loop;

class EventServer {
 public:
  explicit EventServer(EventServerOptions options);
  ~EventServer();
  EventServer(const EventServer&) = delete;
  EventServer& operator=(const EventServer&) = delete;

  // Binds and listens on `host:port` (0: a free one); returns the port. Throws
  // std::runtime_error naming the address.
  int bind(const std::string& host, int port);
  // Runs the loops until stop(): returns once every connection is closed, every answer in flight
  // written (or its client gone) and the workers idle.
  void serve();
  // Stops accepting; idle connections close at once, busy ones after their answer.
  void stop();

  // Serializes `ex.res` into `ex.wire` (status line, headers, body gzip'd when the client
  // accepts it and the type compresses). Exposed for tests.
  static void serialize(Exchange& ex);

 private:
  struct Impl;
  friend struct Loop;
  std::unique_ptr<Impl> impl_;
};

}  // namespace falcon::serve
