# Writes popkit/version.h (cmake/version.h.in) with the source tree's git revision at
# build time, so that `--version` and the run file name the commit the binary was built
# from, not the one the build folder was configured at. configure_file rewrites the
# header only when its text changes, so an unchanged revision recompiles nothing.
#   cmake -DSOURCE_DIR=... -DIN=... -DOUT=... -DPROJECT_VERSION=... -DCMAKE_BUILD_TYPE=...
#         -P git_revision.cmake
execute_process(COMMAND git -C ${SOURCE_DIR} rev-parse --short HEAD
  OUTPUT_VARIABLE POPKIT_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT POPKIT_GIT_REVISION)
  set(POPKIT_GIT_REVISION "unknown")
endif()
configure_file(${IN} ${OUT} @ONLY)
