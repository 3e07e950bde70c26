// The one error boundary of the library (after cuVS c/src/core/exceptions.hpp).
//
// Code below the C ABI reports failure by throwing kdtree::Error (status +
// message). Every extern "C" entry point is written once through
// kdtree::guard(), which turns any exception into a kdtree_status and stores
// the message in a thread-local buffer for kdtree_last_error_message().
#pragma once

#include <exception>
#include <string>

#include "kdtree_kernels.h"

namespace kdtree {

class Error : public std::exception {
 public:
  Error(kdtree_status status, std::string message)
      : status_(status), message_(std::move(message)) {}
  kdtree_status status() const noexcept { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  kdtree_status status_;
  std::string message_;
};

// Throws Error(status, "<function>: <what>").
[[noreturn]] void fail(kdtree_status status, const char* function, const std::string& what);

// Thread-local last error message (kdtree_last_error_message()).
void set_last_error(const std::string& message) noexcept;
// Sets "<function>: internal error: <what>", built where an out-of-memory
// cannot escape (the message is left empty then).
void set_internal_error(const char* function, const char* what) noexcept;
void clear_last_error() noexcept;

// Runs body(); maps kdtree::Error to its status, std::bad_alloc and any other
// exception to KDTREE_ERROR_INTERNAL, always with a message naming `function`.
template <class Body>
kdtree_status guard(const char* function, Body&& body) noexcept {
  try {
    clear_last_error();
    body();
    return KDTREE_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::exception& e) {
    set_internal_error(function, e.what());
    return KDTREE_ERROR_INTERNAL;
  } catch (...) {
    set_internal_error(function, "unknown exception");
    return KDTREE_ERROR_INTERNAL;
  }
}

}  // namespace kdtree
