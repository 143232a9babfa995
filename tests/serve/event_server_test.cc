// The event-driven HTTP/1.1 server of `falcon serve` on a loopback port, driven over raw
// sockets: keep-alive, pipelining, requests in pieces, the three ways an answer is made (loop,
// loop batch, worker), limits and malformed input, Expect: 100-continue, HEAD, gzip, streamed
// bodies, timeouts, many connections on few threads, and stop.
#include "serve/event_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace falcon::serve {
namespace {

// A blocking client socket with a receive timeout (a hung server fails the test, never hangs it).
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "connect: " << std::strerror(errno);
    }
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void send(const std::string& data) const {
    std::size_t off = 0;
    while (off < data.size()) {
      const ssize_t w = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (w <= 0) {
        ADD_FAILURE() << "send: " << std::strerror(errno);
        return;
      }
      off += static_cast<std::size_t>(w);
    }
  }

  struct Answer {
    int status = 0;
    std::string head;  // status line and headers
    std::string body;
    std::string header(const std::string& name) const {
      const std::string key = "\r\n" + name + ": ";
      const std::size_t at = head.find(key);
      if (at == std::string::npos) return {};
      const std::size_t start = at + key.size();
      return head.substr(start, head.find("\r\n", start) - start);
    }
  };

  // One answer: Content-Length, chunked, or until the connection closes.
  Answer read_answer(bool head_request = false) {
    Answer a;
    std::size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return a;
    }
    a.head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    a.status = std::stoi(a.head.substr(9, 3));
    if (head_request || a.status == 100 || a.status == 304) return a;
    if (const std::string cl = a.header("Content-Length"); !cl.empty()) {
      const std::size_t n = std::stoul(cl);
      while (buffer_.size() < n) {
        if (!fill()) break;
      }
      a.body = buffer_.substr(0, n);
      buffer_.erase(0, std::min(n, buffer_.size()));
    } else if (a.header("Transfer-Encoding") == "chunked") {
      for (;;) {
        std::size_t eol;
        while ((eol = buffer_.find("\r\n")) == std::string::npos) {
          if (!fill()) return a;
        }
        const std::size_t n = std::stoul(buffer_.substr(0, eol), nullptr, 16);
        while (buffer_.size() < eol + 2 + n + 2) {
          if (!fill()) return a;
        }
        a.body += buffer_.substr(eol + 2, n);
        buffer_.erase(0, eol + 2 + n + 2);
        if (n == 0) break;
      }
    } else {
      while (fill()) {
      }
      a.body = std::move(buffer_);
      buffer_.clear();
    }
    return a;
  }

  // True once the server closed the connection (EOF), false on a timeout or other data.
  bool closed_by_server() {
    char c;
    const ssize_t r = ::recv(fd_, &c, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }

 private:
  bool fill() {
    char chunk[16384];
    const ssize_t r = ::recv(fd_, chunk, sizeof chunk, 0);
    if (r <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(r));
    return true;
  }
  int fd_ = -1;
  std::string buffer_;
};

bool can_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra + "\r\n" + body;
}

std::string gunzip(const std::string& in) {
  z_stream z{};
  inflateInit2(&z, 15 + 16);
  std::string out;
  char buf[4096];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  } while (rc == Z_OK);
  inflateEnd(&z);
  EXPECT_EQ(rc, Z_STREAM_END);
  return out;
}

