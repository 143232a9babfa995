// The retry helper and the parsing of Google error bodies (reference gcp.md 1.7, 2.5).
#include "gcp/retry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "falcon/errors.h"
#include "gcp/api_error.h"
#include "gcp/credentials.h"
#include "support/fake_clock.h"
#include "support/fake_http_client.h"

namespace falcon::gcp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeClock;
using testing::FakeHttpClient;
using ::testing::HasSubstr;
using testing::json_response;
using ::testing::Not;

// A FakeClock that also remembers each sleep.
class RecordingClock final : public Clock {
 public:
  std::chrono::system_clock::time_point now() const override { return clock_.now(); }
  std::chrono::steady_clock::time_point steady_now() const override { return clock_.steady_now(); }
  void sleep_for(std::chrono::nanoseconds d) const override {
    sleeps_.push_back(std::chrono::duration_cast<milliseconds>(d));
    clock_.sleep_for(d);
  }
  const std::vector<milliseconds>& sleeps() const { return sleeps_; }

 private:
  FakeClock clock_;
  mutable std::vector<milliseconds> sleeps_;
};

constexpr const char* kUrl = "https://logging.example/v2/entries:list";

HttpRequest make_request() {
  HttpRequest request;
  request.method = "POST";
  request.url = kUrl;
  request.body = "{}";
  return request;
}

RetryPolicy no_jitter_policy() {
  RetryPolicy policy;
  policy.max_attempts = 8;
  policy.deadline = milliseconds(3'600'000);
  policy.initial_backoff = milliseconds(100);
  policy.max_backoff = milliseconds(1'000);
  policy.multiplier = 2.0;
  policy.jitter = 0.0;
  return policy;
}

RetryOptions options_for(const Clock& clock, RetryPolicy policy = no_jitter_policy()) {
  RetryOptions options;
  options.policy = policy;
  options.call = "entries:list for projects/p";
  options.clock = &clock;
  options.seed = 42;
  return options;
}

std::string status_body(int code, const std::string& status, const std::string& message,
                        const std::string& details = "[]") {
  return "{\"error\":{\"code\":" + std::to_string(code) + ",\"status\":\"" + status +
         "\",\"message\":\"" + message + "\",\"details\":" + details + "}}";
}

std::string retry_info(const std::string& delay) {
  return R"([{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":")" + delay +
         R"("}])";
}

TEST(RetryHelper, RetriesEachTransientStatusThenReturnsTheSuccess) {
  for (int status : {408, 429, 500, 502, 503, 504}) {
    SCOPED_TRACE(status);
    RecordingClock clock;
    FakeHttpClient http;
    http.enqueue("POST", "entries:list", json_response(status, "{}"));
    http.on("POST", "entries:list",
            [](const HttpRequest&) { return json_response(200, R"({"entries":[]})"); });
    const HttpResponse response = send_with_retry(http, make_request(), options_for(clock));
    EXPECT_EQ(response.status, 200);
    EXPECT_EQ(http.count("POST"), 2u);
    EXPECT_EQ(clock.sleeps().size(), 1u);
  }
}

TEST(RetryHelper, DoesNotRetryPermanentErrors) {
  // Client errors, and the 5xx that say the server cannot do it at all (Not Implemented, HTTP
  // Version Not Supported): the transient set is google-cloud-cpp's, is_transient_http_status.
  for (int status : {400, 401, 403, 404, 409, 412, 501, 505}) {
    SCOPED_TRACE(status);
    RecordingClock clock;
    FakeHttpClient http;
    http.on("POST", "entries:list", [status](const HttpRequest&) {
      return json_response(status, status_body(status, "X", "nope"));
    });
    try {
      send_with_retry(http, make_request(), options_for(clock));
      FAIL() << "expected LogRetrievalError";
    } catch (const LogRetrievalError& e) {
      EXPECT_EQ(e.http_status(), status);
    }
    EXPECT_EQ(http.count("POST"), 1u);
    EXPECT_TRUE(clock.sleeps().empty());
  }
}

