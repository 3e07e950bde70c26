# The library's dynamic symbol table, defined symbols only, equals the pinned
# list abi/kdtree_kernels.symbols exactly (after libglvnd's symbols-check).
# cmake -DLIB=<.so> -DEXPECTED=<list> -P check_symbols.cmake
find_program(NM nm REQUIRED)
execute_process(COMMAND ${NM} -D --defined-only ${LIB}
                OUTPUT_VARIABLE nm_out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D failed on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${nm_out}")
set(actual "")
foreach(line IN LISTS lines)
  # "<address> <type> <name>[@<version>]"
  if(line MATCHES "^[0-9a-fA-F]+ [A-Za-z] ([^@ ]+)")
    list(APPEND actual ${CMAKE_MATCH_1})
  endif()
endforeach()
list(SORT actual)
file(STRINGS ${EXPECTED} expected REGEX "^[^#]")
list(SORT expected)

set(missing ${expected})
list(REMOVE_ITEM missing ${actual})
set(extra ${actual})
list(REMOVE_ITEM extra ${expected})
if(missing OR extra)
  string(REPLACE ";" "\n  " missing_text "${missing}")
  string(REPLACE ";" "\n  " extra_text "${extra}")
  message(FATAL_ERROR "exported symbols differ from ${EXPECTED}\n"
                      "missing:\n  ${missing_text}\nunexpected:\n  ${extra_text}\n"
                      "(a new entry point: add it to the list in the same commit)")
endif()
list(LENGTH actual count)
message(STATUS "${count} exported symbols match ${EXPECTED}")
