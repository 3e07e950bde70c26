/*
 * Version, status strings, build info, struct sizes, the thread-local error
 * message, and the device entry points' argument checks (no GPU on CI).
 */
#include <pthread.h>
#include <stdio.h>

#include "api_expect.h"

static void status_strings_name_every_status(void** state) {
  (void)state;
  static const char* const names[] = {
      "KDTREE_OK", "KDTREE_ERROR_INVALID_ARGUMENT", "KDTREE_ERROR_UNSUPPORTED",
      "KDTREE_ERROR_MISALIGNED", "KDTREE_ERROR_WORKSPACE_TOO_SMALL", "KDTREE_ERROR_STRUCT_VERSION",
      "KDTREE_ERROR_NO_DEVICE", "KDTREE_ERROR_ARCH_NOT_BUILT", "KDTREE_ERROR_CUDA",
      "KDTREE_ERROR_INTERNAL"};
  for (int status = KDTREE_OK; status <= KDTREE_ERROR_INTERNAL; ++status) {
    assert_string_equal(kdtree_status_string(status), names[status]);
  }
  assert_string_equal(kdtree_status_string(10), "KDTREE_STATUS_UNKNOWN");
  assert_string_equal(kdtree_status_string(-1), "KDTREE_STATUS_UNKNOWN");
  assert_string_equal(kdtree_status_string(INT32_MAX), "KDTREE_STATUS_UNKNOWN");
}

static void versions_agree(void** state) {
  (void)state;
  assert_int_equal(kdtree_version_number(), KDTREE_VERSION_NUMBER);
  assert_string_equal(kdtree_version_string(), KDTREE_VERSION_STRING);
  assert_int_equal(kdtree_abi_version(), KDTREE_ABI_VERSION);
  const char* info = kdtree_build_info();
  const char* head = "kdtree_kernels " KDTREE_VERSION_STRING " cuda ";
  assert_memory_equal(info, head, strlen(head));
  assert_non_null(strstr(info, " sm "));
  assert_non_null(strstr(info, " ptx "));
}

static void struct_sizes(void** state) {
  (void)state;
  size_t size = 0;
  EXPECT_OK(kdtree_struct_size("kdtree_merge_params", &size));
  assert_int_equal(size, sizeof(kdtree_merge_params));
  EXPECT_OK(kdtree_struct_size("kdtree_fragmentation_stats", &size));
  assert_int_equal(size, sizeof(kdtree_fragmentation_stats));
  size = 3;
  EXPECT_FAILURE(kdtree_struct_size("kdtree_nothing", &size), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_struct_size: struct_name = \"kdtree_nothing\" is not a public struct of "
                 "this library");
  assert_int_equal(size, 3);
  EXPECT_FAILURE(kdtree_struct_size(NULL, &size), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_struct_size: struct_name is NULL");
  EXPECT_FAILURE(kdtree_struct_size("kdtree_merge_params", NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_struct_size: size is NULL");
}

static void success_clears_the_message(void** state) {
  (void)state;
  EXPECT_FAILURE(kdtree_merge_params_init(NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_merge_params_init: params is NULL");
  kdtree_merge_params p;
  EXPECT_OK(kdtree_merge_params_init(&p));
}

/* A failure on another thread leaves this thread's message alone. */
static void* fail_on_other_thread(void* seen) {
  kdtree_prepare(-7);
  snprintf((char*)seen, 128, "%s", kdtree_last_error_message());
  return NULL;
}

static void message_is_thread_local(void** state) {
  (void)state;
  EXPECT_FAILURE(kdtree_defrag_copy(NULL, NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_defrag_copy: params is NULL");
  char seen[128] = {0};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, fail_on_other_thread, seen), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_string_equal(seen, "kdtree_prepare: device = -7 is less than 0");
  assert_string_equal(kdtree_last_error_message(), "kdtree_defrag_copy: params is NULL");
}

static void device_arguments(void** state) {
  (void)state;
  EXPECT_FAILURE(kdtree_prepare(-1), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_prepare: device = -1 is less than 0");
  int32_t ok = 42;
  EXPECT_FAILURE(kdtree_device_supported(0, NULL), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_device_supported: ok is NULL");
  EXPECT_FAILURE(kdtree_device_supported(-2, &ok), KDTREE_ERROR_INVALID_ARGUMENT,
                 "kdtree_device_supported: device = -2 is less than 0");
  assert_int_equal(ok, 42);
}

static void no_gpu_means_no_device(void** state) {
  (void)state;
  SKIP_IF_GPU();
  EXPECT_NO_DEVICE(kdtree_prepare(0), "kdtree_prepare");
  int32_t ok = 42;
  EXPECT_NO_DEVICE(kdtree_device_supported(0, &ok), "kdtree_device_supported");
  assert_int_equal(ok, 42);
  EXPECT_NO_DEVICE(kdtree_prepare(1000), "kdtree_prepare");
}

/* With a GPU: an ordinal past the last device is an argument error. */
static void device_out_of_range_with_gpu(void** state) {
  (void)state;
  if (!gpu_present()) skip();
  assert_int_equal(kdtree_prepare(1000), KDTREE_ERROR_INVALID_ARGUMENT);
  const char* prefix = "kdtree_prepare: device = 1000 is out of range [0, ";
  assert_memory_equal(kdtree_last_error_message(), prefix, strlen(prefix));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(status_strings_name_every_status),
      cmocka_unit_test(versions_agree),
      cmocka_unit_test(struct_sizes),
      cmocka_unit_test(success_clears_the_message),
      cmocka_unit_test(message_is_thread_local),
      cmocka_unit_test(device_arguments),
      cmocka_unit_test(no_gpu_means_no_device),
      cmocka_unit_test(device_out_of_range_with_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
