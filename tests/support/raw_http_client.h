// A blocking HTTP/1.1 client over one raw socket (plain or TLS), for tests that must send what a
// well-behaved client would not: bytes one at a time, pipelined requests, malformed heads,
// oversized fields, half a request. Every read has a timeout, so a hung server fails a test and
// never hangs it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace falcon::testing {

class RawHttpClient {
 public:
  struct Options {
    bool tls = false;  // TLS without certificate checks (the tests' self-signed certificates)
    std::string source_address;  // bind to this local address first (e.g. 127.0.0.2)
    std::chrono::milliseconds read_timeout{10'000};
    // TLS: only these TLS 1.2 cipher suites (OpenSSL names) and versions; empty: the defaults.
    std::string tls12_ciphers;
    bool tls12_only = false;
  };
  // Connects to 127.0.0.1:port; connected() says whether it worked (a TLS handshake included).
  RawHttpClient(int port, Options options);
  explicit RawHttpClient(int port) : RawHttpClient(port, Options{}) {}
  ~RawHttpClient();
  RawHttpClient(const RawHttpClient&) = delete;
  RawHttpClient& operator=(const RawHttpClient&) = delete;

  bool connected() const;
  // Sends everything; false when the connection broke.
  bool send(const std::string& data);

  struct Answer {
    int status = 0;    // 0: no answer (the connection closed or timed out)
    std::string head;  // status line and headers
    std::string body;
    std::string header(const std::string& name) const;
  };
  // One answer: by Content-Length, chunked, or until the connection closes. With head_request
  // the body is not read (a HEAD answer, a 100 Continue).
  Answer read_answer(bool head_request = false);
  // True once the server closed the connection (EOF or reset); false on a timeout or data.
  bool closed_by_server();

 private:
  bool fill();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "GET path HTTP/1.1" with Host 127.0.0.1:<port> ... helpers for building requests.
std::string http_get(const std::string& path, int port, const std::string& extra_headers = "");
std::string http_post_json(const std::string& path, int port, const std::string& body,
                           const std::string& extra_headers = "");

}  // namespace falcon::testing
