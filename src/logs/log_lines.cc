#include "falcon/log_retriever.h"

namespace falcon {

LogLines::LogLines(std::unique_ptr<LogLineSource> source) : source_(std::move(source)) {}

std::optional<std::string> LogLines::next() {
  if (!source_) return std::nullopt;
  auto line = source_->next();
  if (!line) source_.reset();  // release buffers and connections as soon as the end is reached
  return line;
}

LogLines::iterator::iterator(LogLines* owner) : owner_(owner), current_(owner->next()) {}

LogLines::iterator& LogLines::iterator::operator++() {
  current_ = owner_->next();
  return *this;
}

}  // namespace falcon
