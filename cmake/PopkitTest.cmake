# One function adds a Boost.Test executable, one more registers each of its suites as a
# CTest entry named <area>.<suite> with labels; a third registers a CLI test script.

# A sanitized build runs several times slower (AddressSanitizer about 2-3x, ThreadSanitizer
# 5-15x): every test's timeout is scaled by POPKIT_TIMEOUT_SCALE there, so a timeout still
# catches a hang without failing a test that is merely slow.
if(POPKIT_SANITIZE)
  set(POPKIT_TIMEOUT_SCALE 5)
else()
  set(POPKIT_TIMEOUT_SCALE 1)
endif()

# popkit_timeout(OUT seconds): the TIMEOUT to give a test that takes `seconds` at most
# in an unsanitized build.
function(popkit_timeout out seconds)
  math(EXPR scaled "${seconds} * ${POPKIT_TIMEOUT_SCALE}")
  set(${out} ${scaled} PARENT_SCOPE)
endfunction()

# popkit_test_executable(TARGET SOURCES file... LIBS lib...)
function(popkit_test_executable target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} Boost::unit_test_framework popkit::flags)
  target_compile_definitions(${target} PRIVATE BOOST_TEST_DYN_LINK
    POPKIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}" POPKIT_BINARY_DIR="${PROJECT_BINARY_DIR}")
endfunction()

# popkit_test_suite(AREA TARGET SUITE [LABELS label...] [TIMEOUT seconds])
function(popkit_test_suite area target suite)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  popkit_timeout(timeout ${ARG_TIMEOUT})
  add_test(NAME ${area}.${suite} COMMAND ${target} --run_test=${suite} --color_output=false)
  set_tests_properties(${area}.${suite} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${timeout})
endfunction()

# popkit_cli_test(NAME name COMMAND cmd... [LABELS ...] [TIMEOUT s]): a test run as a user
# runs the tools; the tools' directory is on PATH.
function(popkit_cli_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS cli)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  popkit_timeout(timeout ${ARG_TIMEOUT})
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_COMMAND})
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${timeout}
    ENVIRONMENT "PATH=$<TARGET_FILE_DIR:popplan>:$ENV{PATH};POPKIT_SOURCE_DIR=${PROJECT_SOURCE_DIR};POPKIT_BINARY_DIR=${PROJECT_BINARY_DIR};POPKIT_SANITIZE=${POPKIT_SANITIZE}")
endfunction()
