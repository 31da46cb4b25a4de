# EMB_SANITIZE: build every target (ours, the generated protos and the tests) with clang's
# sanitizers, for scripts/sanitize. "address,undefined" (ASan + UBSan) or "thread" (TSan); empty
# (the default) for none. UBSan findings abort (-fno-sanitize-recover), so a finding fails its test.
# The CUDA backend must be off (-DEMB_ENABLE_CUDA=OFF): nvcc-compiled code is not instrumented.
set(EMB_SANITIZE "" CACHE STRING "Sanitizers to build with: address,undefined | thread | empty")
set_property(CACHE EMB_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")
# EMB_FUZZ: libFuzzer builds of tests/fuzz/ (scripts/fuzz). Needs EMB_SANITIZE=address,undefined;
# every object gets libFuzzer's coverage instrumentation (-fsanitize=fuzzer-no-link) and the
# fuzz targets link libFuzzer's main. Without it the targets build with a replay main instead.
option(EMB_FUZZ "Build the fuzz targets with libFuzzer (clang, EMB_SANITIZE=address,undefined)" OFF)
if(EMB_FUZZ AND NOT EMB_SANITIZE STREQUAL "address,undefined")
  message(FATAL_ERROR "EMB_FUZZ needs -DEMB_SANITIZE=address,undefined")
endif()

if(EMB_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "EMB_SANITIZE needs clang (CXX=clang++), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(EMB_HAVE_CUDA)
    message(FATAL_ERROR "EMB_SANITIZE needs -DEMB_ENABLE_CUDA=OFF")
  endif()
  if(EMB_SANITIZE STREQUAL "address,undefined")
    set(emb_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all)
    if(EMB_FUZZ)
      add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
    endif()
  elseif(EMB_SANITIZE STREQUAL "thread")
    set(emb_sanitize_flags -fsanitize=thread)
  else()
    message(FATAL_ERROR "EMB_SANITIZE='${EMB_SANITIZE}': use address,undefined or thread")
  endif()
  # Directory-wide on purpose, the one exception to target_* only: every object that runs must be
  # instrumented, or TSan misses half of each race and ASan the bounds of its buffers.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${emb_sanitize_flags};-fno-omit-frame-pointer>")
  add_link_options(${emb_sanitize_flags})
  if(EMB_SANITIZE STREQUAL "thread")
    # gRPC's completion ordering as TSan edges (tests/sanitizers/tsan_grpc_edges.cc says why),
    # in every target defined after this line, so in every executable.
    add_library(emb_tsan_grpc_edges OBJECT
                ${PROJECT_SOURCE_DIR}/tests/sanitizers/tsan_grpc_edges.cc)
    target_link_libraries(emb_tsan_grpc_edges PRIVATE gRPC::grpc absl::status)
    emb_set_warnings(emb_tsan_grpc_edges)
    link_libraries(emb_tsan_grpc_edges)
  endif()
  message(STATUS "emb: sanitizers ${EMB_SANITIZE}")
endif()