// An application: "/loop" answered on the loop, "/batch" batched (body "block": its batch waits
// until released), "/stream?n=K" streams K chunks
// from a worker, "/block" waits on a worker until released, everything else echoes on a worker.
class EventServerTest : public ::testing::Test {
 protected:
  void start(EventServerOptions o = {}) {
    o.on_loop = [this](Exchange& ex) {
      ++on_loop_calls;
      if (ex.req.path == "/loop") {
        ex.res.status = 200;
        ex.res.set_content("loop:" + ex.req.method, "text/plain");
        return LoopAnswer::kAnswered;
      }
      if (ex.req.path == "/batch") return LoopAnswer::kBatched;
      return LoopAnswer::kWorker;
    };
    o.on_loop_batch = [this](std::vector<Exchange*>& batch) {
      ++batches;
      batched += static_cast<int>(batch.size());
      for (Exchange* ex : batch) {
        if (ex->req.body == "block") {  // a commit waiting for the disk
          std::unique_lock lock(mutex);
          ++blocked;
          changed.notify_all();
          changed.wait(lock, [&] { return released; });
        }
      }
      for (Exchange* ex : batch) {
        if (ex->req.body == "to-worker") {
          ex->to_worker = true;
          continue;
        }
        ex->res.status = 200;
        ex->res.set_content("batch:" + ex->req.body, "text/plain");
      }
    };
    o.handle = [this](Exchange& ex) {
      if (ex.req.path == "/block") {
        std::unique_lock lock(mutex);
        ++blocked;
        changed.notify_all();
        changed.wait(lock, [&] { return released; });
      }
      if (ex.req.path == "/stream") {
        const int n = std::stoi(ex.req.get_param_value("n"));
        auto sent = std::make_shared<int>(0);
        ex.res.status = 200;
        ex.res.set_chunked_content_provider(
            "text/plain", [n, sent](std::size_t, httplib::DataSink& sink) {
              if (*sent == n) {
                sink.done();
                return true;
              }
              const std::string line = "line " + std::to_string((*sent)++) + "\n";
              return sink.write(line.data(), line.size());
            });
        return;
      }
      if (ex.req.path == "/big") {
        ex.res.status = 200;
        ex.res.set_content(std::string(5000, 'x') + "{\"a\":1}", "application/json");
        return;
      }
      ex.res.status = 200;
      std::string params;
      for (const auto& [k, v] : ex.req.params) params += k + "=" + v + ";";
      ex.res.set_content(
          "worker:" + ex.req.method + " " + ex.req.path + " [" + params + "] " + ex.req.body,
          "text/plain");
    };
    o.refuse = [](Exchange& ex, int status, const std::string& message) {
      ex.res.status = status;
      ex.res.set_content("refused: " + message, "text/plain");
    };
    server = std::make_unique<EventServer>(std::move(o));
    port = server->bind("127.0.0.1", 0);
    serving = std::thread([this] { server->serve(); });
  }
  void TearDown() override {
    {
      std::lock_guard lock(mutex);
      released = true;
    }
    changed.notify_all();
    if (server) server->stop();
    if (serving.joinable()) serving.join();
  }

  std::unique_ptr<EventServer> server;
  std::thread serving;
  int port = 0;
  std::atomic<int> on_loop_calls{0};
  std::atomic<int> batches{0};
  std::atomic<int> batched{0};
  std::mutex mutex;
  std::condition_variable changed;
  int blocked = 0;
  bool released = false;
};

TEST(ParseRequest, TakesOneRequestFromTheFrontAndSaysHowMuch) {
  Exchange ex;
  const std::string two = "\r\n" + post("/v1/select?x=1", "{}") + get("/next");
  RequestParse p = parse_request(two, 1024, 1024, ex);
  ASSERT_EQ(p.kind, RequestParse::kRequest);
  EXPECT_EQ(p.consumed, two.size() - get("/next").size());
  EXPECT_EQ(ex.req.method, "POST");
  EXPECT_EQ(ex.req.path, "/v1/select");
  EXPECT_EQ(ex.req.get_param_value("x"), "1");
  EXPECT_EQ(ex.req.body, "{}");
  EXPECT_EQ(ex.req.get_header_value("host"), "x");  // header names are case-insensitive
  EXPECT_TRUE(ex.keep_alive);
  // Every strict prefix is incomplete.
  for (std::size_t cut = 0; cut < p.consumed; ++cut) {
    Exchange part;
    EXPECT_EQ(parse_request(std::string_view(two).substr(0, cut), 1024, 1024, part).kind,
              RequestParse::kIncomplete)
        << cut;
  }
}

