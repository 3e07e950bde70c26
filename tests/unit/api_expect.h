/*
 * Helpers shared by the cmocka tests of the API layer (tests/unit/test_api_*.c):
 * assert a status together with the exact thread-local message, and tell
 * whether a GPU is present (valid-argument calls to device entry points then
 * really launch, so the tests that expect NO_DEVICE skip themselves).
 */
#ifndef KDTREE_TESTS_API_EXPECT_H
#define KDTREE_TESTS_API_EXPECT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kdtree_kernels.h"

/* The call returns `status` and leaves exactly `message` behind. */
#define EXPECT_FAILURE(call, status, message)                        \
  do {                                                               \
    const kdtree_status got_ = (call);                               \
    assert_string_equal(kdtree_status_string(got_),                  \
                        kdtree_status_string(status));               \
    assert_string_equal(kdtree_last_error_message(), (message));     \
  } while (0)

/* The call succeeds and clears the message. */
#define EXPECT_OK(call)                                              \
  do {                                                               \
    const kdtree_status got_ = (call);                               \
    assert_string_equal(kdtree_status_string(got_), "KDTREE_OK");    \
    assert_string_equal(kdtree_last_error_message(), "");            \
  } while (0)

/* The call fails with NO_DEVICE and a message naming `function`. */
#define EXPECT_NO_DEVICE(call, function)                                              \
  do {                                                                                \
    const kdtree_status got_ = (call);                                                \
    assert_string_equal(kdtree_status_string(got_), "KDTREE_ERROR_NO_DEVICE");        \
    const char* prefix_ = function ": no CUDA device (cuda error ";                   \
    assert_memory_equal(kdtree_last_error_message(), prefix_, strlen(prefix_));       \
  } while (0)

/* Appends one rule case to a local table `cases` of {p, status, message}
 * entries, counted by `n`: the params `valid()` returns, changed by `stmt`
 * (which names them p), and the status and message (after the function's
 * name) the call must give for them. */
#define ADD_CASE(params_type, valid, stmt, st, msg)                   \
  do {                                                                \
    assert_true(n < (int)(sizeof cases / sizeof cases[0]));           \
    cases[n].p = valid();                                             \
    params_type* p = &cases[n].p;                                     \
    stmt;                                                             \
    cases[n].status = (st);                                           \
    cases[n].message = (msg);                                         \
    ++n;                                                              \
  } while (0)

/* 1 when a CUDA device is visible (whether or not this build runs on it). */
static inline int gpu_present(void) {
  return kdtree_prepare(0) != KDTREE_ERROR_NO_DEVICE;
}

/* Skips the running test when a GPU is present: with one, a call with valid
 * arguments and host pointers would reach a kernel. */
#define SKIP_IF_GPU()                                                 \
  do {                                                                \
    if (gpu_present()) skip();                                        \
  } while (0)

/* Every byte of buf[0..bytes) still equals `poison`. */
static inline void assert_untouched(const void* buf, size_t bytes, unsigned char poison) {
  const unsigned char* p = (const unsigned char*)buf;
  for (size_t i = 0; i < bytes; ++i) {
    if (p[i] != poison) fail_msg("byte %zu changed from 0x%02x to 0x%02x", i, poison, p[i]);
  }
}

#endif /* KDTREE_TESTS_API_EXPECT_H */
