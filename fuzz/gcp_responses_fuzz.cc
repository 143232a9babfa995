// What Google's APIs answer, read by src/gcp/: an entries:list page (Cloud Logging), an object
// resource (Cloud Storage), a long-running Operation (CopyLogEntries), an error body, and the
// small texts inside them (a Duration, an HTTP-date, a gs:// URI). Each reader either returns or
// throws the one exception type its header documents.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "falcon/errors.h"
#include "gcp/api_error.h"
#include "gcp/logging_admin_client.h"
#include "gcp/logging_client.h"
#include "gcp/storage_client.h"
#include "gcp/url.h"

namespace {

template <typename Read>
void only_log_retrieval_error(Read read) {
  try {
    read();
  } catch (const falcon::LogRetrievalError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  only_log_retrieval_error([&] { (void)falcon::gcp::parse_log_entries_page(text, "fuzz"); });
  only_log_retrieval_error([&] { (void)falcon::gcp::parse_object_metadata(text, "fuzz"); });
  only_log_retrieval_error([&] { (void)falcon::gcp::parse_copy_operation(text, "fuzz"); });
  // The status from the first byte: every class of answer, 1xx to 5xx and beyond.
  const int status = size > 0 ? 100 + data[0] * 2 : 500;
  const falcon::gcp::ApiError e = falcon::gcp::parse_api_error(status, text);
  if (e.message.size() > text.size() + 1024) __builtin_trap();  // a bounded excerpt, not more
  (void)falcon::gcp::parse_duration(text);
  (void)falcon::gcp::parse_http_date(text);
  try {
    (void)falcon::gcp::parse_gcs_uri(text);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