TEST(ParseRequest, RefusesControlCharactersInTheTargetAndHeaderValues) {
  Exchange ex;
  EXPECT_EQ(parse_request("GET /a\x01b HTTP/1.1\r\n\r\n", 1024, 1024, ex).status, 400);
  const RequestParse p = parse_request("GET /a HTTP/1.1\r\nX: a\x7f\r\n\r\n", 1024, 1024, ex);
  EXPECT_EQ(p.kind, RequestParse::kRefused);
  EXPECT_EQ(p.status, 400);
  EXPECT_EQ(p.message, "a header value holds a control character");
  // A tab inside a value is allowed.
  EXPECT_EQ(parse_request("GET /a HTTP/1.1\r\nX: a\tb\r\n\r\n", 1024, 1024, ex).kind,
            RequestParse::kRequest);
  EXPECT_EQ(ex.req.get_header_value("X"), "a\tb");
}

TEST_F(EventServerTest, AnswersEachWayOnOneKeptAliveConnection) {
  start();
  Client c(port);
  c.send(get("/loop"));
  auto a = c.read_answer();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "loop:GET");
  EXPECT_EQ(a.header("Connection"), "keep-alive");
  c.send(post("/batch", "b1"));
  a = c.read_answer();
  EXPECT_EQ(a.body, "batch:b1");
  c.send(get("/w?x=1&y=a%20b"));
  a = c.read_answer();
  EXPECT_EQ(a.body, "worker:GET /w [x=1;y=a b;] ");
  c.send(post("/batch", "to-worker"));
  a = c.read_answer();
  EXPECT_EQ(a.body, "worker:POST /batch [] to-worker");
  EXPECT_EQ(batched.load(), 2);
}

TEST_F(EventServerTest, PipelinedRequestsAreAnsweredInOrder) {
  start();
  Client c(port);
  c.send(get("/w1") + post("/batch", "two") + get("/loop") + get("/w4"));
  EXPECT_EQ(c.read_answer().body, "worker:GET /w1 [] ");
  EXPECT_EQ(c.read_answer().body, "batch:two");
  EXPECT_EQ(c.read_answer().body, "loop:GET");
  EXPECT_EQ(c.read_answer().body, "worker:GET /w4 [] ");
}

TEST_F(EventServerTest, ARequestArrivingByteByByteIsParsedWhole) {
  start();
  Client c(port);
  const std::string request = post("/echo", "hello body");
  for (const char ch : request) c.send(std::string(1, ch));
  EXPECT_EQ(c.read_answer().body, "worker:POST /echo [] hello body");
}