TEST(RetryHelper, ReturnsFinalErrorResponseWhenAskedNotToThrow) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) { return json_response(404, "{}"); });
  RetryOptions options = options_for(clock);
  options.throw_on_error = false;
  EXPECT_EQ(send_with_retry(http, make_request(), options).status, 404);
}

TEST(RetryHelper, NonIdempotentCallIsNeverRetried) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) {
    return json_response(503, status_body(503, "UNAVAILABLE", "busy"));
  });
  RetryOptions options = options_for(clock);
  options.idempotency = Idempotency::kNonIdempotent;
  EXPECT_THROW(send_with_retry(http, make_request(), options), LogRetrievalError);
  EXPECT_EQ(http.count("POST"), 1u);

  FakeHttpClient broken;
  broken.enqueue_transport_error("POST", "", "connection reset");
  try {
    send_with_retry(broken, make_request(), options);
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 0);
    EXPECT_THAT(e.what(), HasSubstr("connection reset"));
  }
  EXPECT_EQ(broken.count("POST"), 1u);
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(RetryHelper, RetriesTransportErrorsOfIdempotentCalls) {
  RecordingClock clock;
  FakeHttpClient http;
  http.enqueue_transport_error("POST", "", "Connection refused");
  http.enqueue_transport_error("POST", "", "Operation timed out", /*timed_out=*/true);
  http.on("POST", "", [](const HttpRequest&) { return json_response(200, "{}"); });
  EXPECT_EQ(send_with_retry(http, make_request(), options_for(clock)).status, 200);
  EXPECT_EQ(http.count("POST"), 3u);
}

TEST(RetryHelper, TransportErrorOnLastAttemptIsReportedWithStatusZero) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) -> HttpResponse {
    throw HttpTransportError("POST https://logging.example/v2/entries:list: timed out", true);
  });
  RetryPolicy policy = no_jitter_policy();
  policy.max_attempts = 3;
  try {
    send_with_retry(http, make_request(), options_for(clock, policy));
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 0);
    EXPECT_THAT(e.what(), HasSubstr("entries:list for projects/p"));
    EXPECT_THAT(e.what(), HasSubstr("timed out"));
    EXPECT_THAT(e.what(), HasSubstr("after 3 attempts"));
  }
  EXPECT_EQ(http.count("POST"), 3u);
}

TEST(RetryHelper, BackoffGrowsByTheMultiplierAndStopsAtTheCap) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) { return json_response(503, "{}"); });
  EXPECT_THROW(send_with_retry(http, make_request(), options_for(clock)), LogRetrievalError);
  EXPECT_EQ(http.count("POST"), 8u);
  EXPECT_EQ(clock.sleeps(),
            (std::vector<milliseconds>{milliseconds(100), milliseconds(200), milliseconds(400),
                                       milliseconds(800), milliseconds(1000), milliseconds(1000),
                                       milliseconds(1000)}));
}

TEST(RetryHelper, JitterKeepsEachWaitWithinItsBounds) {
  RetryPolicy policy = no_jitter_policy();
  policy.jitter = 0.5;
  policy.max_backoff = milliseconds(1'000'000);
  Backoff backoff(policy, 7);
  std::vector<milliseconds> waits;
  for (int i = 0; i < 12; ++i) {
    const double full = 100.0 * (1 << i);
    const milliseconds wait = backoff.next(503, std::nullopt);
    EXPECT_GE(wait.count(), static_cast<std::int64_t>(full * 0.5) - 1) << i;
    EXPECT_LE(wait.count(), static_cast<std::int64_t>(full) + 1) << i;
    waits.push_back(wait);
  }
  // Jitter really varies the waits: with 12 draws in [0.5, 1] not all factors are equal.
  std::vector<double> factors;
  for (int i = 0; i < 12; ++i) factors.push_back(waits[i].count() / (100.0 * (1 << i)));
  EXPECT_NE(*std::min_element(factors.begin(), factors.end()),
            *std::max_element(factors.begin(), factors.end()));
}

TEST(RetryHelper, TheSameSeedGivesTheSameWaits) {
  RetryPolicy policy = no_jitter_policy();
  policy.jitter = 0.5;
  Backoff a(policy, 99);
  Backoff b(policy, 99);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.next(500, std::nullopt), b.next(500, std::nullopt));
}

