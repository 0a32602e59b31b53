// bertx/error.hpp - the one exception type for user-facing errors.
// Its message is a single line that names the file/key/line at fault and what was expected;
// the CLI prints it as "bertx: error: <message>" and exits non-zero.
#pragma once
#include <stdexcept>
#include <string>

#include "bertx/version.hpp"

namespace bertx {

class BERTX_EXPORT Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace bertx
