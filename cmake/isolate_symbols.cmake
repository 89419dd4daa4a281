# cmake -DIN=obj -DOUT=obj -DKEEP=symbol -DSUFFIX=s -DNM=nm -DOBJCOPY=objcopy -P isolate_symbols.cmake
#
# Renames every symbol IN defines, except KEEP, to name+SUFFIX, writing OUT. One kernel
# level's object instantiates the same inline functions and templates as every other
# level (Eigen's GEMM, std::min...), each compiled for its own -march; left as they are,
# the linker would keep one copy of each COMDAT group for all levels, and the baseline
# level could end up calling AVX-512 code. Renamed, each level keeps its own copies.
# Local symbols are renamed too: a COMDAT group's signature may be one.
foreach(var IN ITEMS IN OUT KEEP SUFFIX NM OBJCOPY)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "isolate_symbols: ${var} is not set")
  endif()
endforeach()
execute_process(COMMAND ${NM} --defined-only --format=posix ${IN}
  OUTPUT_VARIABLE listing RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "isolate_symbols: ${NM} ${IN} failed: ${err}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(map "")
set(kept FALSE)
foreach(line IN LISTS lines)
  # posix format: "name type value [size]"; names never contain spaces here.
  if(line MATCHES "^([^ ]+) ")
    set(name "${CMAKE_MATCH_1}")
    if(name STREQUAL KEEP)
      set(kept TRUE)
    else()
      string(APPEND map "${name} ${name}${SUFFIX}\n")
    endif()
  endif()
endforeach()
if(NOT kept)
  message(FATAL_ERROR "isolate_symbols: ${IN} does not define ${KEEP}")
endif()
file(WRITE ${OUT}.map "${map}")
execute_process(COMMAND ${OBJCOPY} --redefine-syms=${OUT}.map ${IN} ${OUT}
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "isolate_symbols: ${OBJCOPY} failed: ${err}")
endif()