TEST(RetryHelper, StopsWhenTheNextWaitWouldPassTheDeadline) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) { return json_response(503, "{}"); });
  RetryPolicy policy = no_jitter_policy();
  policy.deadline = milliseconds(5'000);
  policy.initial_backoff = milliseconds(2'000);
  policy.max_backoff = milliseconds(60'000);
  try {
    send_with_retry(http, make_request(), options_for(clock, policy));
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 503);
    EXPECT_THAT(e.what(), HasSubstr("deadline"));
  }
  // t=0 fail, wait 2 s, t=2 fail, the next wait (4 s) would end at t=6 > 5.
  EXPECT_EQ(http.count("POST"), 2u);
  EXPECT_EQ(clock.sleeps(), std::vector<milliseconds>{milliseconds(2'000)});
}

TEST(RetryHelper, ShortensTheRequestTimeoutToTheTimeLeft) {
  RecordingClock clock;
  FakeHttpClient http;
  http.enqueue("POST", "", json_response(503, "{}"));
  http.on("POST", "", [](const HttpRequest&) { return json_response(200, "{}"); });
  RetryPolicy policy = no_jitter_policy();
  policy.deadline = milliseconds(30'000);
  policy.initial_backoff = milliseconds(10'000);
  policy.max_backoff = milliseconds(60'000);
  HttpRequest request = make_request();
  request.timeout = milliseconds(60'000);
  send_with_retry(http, request, options_for(clock, policy));
  const auto requests = http.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].timeout, milliseconds(30'000));
  EXPECT_EQ(requests[1].timeout, milliseconds(20'000));
}

TEST(RetryHelper, HonoursRetryInfoDelay) {
  RecordingClock clock;
  FakeHttpClient http;
  http.enqueue("POST", "",
               json_response(503, status_body(503, "UNAVAILABLE", "later", retry_info("7s"))));
  http.on("POST", "", [](const HttpRequest&) { return json_response(200, "{}"); });
  send_with_retry(http, make_request(), options_for(clock));
  EXPECT_EQ(clock.sleeps(), std::vector<milliseconds>{milliseconds(7'000)});
}

TEST(RetryHelper, QuotaErrorGetsALongBackoffOnTheLoggingPolicy) {
  RecordingClock clock;
  FakeHttpClient http;
  const std::string quota = status_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded");
  http.enqueue("POST", "", json_response(429, quota));
  http.enqueue("POST", "", json_response(429, quota));
  http.enqueue("POST", "", json_response(503, "{}"));
  http.on("POST", "", [](const HttpRequest&) { return json_response(200, "{}"); });
  send_with_retry(http, make_request(), options_for(clock, RetryPolicy::for_logging()));
  const auto& sleeps = clock.sleeps();
  ASSERT_EQ(sleeps.size(), 3u);
  // 429s: 20 s then 40 s, less up to 25% jitter: tens of seconds, as the quota is per minute.
  EXPECT_GE(sleeps[0], milliseconds(15'000));
  EXPECT_LE(sleeps[0], milliseconds(20'000));
  EXPECT_GE(sleeps[1], milliseconds(30'000));
  EXPECT_LE(sleeps[1], milliseconds(40'000));
  // A 503 keeps the short backoff: 0.5 s, less jitter.
  EXPECT_LE(sleeps[2], milliseconds(500));
}

TEST(RetryHelper, QuotaErrorWithRetryInfoWaitsExactlyThatLong) {
  RecordingClock clock;
  FakeHttpClient http;
  http.enqueue("POST", "",
               json_response(429, status_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded",
                                              retry_info("31.5s"))));
  http.on("POST", "", [](const HttpRequest&) { return json_response(200, "{}"); });
  send_with_retry(http, make_request(), options_for(clock, RetryPolicy::for_logging()));
  EXPECT_EQ(clock.sleeps(), std::vector<milliseconds>{milliseconds(31'500)});
}

TEST(RetryHelper, QuotaBackoffIsCapped) {
  RetryPolicy policy = RetryPolicy::for_logging();
  policy.jitter = 0;
  Backoff backoff(policy, 1);
  std::vector<milliseconds> waits;
  for (int i = 0; i < 5; ++i) waits.push_back(backoff.next(429, std::nullopt));
  EXPECT_EQ(waits, (std::vector<milliseconds>{milliseconds(20'000), milliseconds(40'000),
                                              milliseconds(60'000), milliseconds(60'000),
                                              milliseconds(60'000)}));
}

TEST(RetryHelper, ExhaustedErrorCarriesStatusNameMessageAndAttempts) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) {
    return json_response(503, status_body(503, "UNAVAILABLE", "The service is unavailable"));
  });
  RetryPolicy policy = no_jitter_policy();
  policy.max_attempts = 3;
  try {
    send_with_retry(http, make_request(), options_for(clock, policy));
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 503);
    EXPECT_EQ(e.status(), "UNAVAILABLE");
    EXPECT_THAT(e.what(), HasSubstr("entries:list for projects/p failed: HTTP 503 UNAVAILABLE"));
    EXPECT_THAT(e.what(), HasSubstr("The service is unavailable"));
    EXPECT_THAT(e.what(), HasSubstr("after 3 attempts"));
  }
}

TEST(RetryHelper, CallsBeforeAttemptBeforeEveryAttempt) {
  RecordingClock clock;
  FakeHttpClient http;
  http.enqueue("POST", "", json_response(500, "{}"));
  http.enqueue("POST", "", json_response(500, "{}"));
  http.on("POST", "", [](const HttpRequest&) { return json_response(200, "{}"); });
  int calls = 0;
  RetryOptions options = options_for(clock);
  options.before_attempt = [&] { ++calls; };
  send_with_retry(http, make_request(), options);
  EXPECT_EQ(calls, 3);
}

class CountingSource final : public TokenSource {
 public:
  AccessToken fetch() override { return {"token-" + std::to_string(++fetches), seconds(3600)}; }
  std::string description() const override { return "counting source"; }
  int fetches = 0;
};

TEST(RetryHelper, Unauthorized401RefreshesTheTokenOnceAndRetriesAtOnce) {
  RecordingClock clock;
  FakeHttpClient http;
  http.enqueue("POST", "", json_response(401, status_body(401, "UNAUTHENTICATED", "expired")));
  http.on("POST", "", [](const HttpRequest&) { return json_response(200, "{}"); });
  auto source = std::make_unique<CountingSource>();
  CountingSource* counter = source.get();
  Credentials credentials(std::move(source), std::make_shared<FakeClock>());
  RetryOptions options = options_for(clock);
  options.credentials = &credentials;
  send_with_retry(http, make_request(), options);
  const auto requests = http.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].headers.get("authorization"), "Bearer token-1");
  EXPECT_EQ(requests[1].headers.get("Authorization"), "Bearer token-2");
  EXPECT_EQ(counter->fetches, 2);
  EXPECT_TRUE(clock.sleeps().empty());
}

TEST(RetryHelper, Unauthorized401TwiceIsAnError) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) {
    return json_response(401, status_body(401, "UNAUTHENTICATED", "bad token"));
  });
  Credentials credentials(std::make_unique<CountingSource>(), std::make_shared<FakeClock>());
  RetryOptions options = options_for(clock);
  options.credentials = &credentials;
  try {
    send_with_retry(http, make_request(), options);
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 401);
    EXPECT_EQ(e.status(), "UNAUTHENTICATED");
  }
  EXPECT_EQ(http.count("POST"), 2u);
}

TEST(RetryHelper, ErrorTextNeverContainsTheToken) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) {
    return json_response(
        403, status_body(403, "PERMISSION_DENIED", "Permission 'logging.logEntries.list' denied"));
  });
  auto credentials = make_fixed_credentials("ya29.secret-token-value");
  RetryOptions options = options_for(clock);
  options.credentials = credentials.get();
  try {
    send_with_retry(http, make_request(), options);
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("entries:list for projects/p failed: HTTP 403 "
                                    "PERMISSION_DENIED: Permission 'logging.logEntries.list' "
                                    "denied"));
    EXPECT_THAT(e.what(), Not(HasSubstr("secret-token")));
  }
  // The token did go out, in the header.
  EXPECT_EQ(http.requests().at(0).headers.get("Authorization"), "Bearer ya29.secret-token-value");
}

// ---------------------------------------------------------------------------------------------
// Error bodies

// Issue 11: a 429 is the project's shared read quota, not a failure of the request. It is waited
// out until the deadline, whatever the attempt limit, and every wait is told first.
RetryPolicy quota_policy() {
  RetryPolicy policy = no_jitter_policy();
  policy.max_attempts = 2;
  policy.deadline = seconds(60);
  policy.quota_backoff = seconds(1);
  policy.quota_max_backoff = seconds(4);
  return policy;
}

TEST(RetryHelper, QuotaErrorsAreWaitedOutBeyondTheAttemptLimitAndEachWaitIsTold) {
  RecordingClock clock;
  FakeHttpClient http;
  const std::string quota = status_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded");
  for (int i = 0; i < 7; ++i) http.enqueue("POST", "", json_response(429, quota));
  http.on("POST", "", [](const HttpRequest&) { return json_response(200, "{}"); });
  RetryOptions options = options_for(clock, quota_policy());
  std::vector<RetryWait> told;
  options.on_wait = [&](const RetryWait& wait) { told.push_back(wait); };
  EXPECT_EQ(send_with_retry(http, make_request(), options).status, 200);
  // 1 s doubling up to the 4 s cap: seven 429s, although the attempt limit is 2.
  EXPECT_EQ(clock.sleeps(),
            (std::vector<milliseconds>{seconds(1), seconds(2), seconds(4), seconds(4), seconds(4),
                                       seconds(4), seconds(4)}));
  ASSERT_EQ(told.size(), 7u);
  EXPECT_EQ(told[0].cause, RetryWait::Cause::kQuotaExceeded);
  EXPECT_EQ(told[0].http_status, 429);
  EXPECT_EQ(told[0].status, "RESOURCE_EXHAUSTED");
  EXPECT_EQ(told[0].wait, seconds(1));
  EXPECT_EQ(told[0].waited, seconds(0));
  EXPECT_EQ(told[0].time_left, seconds(59));
  EXPECT_EQ(told[6].waited, seconds(19));
  EXPECT_EQ(told[6].time_left, seconds(60 - 23));
  EXPECT_EQ(told[6].failed_attempts, 0);  // 429s do not use up the attempt limit
}

TEST(RetryHelper, QuotaErrorsGiveUpOnlyAtTheDeadline) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) {
    return json_response(429, status_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded"));
  });
  try {
    send_with_retry(http, make_request(), options_for(clock, quota_policy()));
    FAIL() << "expected LogRetrievalError";
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 429);
    EXPECT_EQ(e.status(), "RESOURCE_EXHAUSTED");
    EXPECT_THAT(e.what(), HasSubstr("would pass the 60 s deadline"));
  }
  // 1 + 2 + 4 * 14 = 59 s waited; the next 4 s would pass the deadline.
  EXPECT_EQ(clock.sleeps().size(), 16u);
}

TEST(RetryHelper, OtherTransientFailuresStillStopAtTheAttemptLimit) {
  RecordingClock clock;
  FakeHttpClient http;
  http.on("POST", "", [](const HttpRequest&) { return json_response(503, "{}"); });
  RetryOptions options = options_for(clock, quota_policy());
  std::vector<RetryWait> told;
  options.on_wait = [&](const RetryWait& wait) { told.push_back(wait); };
  EXPECT_THROW(send_with_retry(http, make_request(), options), LogRetrievalError);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].cause, RetryWait::Cause::kFailure);
  EXPECT_EQ(told[0].failed_attempts, 1);
  EXPECT_EQ(told[0].max_attempts, 2);
}

TEST(ApiErrorParsing, ReadsGoogleRpcStatusWithDetails) {
  const std::string body = R"({"error": {
    "code": 429,
    "message": "Quota exceeded for quota metric 'Read requests'",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED",
       "domain": "googleapis.com", "metadata": {"quota_limit_value": "60"}},
      {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"},
      {"@type": "type.googleapis.com/google.rpc.Help", "links": []}]}})";
  const ApiError error = parse_api_error(429, body);
  EXPECT_EQ(error.http_status, 429);
  EXPECT_EQ(error.status, "RESOURCE_EXHAUSTED");
  EXPECT_EQ(error.message, "Quota exceeded for quota metric 'Read requests'");
  EXPECT_EQ(error.reason, "RATE_LIMIT_EXCEEDED");
  EXPECT_EQ(error.retry_delay, milliseconds(30'000));
}

TEST(ApiErrorParsing, ReadsGcsLegacyErrorsAndDerivesTheStatusName) {
  const ApiError error = parse_api_error(
      404,
      R"({"error":{"errors":[{"domain":"global","reason":"notFound","message":"No such object: b/o"}],"code":404,"message":"No such object: b/o"}})");
  EXPECT_EQ(error.status, "NOT_FOUND");
  EXPECT_EQ(error.reason, "notFound");
  EXPECT_EQ(error.message, "No such object: b/o");
  EXPECT_FALSE(error.retry_delay);
  EXPECT_EQ(describe_api_error("metadata get of gs://b/o", error),
            "metadata get of gs://b/o failed: HTTP 404 NOT_FOUND (notFound): No such object: b/o");
}

TEST(ApiErrorParsing, GcsLegacyErrorWithOnlyErrorsArrayUsesItsMessage) {
  const ApiError error = parse_api_error(
      503, R"({"error":{"errors":[{"reason":"backendError","message":"Backend Error"}]}})");
  EXPECT_EQ(error.status, "UNAVAILABLE");
  EXPECT_EQ(error.reason, "backendError");
  EXPECT_EQ(error.message, "Backend Error");
}

TEST(ApiErrorParsing, ReadsOAuthErrors) {
  const ApiError error = parse_api_error(
      400, R"({"error":"invalid_grant","error_description":"Invalid JWT Signature."})");
  EXPECT_EQ(error.reason, "invalid_grant");
  EXPECT_EQ(error.message, "Invalid JWT Signature.");
  EXPECT_EQ(error.status, "INVALID_ARGUMENT");
}

TEST(ApiErrorParsing, KeepsABoundedExcerptOfANonJsonBody) {
  const ApiError html = parse_api_error(502, "<html>\n<body>Bad Gateway</body>\n</html>\n");
  EXPECT_EQ(html.message, "<html> <body>Bad Gateway</body> </html>");
  EXPECT_EQ(html.status, "UNAVAILABLE");
  const ApiError huge = parse_api_error(500, std::string(10'000, 'x'));
  EXPECT_LE(huge.message.size(), 520u);
  EXPECT_EQ(parse_api_error(500, "").message, "");
}

TEST(ApiErrorParsing, ParsesDurations) {
  EXPECT_EQ(parse_duration("30s"), milliseconds(30'000));
  EXPECT_EQ(parse_duration("1.5s"), milliseconds(1'500));
  EXPECT_EQ(parse_duration("0.250s"), milliseconds(250));
  EXPECT_EQ(parse_duration(R"({"seconds": 12, "nanos": 500000000})"), milliseconds(12'500));
  EXPECT_FALSE(parse_duration("30"));
  EXPECT_FALSE(parse_duration("-1s"));
  EXPECT_FALSE(parse_duration("abcs"));
}

TEST(ApiErrorParsing, ThrowApiErrorCarriesStatusAndName) {
  HttpResponse response = json_response(400, status_body(400, "INVALID_ARGUMENT", "bad filter"));
  try {
    throw_api_error("entries:list for projects/p", response);
  } catch (const LogRetrievalError& e) {
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_EQ(e.status(), "INVALID_ARGUMENT");
    EXPECT_STREQ(e.what(),
                 "entries:list for projects/p failed: HTTP 400 INVALID_ARGUMENT: bad filter");
  }
}

}  // namespace
}  // namespace falcon::gcp
