# Warnings for one of our targets: -Wall -Wextra, and -Werror when EMB_WERROR is ON. Under clang
# (the sanitizer and fuzz builds that CI runs) also -Wthread-safety, which checks the
# ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations.
function(emb_set_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
                         $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:Clang>>:-Wthread-safety>)
  if(EMB_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()

# emb_add_test(NAME foo_test SOURCES foo_test.cc DEPS emb::service [GPU] [LABELS ...])
# A GoogleTest binary run through CTest. GPU tests get the label "gpu" (CI runs ctest -LE gpu).
function(emb_add_test)
  cmake_parse_arguments(T "GPU" "NAME" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} emb::testing GTest::gmock_main)
  emb_set_warnings(${T_NAME})
  set(labels ${T_LABELS})
  if(T_GPU)
    list(APPEND labels gpu)
  endif()
  gtest_discover_tests(${T_NAME} PROPERTIES LABELS "${labels}" DISCOVERY_TIMEOUT 60)
endfunction()
