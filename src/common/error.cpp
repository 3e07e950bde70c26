// The thread-local error message behind kdtree_last_error_message().
#include "common/error.hpp"

namespace kdtree {

// One message per thread: a failure on one thread never changes what another
// thread reads. Internal linkage would do, but kdtree_last_error_message()
// below lives outside the namespace.
static thread_local std::string last_error;

void fail(kdtree_status status, const char* function, const std::string& what) {
  throw Error(status, std::string(function) + ": " + what);
}

void set_last_error(const std::string& message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    // Out of memory while copying the message: an empty message is better
    // than an exception escaping the noexcept boundary.
    last_error.clear();
  }
}

void set_internal_error(const char* function, const char* what) noexcept {
  try {
    last_error = std::string(function) + ": internal error: " + what;
  } catch (...) {
    last_error.clear();  // as in set_last_error
  }
}

void clear_last_error() noexcept { last_error.clear(); }

}  // namespace kdtree

extern "C" KDTREE_API const char* kdtree_last_error_message(void) {
  return kdtree::last_error.c_str();
}
