# Fails when TARGET's link command matches PATTERN (EXPECT=absent) or does not
# (EXPECT=present). Run as a CTest: cmake -DTARGET=... -DGENERATOR=... -DMAKE_PROGRAM=...
# -DBINARY_DIR=... -DLINK_TXT=... -DPATTERN=... -DEXPECT=... -P check_link.cmake
if(GENERATOR STREQUAL "Ninja")
  # Every command that builds TARGET, in dependency order: the link comes last.
  execute_process(COMMAND ${MAKE_PROGRAM} -C ${BINARY_DIR} -t commands ${TARGET}
    OUTPUT_VARIABLE commands RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "ninja -t commands ${TARGET} failed: ${err}")
  endif()
  string(STRIP "${commands}" commands)
  string(FIND "${commands}" "\n" last REVERSE)
  math(EXPR last "${last} + 1")
  string(SUBSTRING "${commands}" ${last} -1 link)
else()
  file(READ ${LINK_TXT} link)
endif()
if(NOT link MATCHES "-o [^ ]*${TARGET}( |$)")
  message(FATAL_ERROR "no link command of ${TARGET} found; got:\n${link}")
endif()
if(EXPECT STREQUAL "absent" AND link MATCHES "${PATTERN}")
  message(FATAL_ERROR "${TARGET} links ${PATTERN}, which its library must not depend on:\n${link}")
elseif(EXPECT STREQUAL "present" AND NOT link MATCHES "${PATTERN}")
  message(FATAL_ERROR "${TARGET} should link ${PATTERN} but its link command has none:\n${link}")
endif()
message(STATUS "${TARGET}: ${PATTERN} ${EXPECT} from the link command, as it should be")
