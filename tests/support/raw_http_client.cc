#include "support/raw_http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace falcon::testing {

struct RawHttpClient::Impl {
  int fd = -1;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  bool ok = false;
  std::string buffer;

  ~Impl() {
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
    if (fd >= 0) ::close(fd);
  }
  ssize_t write_some(const char* data, std::size_t n) {
    if (ssl != nullptr) {
      const int w = SSL_write(ssl, data, static_cast<int>(n));
      return w > 0 ? w : -1;
    }
    return ::send(fd, data, n, MSG_NOSIGNAL);
  }
  ssize_t read_some(char* data, std::size_t n) {
    if (ssl != nullptr) {
      const int r = SSL_read(ssl, data, static_cast<int>(n));
      if (r > 0) return r;
      const int e = SSL_get_error(ssl, r);
      return e == SSL_ERROR_ZERO_RETURN ? 0 : (errno == EAGAIN || errno == EWOULDBLOCK ? -2 : 0);
    }
    const ssize_t r = ::recv(fd, data, n, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -2;
    return r < 0 ? 0 : r;
  }
};

RawHttpClient::RawHttpClient(int port, Options options) : impl_(std::make_unique<Impl>()) {
  // A write to a connection the server closed is a failed send, not a dead test (SSL_write
  // writes without MSG_NOSIGNAL).
  ::signal(SIGPIPE, SIG_IGN);
  Impl& i = *impl_;
  i.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const auto ms = options.read_timeout.count();
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  ::setsockopt(i.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(i.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const int one = 1;
  ::setsockopt(i.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!options.source_address.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, options.source_address.c_str(), &local.sin_addr);
    if (::bind(i.fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) return;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(i.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
  if (options.tls) {
    i.ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(i.ctx, SSL_VERIFY_NONE, nullptr);
    if (options.tls12_only) {
      SSL_CTX_set_min_proto_version(i.ctx, TLS1_2_VERSION);
      SSL_CTX_set_max_proto_version(i.ctx, TLS1_2_VERSION);
    }
    if (!options.tls12_ciphers.empty()) {
      SSL_CTX_set_security_level(i.ctx, 0);
      if (SSL_CTX_set_cipher_list(i.ctx, options.tls12_ciphers.c_str()) != 1) return;
    }
    i.ssl = SSL_new(i.ctx);
    SSL_set_fd(i.ssl, i.fd);
    if (SSL_connect(i.ssl) != 1) {
      ERR_clear_error();
      return;
    }
  }
  i.ok = true;
}

RawHttpClient::~RawHttpClient() = default;

bool RawHttpClient::connected() const { return impl_->ok; }

bool RawHttpClient::send(const std::string& data) {
  if (!impl_->ok) return false;
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t w = impl_->write_some(data.data() + off, data.size() - off);
    if (w <= 0) return false;
    off += static_cast<std::size_t>(w);
  }
  return true;
}

std::string RawHttpClient::Answer::header(const std::string& name) const {
  // Header names compare case-insensitively.
  std::string lower_head = head;
  std::string key = "\r\n" + name + ":";
  for (char& c : lower_head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::size_t at = lower_head.find(key);
  if (at == std::string::npos) return {};
  std::size_t start = at + key.size();
  while (start < head.size() && head[start] == ' ') ++start;
  return head.substr(start, head.find("\r\n", start) - start);
}

bool RawHttpClient::fill() {
  char chunk[16384];
  const ssize_t r = impl_->read_some(chunk, sizeof chunk);
  if (r <= 0) return false;
  impl_->buffer.append(chunk, static_cast<std::size_t>(r));
  return true;
}

RawHttpClient::Answer RawHttpClient::read_answer(bool head_request) {
  Answer a;
  std::string& buffer = impl_->buffer;
  if (!impl_->ok) return a;
  std::size_t end;
  while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (!fill()) return a;
  }
  a.head = buffer.substr(0, end);
  buffer.erase(0, end + 4);
  if (a.head.size() < 12) return a;
  a.status = std::stoi(a.head.substr(9, 3));
  if (head_request || a.status == 100 || a.status == 304) return a;
  if (const std::string cl = a.header("Content-Length"); !cl.empty()) {
    const std::size_t n = std::stoul(cl);
    while (buffer.size() < n) {
      if (!fill()) break;
    }
    a.body = buffer.substr(0, n);
    buffer.erase(0, std::min(n, buffer.size()));
  } else if (a.header("Transfer-Encoding") == "chunked") {
    for (;;) {
      std::size_t eol;
      while ((eol = buffer.find("\r\n")) == std::string::npos) {
        if (!fill()) return a;
      }
      const std::size_t n = std::stoul(buffer.substr(0, eol), nullptr, 16);
      while (buffer.size() < eol + 2 + n + 2) {
        if (!fill()) return a;
      }
      a.body += buffer.substr(eol + 2, n);
      buffer.erase(0, eol + 2 + n + 2);
      if (n == 0) break;
    }
  } else {
    while (fill()) {
    }
    a.body = std::move(buffer);
    buffer.clear();
  }
  return a;
}

bool RawHttpClient::closed_by_server() {
  if (!impl_->ok) return true;
  if (!impl_->buffer.empty()) return false;
  char c;
  const ssize_t r = impl_->read_some(&c, 1);
  return r == 0;
}

std::string http_get(const std::string& path, int port, const std::string& extra_headers) {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" +
         extra_headers + "\r\n";
}

std::string http_post_json(const std::string& path, int port, const std::string& body,
                           const std::string& extra_headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

}  // namespace falcon::testing
