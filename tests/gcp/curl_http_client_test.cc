// CurlHttpClient against a loopback HTTP server (cpp-httplib) on a port the OS picks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "falcon/http_client.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

// Runs `server` on 127.0.0.1:<free port> until destroyed.
class LoopbackServer {
 public:
  explicit LoopbackServer(std::unique_ptr<httplib::Server> server = nullptr)
      : server_(server ? std::move(server) : std::make_unique<httplib::Server>()) {}
  ~LoopbackServer() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Server& http() { return *server_; }
  // Binds (the socket accepts connections from here on) and serves on a thread.
  void start() {
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_->listen_after_bind(); });
  }
  std::string url(const std::string& path, const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

struct Seen {
  std::mutex mutex;
  httplib::Request request;
  std::set<int> client_ports;
  void record(const httplib::Request& r) {
    std::lock_guard lock(mutex);
    request = r;
    client_ports.insert(r.remote_port);
  }
};

struct CurlFixture : ::testing::Test {
  LoopbackServer server;
  Seen seen;
  std::shared_ptr<HttpClient> client = make_curl_http_client();

  CurlFixture() {
    auto echo = [this](const httplib::Request& req, httplib::Response& res) {
      seen.record(req);
      res.status = 200;
      res.set_header("X-Echo-Method", req.method);
      res.set_content(req.body, "application/octet-stream");
    };
    server.http().Get("/echo", echo);
    server.http().Post("/echo", echo);
    server.http().Put("/echo", echo);
    server.http().Delete("/echo", echo);
    server.http().Get("/redirect", [](const httplib::Request&, httplib::Response& res) {
      res.status = 308;
      res.set_header("Location", "/echo");
      res.set_header("Range", "bytes=0-9");
    });
    server.http().Get("/json", [this](const httplib::Request& req, httplib::Response& res) {
      seen.record(req);
      res.set_content(std::string(20'000, 'x'), "application/json");
    });
    server.start();
  }

  HttpRequest request(const std::string& method, const std::string& path, std::string body = "") {
    HttpRequest r;
    r.method = method;
    r.url = server.url(path);
    r.body = std::move(body);
    r.timeout = milliseconds(10'000);
    return r;
  }
};

TEST(HttpHeaders, LookupIsCaseInsensitiveAndSetReplaces) {
  HttpHeaders headers;
  headers.add("Content-Type", "a");
  headers.add("X-Multi", "1");
  headers.add("x-multi", "2");
  EXPECT_EQ(headers.get("content-type"), "a");
  EXPECT_EQ(headers.get("X-MULTI"), "1");
  headers.set("X-MULTI", "3");
  EXPECT_EQ(headers.items.size(), 2u);
  EXPECT_EQ(headers.get("x-multi"), "3");
  EXPECT_FALSE(headers.get("missing"));
}

TEST_F(CurlFixture, SendsMethodHeadersAndBodyAndReadsTheResponse) {
  HttpRequest r = request("POST", "/echo?a=1", "payload");
  r.headers.set("Content-Type", "application/json");
  r.headers.set("X-Custom", "value");
  const HttpResponse response = client->send(r);
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "payload");
  EXPECT_EQ(response.headers.get("x-echo-method"), "POST");
  EXPECT_EQ(seen.request.get_header_value("X-Custom"), "value");
  EXPECT_EQ(seen.request.get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(seen.request.get_param_value("a"), "1");
}

TEST_F(CurlFixture, KnownLengthBodiesAreNeverChunkedAndNeverWaitFor100Continue) {
  const std::string big(3 << 20, 'b');  // curl would add Expect: 100-continue above 1 MiB
  HttpRequest r = request("PUT", "/echo", big);
  r.headers.set("Content-Range", "bytes 0-3145727/*");
  const HttpResponse response = client->send(r);
  EXPECT_EQ(response.body.size(), big.size());
  EXPECT_EQ(seen.request.get_header_value("Content-Length"), std::to_string(big.size()));
  EXPECT_FALSE(seen.request.has_header("Transfer-Encoding"));
  EXPECT_FALSE(seen.request.has_header("Expect"));
  EXPECT_EQ(seen.request.get_header_value("Content-Range"), "bytes 0-3145727/*");
}

TEST_F(CurlFixture, AnEmptyPutSendsContentLengthZeroAndNoFormContentType) {
  client->send(request("PUT", "/echo"));
  EXPECT_EQ(seen.request.method, "PUT");
  EXPECT_EQ(seen.request.get_header_value("Content-Length"), "0");
  EXPECT_FALSE(seen.request.has_header("Content-Type"));
  client->send(request("POST", "/echo", "x=1"));
  EXPECT_FALSE(seen.request.has_header("Content-Type"));
}

TEST_F(CurlFixture, SendsDelete) {
  const HttpResponse response = client->send(request("DELETE", "/echo"));
  EXPECT_EQ(response.headers.get("X-Echo-Method"), "DELETE");
  EXPECT_EQ(seen.request.method, "DELETE");
}

TEST_F(CurlFixture, DoesNotFollowRedirectsUnlessAsked) {
  HttpRequest r = request("GET", "/redirect");
  const HttpResponse response = client->send(r);
  EXPECT_EQ(response.status, 308);  // a resumable upload's "Resume Incomplete"
  EXPECT_EQ(response.headers.get("range"), "bytes=0-9");
  r.follow_redirects = true;
  const HttpResponse followed = client->send(r);
  EXPECT_EQ(followed.status, 200);
  EXPECT_EQ(followed.headers.get("X-Echo-Method"), "GET");
  EXPECT_FALSE(followed.headers.get("Range"));  // headers are the final response's only
}

TEST_F(CurlFixture, AcceptsGzipAndDecodesIt) {
  const HttpResponse response = client->send(request("GET", "/json"));
  EXPECT_EQ(response.body, std::string(20'000, 'x'));
  EXPECT_THAT(seen.request.get_header_value("Accept-Encoding"), HasSubstr("gzip"));
  // It really was compressed (gzip, or brotli when libcurl offers it too) and decoded.
  EXPECT_THAT(response.headers.get("Content-Encoding").value_or("none"),
              ::testing::AnyOf("gzip", "br"));
}

TEST_F(CurlFixture, ReusesItsConnection) {
  for (int i = 0; i < 5; ++i) client->send(request("GET", "/echo"));
  EXPECT_EQ(seen.client_ports.size(), 1u);
}

TEST_F(CurlFixture, ManyThreadsCanSendAtOnce) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const std::string body = std::to_string(t) + ":" + std::to_string(i);
        if (client->send(request("POST", "/echo", body)).body == body) ++ok;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 160);
}

// A server that answers without end (or just too much), whatever the status, cannot make the
// client hold more than the request's bound: the transfer ends there with an error naming it.
TEST_F(CurlFixture, AnAnswerLargerThanTheBoundEndsTheTransfer) {
  std::atomic<std::size_t> served{0};
  server.http().Get("/endless", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 404;  // an error's body is bounded too
    res.set_chunked_content_provider("application/json", [&](std::size_t, httplib::DataSink& sink) {
      const std::string chunk(64 << 10, 'x');
      if (!sink.write(chunk.data(), chunk.size())) return false;
      served += chunk.size();
      return served < (std::size_t{1} << 30);
    });
  });
  HttpRequest r = request("GET", "/endless?page=2");
  r.max_body_bytes = 1 << 20;
  try {
    client->send(r);
    ADD_FAILURE() << "expected HttpTransportError";
  } catch (const HttpTransportError& e) {
    EXPECT_FALSE(e.timed_out());
    EXPECT_TRUE(e.too_large());
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the answer is larger than 1048576 bytes"));
    EXPECT_THAT(e.what(), ::testing::Not(::testing::HasSubstr("page=2")));
  }
  EXPECT_LT(served.load(), std::size_t{1} << 30);
  // At the bound exactly: kept whole.
  HttpRequest exact = request("GET", "/json");
  exact.max_body_bytes = 20'000;
  EXPECT_EQ(client->send(exact).body.size(), 20'000u);
  exact.max_body_bytes = 19'999;
  EXPECT_THROW(client->send(exact), HttpTransportError);
}

TEST(CurlHttpClient, ATimeoutIsATransportErrorMarkedTimedOut) {
  LoopbackServer server;
  std::mutex mutex;
  std::condition_variable released_cv;
  bool released = false;
  server.http().Get("/slow", [&](const httplib::Request&, httplib::Response& res) {
    std::unique_lock lock(mutex);
    released_cv.wait_for(lock, std::chrono::seconds(10), [&] { return released; });
    res.set_content("late", "text/plain");
  });
  server.start();
  HttpRequest r;
  r.url = server.url("/slow");
  r.timeout = milliseconds(300);
  try {
    make_curl_http_client()->send(r);
    ADD_FAILURE() << "expected HttpTransportError";
  } catch (const HttpTransportError& e) {
    EXPECT_TRUE(e.timed_out());
  }
  {
    std::lock_guard lock(mutex);
    released = true;
  }
  released_cv.notify_all();
}

TEST(CurlHttpClient, ARefusedConnectionIsATransportErrorWithoutTheQuery) {
  // A port that was free a moment ago: bound, never listened on, closed.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  ::close(fd);
  HttpRequest r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + "/upload?upload_id=SESSION-SECRET";
  try {
    make_curl_http_client()->send(r);
    ADD_FAILURE() << "expected HttpTransportError";
  } catch (const HttpTransportError& e) {
    EXPECT_FALSE(e.timed_out());
    EXPECT_THAT(e.what(), HasSubstr("/upload"));
    EXPECT_THAT(e.what(), Not(HasSubstr("SESSION-SECRET")));
  }
}

// TLS: the peer is verified; a self-signed certificate is refused unless its CA file is given.
TEST(CurlHttpClient, VerifiesTlsPeersAndAcceptsAnExtraCaFile) {
  testing::TempDir dir;
  const std::string cert = (dir.path() / "cert.pem").string();
  const std::string key = (dir.path() / "key.pem").string();
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
      "subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (std::system(command.c_str()) != 0) GTEST_SKIP() << "the openssl command is not available";
  LoopbackServer server(std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str()));
  server.http().Get("/hello", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("secure", "text/plain");
  });
  server.start();
  HttpRequest r;
  r.url = server.url("/hello", "https");
  EXPECT_THROW(make_curl_http_client()->send(r), HttpTransportError);
  EXPECT_EQ(make_curl_http_client({.ca_file = cert})->send(r).body, "secure");
}

}  // namespace
}  // namespace falcon
