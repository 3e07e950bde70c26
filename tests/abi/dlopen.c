/*
 * The library loads with dlopen on a machine with no GPU and no driver (the
 * static cudart finds no libcuda.so at call time, not at load time), answers
 * the queries that need no device, and reports NO_DEVICE with a message from
 * device entry points. On a machine with a GPU the device calls succeed.
 * Usage: abi_dlopen <path to libkdtree_kernels_c.so>
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "kdtree_kernels.h"

typedef const char* (*text_fn)(void);
typedef int32_t (*number_fn)(void);
typedef kdtree_status (*prepare_fn)(int32_t);
typedef kdtree_status (*supported_fn)(int32_t, int32_t*);

static void* symbol(void* library, const char* name) {
  void* address = dlsym(library, name);
  if (address == NULL) fprintf(stderr, "FAIL: dlsym(%s): %s\n", name, dlerror());
  return address;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <libkdtree_kernels_c.so>\n", argv[0]);
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  number_fn version_number = (number_fn)symbol(library, "kdtree_version_number");
  text_fn build_info = (text_fn)symbol(library, "kdtree_build_info");
  text_fn last_error = (text_fn)symbol(library, "kdtree_last_error_message");
  prepare_fn prepare = (prepare_fn)symbol(library, "kdtree_prepare");
  supported_fn supported = (supported_fn)symbol(library, "kdtree_device_supported");
  if (!version_number || !build_info || !last_error || !prepare || !supported) return 1;

  int failures = 0;
  if (version_number() != KDTREE_VERSION_NUMBER) {
    fprintf(stderr, "FAIL: kdtree_version_number() = %d\n", (int)version_number());
    ++failures;
  }
  printf("%s\n", build_info());

  const kdtree_status prepared = prepare(0);
  if (prepared == KDTREE_ERROR_NO_DEVICE) {
    const char* expected = "kdtree_prepare: no CUDA device (cuda error ";
    if (strncmp(last_error(), expected, strlen(expected)) != 0) {
      fprintf(stderr, "FAIL: message \"%s\" does not start with \"%s\"\n", last_error(), expected);
      ++failures;
    }
    int32_t ok = 42;
    if (supported(0, &ok) != KDTREE_ERROR_NO_DEVICE || ok != 42) {
      fprintf(stderr, "FAIL: kdtree_device_supported without a GPU: status or *ok changed\n");
      ++failures;
    }
    printf("no GPU: %s\n", last_error());
  } else if (prepared == KDTREE_OK || prepared == KDTREE_ERROR_ARCH_NOT_BUILT) {
    int32_t ok = 42;
    if (supported(0, &ok) != KDTREE_OK || ok != (prepared == KDTREE_OK ? 1 : 0)) {
      fprintf(stderr, "FAIL: kdtree_device_supported disagrees with kdtree_prepare\n");
      ++failures;
    }
    printf("GPU present: kdtree_prepare(0) = %d %s\n", (int)prepared, last_error());
  } else {
    fprintf(stderr, "FAIL: kdtree_prepare(0) = %d: %s\n", (int)prepared, last_error());
    ++failures;
  }
  dlclose(library);
  return failures == 0 ? 0 : 1;
}
