# GitVersion.cmake — writes OUTPUT (the version header) from INPUT (version.h.in) with the
# current commit, at every build, touching OUTPUT only when its text changes (so nothing
# rebuilds needlessly). Run as: cmake -DINPUT=... -DOUTPUT=... -DSOURCE_DIR=...
#   -DPROJECT_VERSION=... -P GitVersion.cmake
set(CPPARITY_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET RESULT_VARIABLE result)
  if(result EQUAL 0 AND commit)
    set(CPPARITY_GIT_COMMIT "${commit}")
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
      WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE changes ERROR_QUIET)
    if(changes)
      string(APPEND CPPARITY_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()
configure_file(${INPUT} ${OUTPUT} @ONLY)
