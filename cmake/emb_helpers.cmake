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

# emb_add_test(NAME foo_tests SOURCES a_test.cc b_test.cc DEPS emb::service [GPU] [LABELS ...]
#              [NO_DISCOVER])
# A GoogleTest binary run through CTest, one CTest test per GoogleTest suite ("foo_tests:Suite";
# `ctest -R Suite`, or the binary's --gtest_filter for one test). A suite's tests share a process:
# under the sanitizers a process costs a few tenths of a second to start and end, which one test a
# process paid about 1,100 times a CI run. GPU tests get the label "gpu" (CI runs ctest -LE gpu).
# NO_DISCOVER leaves the registration to the caller (to label or run some suites differently).
function(emb_add_test)
  cmake_parse_arguments(T "GPU;NO_DISCOVER" "NAME" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} emb::testing GTest::gmock_main)
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  emb_expose(${T_NAME} PRIVATE ${folder})  # the test's own folder, e.g. tests/kernels/
  emb_set_warnings(${T_NAME})
  set(labels ${T_LABELS})
  if(T_GPU)
    list(APPEND labels gpu)
  endif()
  if(NOT T_NO_DISCOVER)
    emb_add_gtest_suites(${T_NAME} ${labels})
  endif()
endfunction()

# emb_add_gtest_suites(target [label...]): after each build of target, cmake/gtest_suites.cmake
# lists its suites into a CTest file, which CTest reads (as gtest_discover_tests does per test).
function(emb_add_gtest_suites target)
  set(tests_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake)
  list(JOIN ARGN "," labels)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D EXE=$<TARGET_FILE:${target}> -D OUT=${tests_file}
            -D NAME=${target} -D WORKDIR=${CMAKE_CURRENT_BINARY_DIR} -D LABELS=${labels}
            -P ${PROJECT_SOURCE_DIR}/cmake/gtest_suites.cmake
    BYPRODUCTS ${tests_file}
    VERBATIM)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake)
  file(WRITE ${include_file}
       "if(EXISTS [==[${tests_file}]==])\n  include([==[${tests_file}]==])\n"
       "else()\n  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()

# emb_expose(target PUBLIC|INTERFACE path...): the project headers that `target`, and every
# target that links it, may include: each path (a folder or one header, relative to the project
# root) is linked under build/layers/<target>/, which becomes the target's include directory.
# The project root itself is on no include path, so a header outside every exposed path of a
# target's dependencies is not found: an include that runs against the layering
# (docs/architecture.md) fails to compile. tests/tools/layering_check.py checks the same rules,
# third-party headers included, on the sources.
function(emb_expose target scope)
  set(root ${CMAKE_BINARY_DIR}/layers/${target})
  foreach(path IN LISTS ARGN)
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${path})
      message(FATAL_ERROR "emb_expose(${target}): ${path} does not exist")
    endif()
    get_filename_component(parent ${root}/${path} DIRECTORY)
    # A folder that an earlier configure exposed whole is a link into the sources: remove it, or
    # the links made under it would land in the sources, over the files themselves.
    set(dir ${parent})
    while(NOT dir STREQUAL root AND dir MATCHES "^${root}/")
      if(IS_SYMLINK ${dir})
        file(REMOVE ${dir})
      endif()
      get_filename_component(dir ${dir} DIRECTORY)
    endwhile()
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${path} ${root}/${path} SYMBOLIC)
  endforeach()
  # Build tree only: an installed library gets its headers' install folder instead
  # (cmake/emb_install.cmake).
  target_include_directories(${target} ${scope} $<BUILD_INTERFACE:${root}>)
endfunction()
