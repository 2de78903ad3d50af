# ExpectExit.cmake — ctest helper: runs COMMAND with the ;-list ARGS and fails unless it exits
# with EXPECT_EXIT. Optional checks:
#   EXPECT_STDERR  text standard error must contain
#   EXPECT_STDOUT  regular expression standard output must match
#   REMOVE         ;-list of files removed before the run (cpparity never overwrites)
#   ABSENT         ;-list of files that must not exist after the run
#   PRESENT        ;-list of files that must exist after the run
#   SKIP_IF        a command: when it succeeds, print "SKIPPED: " SKIP_REASON and run nothing
#                  (the test's SKIP_REGULAR_EXPRESSION "SKIPPED: " reports it skipped)
#   cmake -DCOMMAND=... -DARGS=a;b -DEXPECT_EXIT=2 -DEXPECT_STDERR=text -P ExpectExit.cmake
if(DEFINED SKIP_IF)
  execute_process(COMMAND ${SKIP_IF} RESULT_VARIABLE skip_code OUTPUT_QUIET ERROR_QUIET)
  if(skip_code STREQUAL "0")
    message("SKIPPED: ${SKIP_REASON}")
    return()
  endif()
endif()
foreach(file IN LISTS REMOVE)
  file(REMOVE "${file}")
endforeach()
execute_process(COMMAND ${COMMAND} ${ARGS} RESULT_VARIABLE code OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT code STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "expected exit ${EXPECT_EXIT}, got ${code}\nstdout: ${out}\nstderr: ${err}")
endif()
if(DEFINED EXPECT_STDERR)
  string(FIND "${err}" "${EXPECT_STDERR}" where)
  if(where EQUAL -1)
    message(FATAL_ERROR "stderr does not contain '${EXPECT_STDERR}':\n${err}")
  endif()
endif()
if(DEFINED EXPECT_STDOUT AND NOT out MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "stdout does not match '${EXPECT_STDOUT}':\n${out}")
endif()
foreach(file IN LISTS ABSENT)
  if(EXISTS "${file}")
    message(FATAL_ERROR "${file} exists but must not")
  endif()
endforeach()
foreach(file IN LISTS PRESENT)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "${file} is missing")
  endif()
endforeach()
message(STATUS "exit ${code} as expected")
