# embedding-reference-server: the gRPC-only baseline for benchmarks (scripts/bench-service).
# Included from service/CMakeLists.txt. It links only emb::proto and Abseil: no table, no gather.
add_executable(embedding-reference-server ${CMAKE_CURRENT_LIST_DIR}/reference_server_main.cc)
set_target_properties(embedding-reference-server PROPERTIES OUTPUT_NAME embedding-reference-server)
target_link_libraries(embedding-reference-server
  PRIVATE emb::proto gRPC::grpc++_reflection absl::flags absl::flags_config absl::flags_parse
          absl::flags_usage absl::strings absl::synchronization Threads::Threads)
emb_set_warnings(embedding-reference-server)
