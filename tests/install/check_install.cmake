# Installs the build into a temporary prefix, then builds and runs
# tests/install/consumer.c twice: through find_package(kdtree_kernels) and
# through pkg-config. Needs no GPU and no CUDA toolkit on the consumer side.
# cmake -DBUILD_DIR= -DPREFIX= -DCONSUMER_DIR= -DWORK_DIR= -DC_COMPILER= -P check_install.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " line "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${line}\n${out}${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${PREFIX} ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})

# 1. find_package
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/cmake -DCMAKE_PREFIX_PATH=${PREFIX}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake)
run(${WORK_DIR}/cmake/consumer)
message(STATUS "find_package consumer: ${run_output}")

# 2. pkg-config
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB_RECURSE pc_files ${PREFIX}/kdtree_kernels.pc)
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir ${pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run(${PKG_CONFIG} --cflags kdtree_kernels)
string(STRIP "${run_output}" cflags)
run(${PKG_CONFIG} --libs kdtree_kernels)
string(STRIP "${run_output}" libs)
run(${PKG_CONFIG} --variable=libdir kdtree_kernels)
string(STRIP "${run_output}" libdir)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
file(MAKE_DIRECTORY ${WORK_DIR}/pkgconfig)
run(${C_COMPILER} ${cflags} ${CONSUMER_DIR}/consumer.c -o ${WORK_DIR}/pkgconfig/consumer ${libs})
set(ENV{LD_LIBRARY_PATH} ${libdir})
run(${WORK_DIR}/pkgconfig/consumer)
message(STATUS "pkg-config consumer: ${run_output}")