TEST_F(EventServerTest, MalformedRequestsAreRefusedAndTheConnectionClosed) {
  start();
  const std::vector<std::pair<std::string, int>> cases = {
      {"GARBAGE\r\n\r\n", 400},
      {"GET /a HTTP/1.1 extra\r\n\r\n", 400},
      {"GET noslash HTTP/1.1\r\n\r\n", 400},
      {"GET /a HTTP/2.0\r\n\r\n", 505},
      {"G(T /a HTTP/1.1\r\n\r\n", 400},
      {"GET /a HTTP/1.1\r\nNo colon here\r\n\r\n", 400},
      {"GET /a HTTP/1.1\r\n folded: x\r\n\r\n", 400},
      {"POST /a HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 400},
      {"POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
      {"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n", 411},
  };
  for (const auto& [request, status] : cases) {
    Client c(port);
    c.send(request);
    const auto a = c.read_answer();
    EXPECT_EQ(a.status, status) << request;
    EXPECT_EQ(a.header("Connection"), "close") << request;
    EXPECT_TRUE(a.body.rfind("refused: ", 0) == 0) << a.body;
    EXPECT_TRUE(c.closed_by_server()) << request;
  }
}

TEST_F(EventServerTest, LimitsOnBodyAndHeadersAreEnforcedBeforeReadingThem) {
  EventServerOptions o;
  o.max_body_bytes = 100;
  o.max_header_bytes = 1024;
  start(o);
  {
    Client c(port);
    // Announced too large: refused without waiting for the body.
    c.send("POST /a HTTP/1.1\r\nContent-Length: 101\r\n\r\n");
    const auto a = c.read_answer();
    EXPECT_EQ(a.status, 413);
    EXPECT_NE(a.body.find("larger than 100 bytes"), std::string::npos) << a.body;
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    Client c(port);
    c.send("GET /a HTTP/1.1\r\nX-Big: " + std::string(2000, 'h'));  // no end of headers yet
    const auto a = c.read_answer();
    EXPECT_EQ(a.status, 431);
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    Client c(port);  // exactly at the limit is served
    c.send(post("/a", std::string(100, 'b')));
    EXPECT_EQ(c.read_answer().status, 200);
  }
}

TEST_F(EventServerTest, ExpectContinueIsAnsweredBeforeTheBody) {
  start();
  Client c(port);
  c.send("POST /echo HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  const auto interim = c.read_answer();
  EXPECT_EQ(interim.status, 100);
  c.send("12345");
  const auto a = c.read_answer();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "worker:POST /echo [] 12345");
}

TEST_F(EventServerTest, HeadHasTheLengthButNoBody) {
  start();
  Client c(port);
  c.send("HEAD /loop HTTP/1.1\r\n\r\n");
  const auto a = c.read_answer(true);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.header("Content-Length"), "8");  // "loop:GET"
  c.send(get("/loop"));                        // nothing of a body was sent before this answer
  EXPECT_EQ(c.read_answer().body, "loop:GET");
}

TEST_F(EventServerTest, LargeCompressibleAnswersAreGzippedWhenAccepted) {
  start();
  Client c(port);
  c.send(get("/big", "Accept-Encoding: gzip, deflate\r\n"));
  auto a = c.read_answer();
  EXPECT_EQ(a.header("Content-Encoding"), "gzip");
  EXPECT_LT(a.body.size(), 200U);
  EXPECT_EQ(gunzip(a.body), std::string(5000, 'x') + "{\"a\":1}");
  c.send(get("/big", "Accept-Encoding: gzip;q=0\r\n"));
  a = c.read_answer();
  EXPECT_EQ(a.header("Content-Encoding"), "");
  EXPECT_EQ(a.body.size(), 5007U);
  c.send(get("/loop", "Accept-Encoding: gzip\r\n"));  // small: as it is
  EXPECT_EQ(c.read_answer().body, "loop:GET");
}

TEST_F(EventServerTest, AStreamedBodyIsWrittenChunkedByTheWorkerThenTheConnectionCloses) {
  start();
  Client c(port);
  c.send(get("/stream?n=3"));
  const auto a = c.read_answer();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.header("Transfer-Encoding"), "chunked");
  EXPECT_EQ(a.header("Connection"), "close");
  EXPECT_EQ(a.body, "line 0\nline 1\nline 2\n");
  EXPECT_TRUE(c.closed_by_server());
}

