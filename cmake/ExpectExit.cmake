# ExpectExit.cmake — ctest helper: runs COMMAND with the ;-list ARGS and fails unless it exits
# with EXPECT_EXIT and its standard error contains EXPECT_STDERR.
#   cmake -DCOMMAND=... -DARGS=a;b -DEXPECT_EXIT=2 -DEXPECT_STDERR=text -P ExpectExit.cmake
execute_process(COMMAND ${COMMAND} ${ARGS} RESULT_VARIABLE code OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT code STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "expected exit ${EXPECT_EXIT}, got ${code}\nstdout: ${out}\nstderr: ${err}")
endif()
string(FIND "${err}" "${EXPECT_STDERR}" where)
if(where EQUAL -1)
  message(FATAL_ERROR "stderr does not contain '${EXPECT_STDERR}':\n${err}")
endif()
