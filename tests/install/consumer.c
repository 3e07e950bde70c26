/* A program built against the installed package (find_package and pkg-config):
 * it links, loads, and reads the library's version. */
#include <stdio.h>
#include <string.h>

#include <kdtree_kernels.h>

int main(void) {
  printf("%s\n", kdtree_build_info());
  return strcmp(kdtree_version_string(), KDTREE_VERSION_STRING) == 0 ? 0 : 1;
}
