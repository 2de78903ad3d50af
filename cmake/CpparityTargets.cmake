# CpparityTargets.cmake — how cpparity declares its libraries and tests.
#
# cpparity_add_library(NAME SOURCES ... [LINKS ...] [OPTIONS ...] [DEFINITIONS ...])
#   A static library NAME and, when CPPARITY_SANITIZED_TESTS is on, NAME-sanitized: the same
#   sources built with AddressSanitizer + UBSan, linked against the sanitized copies of LINKS that
#   are cpparity libraries. OPTIONS are private compile options, DEFINITIONS private
#   preprocessor definitions (NAME=VALUE).
#
# Warnings are on everywhere (CPPARITY_WARNINGS); turning them into errors is the builder's
# choice, through CMake's own switch CMAKE_COMPILE_WARNING_AS_ERROR (on in `make test` and CI,
# off by default, so a user's compiler or build type can never break their build).
#
# CPPARITY_COVERAGE_FLAGS (a list, empty by default) are added last to the compile options of
# the libraries under distributed/ only: scripts/coverage.sh measures the implementation under test
# at -O0 with --coverage while the reference, the harness and the plugins it drives stay optimised
# (the runs it measures are mostly the float64 reference's work).
# cpparity_add_unit_test(NAME SOURCE LINKS ...)
#   A Criterion executable NAME registered with ctest as unit/NAME (label unit) and its sanitized
#   copy as sanitized/NAME (label sanitized).

set(CPPARITY_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wvla)
set(CPPARITY_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all
    -fno-omit-frame-pointer)
set_property(GLOBAL PROPERTY CPPARITY_LIBRARIES "")

function(_cpparity_sanitized_links out)
  get_property(ours GLOBAL PROPERTY CPPARITY_LIBRARIES)
  set(result "")
  foreach(link IN LISTS ARGN)
    if(link IN_LIST ours)
      list(APPEND result "${link}-sanitized")
    else()
      list(APPEND result "${link}")
    endif()
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

function(cpparity_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINKS;OPTIONS;DEFINITIONS" ${ARGN})
  set(variants ${name})
  if(CPPARITY_SANITIZED_TESTS)
    list(APPEND variants ${name}-sanitized)
  endif()
  foreach(target IN LISTS variants)
    add_library(${target} STATIC ${ARG_SOURCES})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
    target_compile_options(${target} PRIVATE ${CPPARITY_WARNINGS} ${ARG_OPTIONS})
    if(CPPARITY_COVERAGE_FLAGS AND CMAKE_CURRENT_SOURCE_DIR MATCHES "^${PROJECT_SOURCE_DIR}/distributed")
      target_compile_options(${target} PRIVATE ${CPPARITY_COVERAGE_FLAGS})
    endif()
    target_compile_definitions(${target} PRIVATE ${ARG_DEFINITIONS})
    if(target STREQUAL name)
      target_link_libraries(${target} PUBLIC ${ARG_LINKS})
    else()
      _cpparity_sanitized_links(links ${ARG_LINKS})
      target_link_libraries(${target} PUBLIC ${links})
      target_compile_options(${target} PUBLIC ${CPPARITY_SANITIZE_FLAGS})
      target_link_options(${target} PUBLIC ${CPPARITY_SANITIZE_FLAGS})
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY CPPARITY_LIBRARIES ${name})
endfunction()

function(cpparity_add_unit_test name)
  cmake_parse_arguments(ARG "" "SOURCE" "LINKS" ${ARGN})
  add_executable(${name} ${ARG_SOURCE})
  target_compile_options(${name} PRIVATE ${CPPARITY_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_LINKS} PkgConfig::CRITERION)
  add_test(NAME unit/${name} COMMAND ${name} --jobs=1)
  set_tests_properties(unit/${name} PROPERTIES LABELS unit TIMEOUT 300)
  if(CPPARITY_SANITIZED_TESTS)
    add_executable(${name}-sanitized ${ARG_SOURCE})
    target_compile_options(${name}-sanitized PRIVATE ${CPPARITY_WARNINGS})
    _cpparity_sanitized_links(links ${ARG_LINKS})
    target_link_libraries(${name}-sanitized PRIVATE ${links} PkgConfig::CRITERION)
    add_test(NAME sanitized/${name} COMMAND ${name}-sanitized --jobs=1)
    # Criterion reports a test before LeakSanitizer runs at the worker's exit, so a leak must
    # fail the test through its output.
    set_tests_properties(sanitized/${name} PROPERTIES LABELS sanitized TIMEOUT 600
      FAIL_REGULAR_EXPRESSION "ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:"
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
endfunction()