TEST_F(EventServerTest, HttpOneZeroClosesUnlessAskedToKeepAlive) {
  start();
  {
    Client c(port);
    c.send("GET /loop HTTP/1.0\r\n\r\n");
    EXPECT_EQ(c.read_answer().header("Connection"), "close");
    EXPECT_TRUE(c.closed_by_server());
  }
  Client c(port);
  c.send("GET /loop HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(c.read_answer().header("Connection"), "keep-alive");
  c.send(get("/loop", "Connection: close\r\n"));
  EXPECT_EQ(c.read_answer().header("Connection"), "close");
  EXPECT_TRUE(c.closed_by_server());
}

TEST_F(EventServerTest, IdleAndSlowConnectionsAreClosed) {
  EventServerOptions o;
  o.idle_timeout = std::chrono::milliseconds(200);
  o.request_timeout = std::chrono::milliseconds(200);
  start(o);
  Client idle(port);
  Client slow(port);
  slow.send("GET /loop HTTP/1.1\r\n");  // never finished
  EXPECT_TRUE(idle.closed_by_server());
  const auto a = slow.read_answer();
  EXPECT_EQ(a.status, 408);
  EXPECT_TRUE(slow.closed_by_server());
}

TEST_F(EventServerTest, ManyConnectionsAreServedByOneLoopAndTwoWorkers) {
  EventServerOptions o;
  o.loops = 1;
  o.workers = 2;
  start(o);
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 300; ++i) clients.push_back(std::make_unique<Client>(port));
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 300; ++i) {
      clients[static_cast<std::size_t>(i)]->send(post("/batch", std::to_string(i)) +
                                                 get("/w" + std::to_string(i)));
    }
    for (int i = 0; i < 300; ++i) {
      auto& c = *clients[static_cast<std::size_t>(i)];
      EXPECT_EQ(c.read_answer().body, "batch:" + std::to_string(i));
      EXPECT_EQ(c.read_answer().body, "worker:GET /w" + std::to_string(i) + " [] ");
    }
  }
  EXPECT_EQ(batched.load(), 600);
  EXPECT_LE(batches.load(), 600);
}

TEST_F(EventServerTest, StopAnswersTheRequestsInFlightThenReturns) {
  EventServerOptions o;
  o.workers = 2;
  start(o);
  Client busy(port);
  Client idle(port);
  idle.send(get("/loop"));
  EXPECT_EQ(idle.read_answer().status, 200);
  busy.send(get("/block"));
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return blocked == 1; });
  }
  server->stop();
  EXPECT_TRUE(idle.closed_by_server());  // idle: closed at once
  {
    std::lock_guard lock(mutex);
    released = true;
  }
  changed.notify_all();
  const auto a = busy.read_answer();  // in flight: answered, then closed
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.header("Connection"), "close");
  EXPECT_TRUE(busy.closed_by_server());
  serving.join();                   // serve() returned
  EXPECT_FALSE(can_connect(port));  // nobody listens any more
}

// A batch is finished on the batcher thread: while it waits (a commit waiting for the disk) the
// loop goes on answering other connections; a stop meanwhile still writes its answer, then
// closes.
TEST_F(EventServerTest, ALoopGoesOnWhileABatchWaitsAndAStopStillAnswersIt) {
  EventServerOptions o;
  o.loops = 1;
  start(o);
  Client batched_client(port);
  Client other(port);
  batched_client.send(post("/batch", "block"));
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return blocked == 1; });
  }
  other.send(get("/loop"));
  EXPECT_EQ(other.read_answer().body, "loop:GET");  // the one loop is not held by the batch
  other.send(post("/batch", "second"));             // queued for the batch after
  while (on_loop_calls.load() < 3) std::this_thread::yield();  // parsed and handed over
  server->stop();
  {
    std::lock_guard lock(mutex);
    released = true;
  }
  changed.notify_all();
  const auto a = batched_client.read_answer();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "batch:block");
  EXPECT_EQ(a.header("Connection"), "close");
  const auto b = other.read_answer();
  EXPECT_EQ(b.body, "batch:second");
  EXPECT_EQ(b.header("Connection"), "close");
  serving.join();
  EXPECT_EQ(batches.load(), 2);
}

TEST_F(EventServerTest, BindingATakenPortNamesTheAddress) {
  start();
  EventServer other(EventServerOptions{});
  try {
    other.bind("127.0.0.1", port);
    FAIL() << "bound a taken port";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace falcon::serve
