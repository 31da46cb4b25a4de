# Run at build time (POST_BUILD, from emb_add_gtest_suites in emb_helpers.cmake): lists the
# GoogleTest suites of one test executable and writes a CTest file with one test per suite.
#   cmake -D EXE=... -D OUT=... -D NAME=... -D WORKDIR=... -D LABELS=a,b -P gtest_suites.cmake
# A suite whose every test skipped (gtest: "[  PASSED  ] 0 tests") is reported as skipped; one
# with some tests run and some skipped (a GPU instance of a parameterized suite on a CPU machine)
# passes.
execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing
                RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}):\n${err}")
endif()
# Suite lines start in the first column and end with a dot (typed suites add "  # TypeParam =
# ..."); test lines are indented. gmock_main's "Running main() from ..." line has spaces.
string(REGEX MATCHALL "(^|\n)[^ \n]+\\.( +#[^\n]*)?" lines "${listing}")
string(REPLACE "," ";" labels "${LABELS}")
set(content "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^\n?([^ ]+)\\..*" "\\1" suite "${line}")
  set(test "${NAME}:${suite}")
  string(APPEND content
    "add_test([==[${test}]==] [==[${EXE}]==] [==[--gtest_filter=${suite}.*]==])\n"
    "set_tests_properties([==[${test}]==] PROPERTIES WORKING_DIRECTORY [==[${WORKDIR}]==]"
    " SKIP_REGULAR_EXPRESSION [==[\\[  PASSED  \\] 0 tests]==] LABELS [==[${labels}]==])\n")
endforeach()
if(content STREQUAL "")
  message(FATAL_ERROR "${EXE} lists no GoogleTest suite")
endif()
file(WRITE "${OUT}" "${content}")
