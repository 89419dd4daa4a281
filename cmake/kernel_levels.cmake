# popkit_kernel_table(TARGET NAME SOURCE)
#
# Compiles one kind's kernel table (engine/kernels/kernels.h) once per level of
# POPKIT_KERNEL_LEVELS, each with that level's -march and its table symbol
# popkit_kernels_<NAME>_<level> (POPKIT_KERNEL_SYMBOL; POPKIT_KERNEL_LEVEL is the level's
# name), and adds the objects to TARGET. With several levels, each object's other symbols
# are renamed (cmake/isolate_symbols.cmake), so levels never share a copy of an inline
# function or template (Eigen's GEMM among them).
function(popkit_kernel_table target name source)
  list(LENGTH POPKIT_KERNEL_LEVELS n_levels)
  foreach(level IN LISTS POPKIT_KERNEL_LEVELS)
    string(MAKE_C_IDENTIFIER "popkit_kernels_${name}_${level}" symbol)
    set(lib ${symbol}_object)
    add_library(${lib} OBJECT ${source})
    target_link_libraries(${lib} PRIVATE popkit::planner Eigen3::Eigen fmt::fmt popkit::flags)
    target_compile_definitions(${lib} PRIVATE POPKIT_KERNEL_SYMBOL=${symbol}
      POPKIT_KERNEL_LEVEL="${level}")
    if(NOT level STREQUAL "native")
      target_compile_options(${lib} PRIVATE -march=${level} -mtune=generic)
    endif()
    if(level MATCHES "v3|v4|native" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC 12's AVX intrinsic headers, through Eigen: false (maybe-)uninitialized warnings
      # on _mm*_undefined_ps (bug 105593); the sanitizer builds report the definite kind.
      target_compile_options(${lib} PRIVATE -Wno-maybe-uninitialized -Wno-uninitialized)
    endif()
    if(n_levels GREATER 1)
      set(isolated ${CMAKE_CURRENT_BINARY_DIR}/${symbol}.o)
      add_custom_command(OUTPUT ${isolated}
        COMMAND ${CMAKE_COMMAND} -DIN=$<TARGET_OBJECTS:${lib}> -DOUT=${isolated} -DKEEP=${symbol}
                -DSUFFIX=.${symbol} -DNM=${CMAKE_NM} -DOBJCOPY=${CMAKE_OBJCOPY}
                -P ${PROJECT_SOURCE_DIR}/cmake/isolate_symbols.cmake
        DEPENDS ${lib} $<TARGET_OBJECTS:${lib}> ${PROJECT_SOURCE_DIR}/cmake/isolate_symbols.cmake
        COMMENT "Isolating the symbols of the ${level} ${name} kernels" COMMAND_EXPAND_LISTS
        VERBATIM)
      set_source_files_properties(${isolated} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
      target_sources(${target} PRIVATE ${isolated})
    else()
      target_sources(${target} PRIVATE $<TARGET_OBJECTS:${lib}>)
    endif()
  endforeach()
endfunction()
