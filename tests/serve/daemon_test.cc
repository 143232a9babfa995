// falcon::Daemon in the test process (what `falcon serve` runs), against the local fleet: it
// binds and says where, serves until stop() and returns 0, reload() takes a new tokens file and
// keeps the old one when the new one is bad, and each way it cannot start is a DaemonSetupError
// naming what to fix.
#include "falcon/daemon.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "falcon/errors.h"
#include "support/local_fleet.h"
#include "support/raw_http_client.h"
#include "support/temp_dir.h"

namespace falcon {
namespace {

using ::testing::HasSubstr;
using testing::RawHttpClient;

class DaemonTest : public ::testing::Test {
 protected:
  DaemonOptions options(const std::string& listen = "127.0.0.1:0") {
    DaemonOptions o;
    o.config_path = fleet_.repos_path();
    o.listen = listen;
    o.state = "sqlite://" + (dir_.path() / "falcon.db").string();
    o.log_fd = log_fd_;
    return o;
  }
  std::string tokens(const std::string& name, const std::string& text) {
    const std::string path = dir_.write(name, text).string();
    ::chmod(path.c_str(), 0600);
    return path;
  }
  static int port_of(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }
  static int get(int port, const std::string& path, const std::string& token = "") {
    RawHttpClient c(port);
    c.send(testing::http_get(path, port,
                             token.empty() ? "" : "Authorization: Bearer " + token + "\r\n"));
    return c.read_answer().status;
  }
  std::string log() const {
    std::ifstream in(log_path_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void TearDown() override { ::close(log_fd_); }

  testing::LocalFleet fleet_;
  testing::TempDir dir_;
  std::string log_path_ = (dir_.path() / "serve.log").string();
  int log_fd_ = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
};

TEST_F(DaemonTest, ServesUntilStoppedAndReloadsItsTokens) {
  const std::string file =
      tokens("tokens", "reader-token-0123456789 read\noperator-token-0123456789 operate\n");
  auto o = options();
  o.tokens_file = file;
  Daemon daemon(o);
  const int port = port_of(daemon.url());
  EXPECT_EQ(daemon.url(), "http://127.0.0.1:" + std::to_string(port));
  int code = -1;
  std::thread running([&] { code = daemon.run(); });
  EXPECT_EQ(get(port, "/healthz"), 200);
  EXPECT_EQ(get(port, "/v1/clusters"), 401);
  EXPECT_EQ(get(port, "/v1/clusters", "reader-token-0123456789"), 200);
  // The file changes: a reload takes it; a bad one keeps what is in force.
  tokens("tokens", "other-token-0123456789ab read\n");
  daemon.reload();
  EXPECT_EQ(get(port, "/v1/clusters", "reader-token-0123456789"), 401);
  EXPECT_EQ(get(port, "/v1/clusters", "other-token-0123456789ab"), 200);
  tokens("tokens", "other-token-0123456789ab read\nother-token-0123456789ab operate\n");
  daemon.reload();
  EXPECT_EQ(get(port, "/v1/clusters", "other-token-0123456789ab"), 200);
  EXPECT_THAT(log(), HasSubstr("tokens reload failed; the tokens in force stay"));
  EXPECT_THAT(log(), HasSubstr("listed already on line 1"));
  daemon.stop();
  running.join();
  EXPECT_EQ(code, 0);
  EXPECT_FALSE(daemon.abandoned_work());
  EXPECT_EQ(log().rfind("listening on " + daemon.url() + "\n", 0), 0U) << log();
  EXPECT_THAT(log(), HasSubstr("\"msg\":\"stopped\""));
}

TEST_F(DaemonTest, EachWayItCannotStartNamesWhatToFix) {
  const auto refused = [&](DaemonOptions o, const std::string& says) {
    try {
      Daemon daemon(std::move(o));
      ADD_FAILURE() << "started; expected: " << says;
    } catch (const DaemonSetupError& e) {
      EXPECT_THAT(e.what(), HasSubstr(says));
    }
  };
  // Not loopback (by the address bound, whatever the name): tokens needed.
  refused(options("0.0.0.0:0"), "needs bearer tokens");
  refused(options("127.0.0.1:99999"), "the port must be a number 0..65535");
  auto o = options();
  o.tokens_file = tokens("twice", "reader-token-0123456789 read\nreader-token-0123456789 read\n");
  refused(o, ":2: this token is listed already on line 1");
  o = options();
  o.tls_cert = (dir_.path() / "missing-cert.pem").string();
  o.tls_key = (dir_.path() / "missing-key.pem").string();
  refused(o, "cannot use certificate");
  o = options();
  o.tls_cert = (dir_.path() / "missing-cert.pem").string();
  refused(o, "TLS needs both --tls-cert and --tls-key");
  // A taken port.
  Daemon first(options());
  refused(options("127.0.0.1:" + std::to_string(port_of(first.url()))), "cannot listen on");
  // A bad repos.yaml is the configuration's own error.
  o = options();
  o.config_path = dir_.write("bad.yaml", "clusters: 7\n").string();
  EXPECT_THROW(Daemon{o}, ClusterConfigError);
}

// The connection limit against the open files the process may have: the default fits itself to
// them, with a note; a value that was set stays, with a warning.
TEST(FitConnections, TheDefaultFitsTheOpenFilesAndASetValueIsKeptWithAWarning) {
  ServeLimits limits;
  ConnectionLimit c = fit_connections(limits, false, 1 << 20);
  EXPECT_EQ(c.max_connections, 16384);
  EXPECT_TRUE(c.warning.empty() && c.note.empty());
  EXPECT_EQ(fit_connections(limits, true, 1 << 20).max_connections, 1024);
  EXPECT_EQ(fit_connections(limits, true, 1536).max_connections, 1024);  // exactly enough

  c = fit_connections(limits, false, 4096);
  EXPECT_EQ(c.max_connections, 4096 - 512);
  EXPECT_TRUE(c.warning.empty());
  EXPECT_THAT(c.note, HasSubstr("serve.limits.max_connections: 3584 (its default is 16384; the "
                                "hard limit of open files, 4096, leaves room for no more"));
  EXPECT_EQ(fit_connections(limits, false, 100).max_connections, 512);  // never below

  limits.max_connections = 8000;
  c = fit_connections(limits, false, 4096);
  EXPECT_EQ(c.max_connections, 8000);
  EXPECT_TRUE(c.note.empty());
  EXPECT_THAT(c.warning, HasSubstr("serve.limits.max_connections 8000 needs about 8512 open "
                                   "files, and the hard limit is 4096"));
}

}  // namespace
}  // namespace falcon
