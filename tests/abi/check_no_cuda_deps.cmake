# The library links cudart statically and never the driver library, so it
# loads on a machine without a GPU or driver (SPEC section 4).
# cmake -DLIB=<.so> -P check_no_cuda_deps.cmake
find_program(READELF readelf REQUIRED)
execute_process(COMMAND ${READELF} -d ${LIB} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d failed on ${LIB}")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[([^]]+)\\]" needed "${dynamic}")
message(STATUS "NEEDED: ${needed}")
foreach(entry IN LISTS needed)
  if(entry MATCHES "libcudart|libcuda\\.so")
    message(FATAL_ERROR "${LIB} depends on a CUDA shared library: ${entry}")
  endif()
endforeach()
if(NOT dynamic MATCHES "SONAME[^\n]*libkdtree_kernels_c\\.so\\.0\\]")
  message(FATAL_ERROR "${LIB}: SONAME is not libkdtree_kernels_c.so.0")
endif()
