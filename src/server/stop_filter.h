// Holds back generated text that might be the start of a stop string, so a streamed reply
// never shows part of a stop sequence, and cuts the text where a stop string appears.
#pragma once
#include <string>
#include <vector>

namespace mp::server {

class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends text; returns what may be shown now. After a stop string is seen, stopped() is
  // true and nothing more is returned.
  std::string push(const std::string& text);
  // The text held back (no stop string completed): call at the end of generation.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace mp::server
