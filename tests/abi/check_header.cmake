# include/kdtree_kernels.h compiles on its own as strict C99, C11 and C++17.
# cmake -DC_COMPILER= -DCXX_COMPILER= -DINCLUDE_DIR= -DWORK_DIR= -P check_header.cmake
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/only_header.c "#include \"kdtree_kernels.h\"\nint main(void) { return 0; }\n")
file(WRITE ${WORK_DIR}/only_header.cpp "#include \"kdtree_kernels.h\"\nint main() { return 0; }\n")
set(strict -pedantic -Werror -Wall -Wextra -I${INCLUDE_DIR})
foreach(case IN ITEMS "c99;${C_COMPILER};-std=c99;only_header.c"
                      "c11;${C_COMPILER};-std=c11;only_header.c"
                      "c++17;${CXX_COMPILER};-std=c++17;only_header.cpp")
  list(GET case 0 label)
  list(GET case 1 compiler)
  list(GET case 2 standard)
  list(GET case 3 source)
  execute_process(COMMAND ${compiler} ${standard} ${strict} -c ${WORK_DIR}/${source}
                          -o ${WORK_DIR}/${label}.o
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "kdtree_kernels.h does not compile alone as ${label}:\n${out}${err}")
  endif()
  message(STATUS "header compiles alone as ${label}")
endforeach()
