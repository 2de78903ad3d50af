# GitVersion.cmake — writes OUTPUT (the version header) from INPUT (version.h.in) with the
# current commit, at every build, touching OUTPUT only when its text changes (so nothing
# rebuilds needlessly). Run as: cmake -DINPUT=... -DOUTPUT=... -DSOURCE_DIR=...
#   -DPROJECT_VERSION=... -P GitVersion.cmake
#
# In a git checkout the commit comes from git (with "-dirty" for uncommitted changes). In a
# source archive made by `git archive` (no .git), it comes from cmake/archive-commit.txt, which
# .gitattributes marks export-subst: git writes the archived commit into it. Only a tree copied
# some other way says "unknown".
set(CPPARITY_GIT_COMMIT "unknown")
file(STRINGS "${SOURCE_DIR}/cmake/archive-commit.txt" archived LIMIT_COUNT 1)
if(archived MATCHES "^([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])[0-9a-f]*$")
  set(CPPARITY_GIT_COMMIT "${CMAKE_MATCH_1}")
endif()
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git") # not the commit of a repository around an archive
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
