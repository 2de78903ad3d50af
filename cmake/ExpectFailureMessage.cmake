# ExpectFailureMessage.cmake — ctest helper: runs COMMAND with the ;-list ARGS and fails unless it
# exits non-zero (any code: mpirun reports MPI_Abort's code in its own way) and its standard
# output or standard error contains EXPECT_MESSAGE.
#   cmake -DCOMMAND=... -DARGS=a;b -DEXPECT_MESSAGE=text -P ExpectFailureMessage.cmake
execute_process(COMMAND ${COMMAND} ${ARGS} RESULT_VARIABLE code OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(code STREQUAL "0")
  message(FATAL_ERROR "expected a non-zero exit, got 0\nstdout: ${out}\nstderr: ${err}")
endif()
string(FIND "${out}${err}" "${EXPECT_MESSAGE}" where)
if(where EQUAL -1)
  message(FATAL_ERROR "output does not contain '${EXPECT_MESSAGE}' (exit ${code}):\n"
    "stdout: ${out}\nstderr: ${err}")
endif()
message(STATUS "exit ${code}; found '${EXPECT_MESSAGE}'")
