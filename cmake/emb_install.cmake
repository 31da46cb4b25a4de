# What `cmake --install` puts under the prefix (GNUInstallDirs), in two components:
#   Runtime      bin/embedding-server, bin/embedding-client (what the container image holds,
#                deploy/docker/)
#   Development  the C++ client library (lib/libemb_client.a, libemb_proto.a), its headers under
#                include/emb/ with the paths the sources use (client/embedding_client.h,
#                kernels/data_type.h, proto/convert/data_type_proto.h, embedding/v1/*.pb.h, ...;
#                in a folder of their own, so that names like client/ stay out of include/),
#                the .proto files beside their headers, and the CMake package `embedding`:
#                  find_package(embedding CONFIG REQUIRED)
#                  target_link_libraries(app PRIVATE emb::client)
#                which finds Abseil, Protobuf and gRPC for the consumer (find_dependency).
# And, only when asked for (`cmake --install build --component benchmark`), the gRPC-only
# reference server of bench/bench-service. tests/install/ checks the whole round trip.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS embedding-server embedding-client RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT Runtime)
if(TARGET embedding-reference-server)  # EMB_BUILD_BENCH
  install(TARGETS embedding-reference-server RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          COMPONENT benchmark EXCLUDE_FROM_ALL)
endif()

# The library and the two it exposes, exported as emb::client, emb::proto and emb::data_type
# (the names they have in this tree). Installed, their include directory is include/emb/; in the
# build tree it stays the per-library layer (emb_expose).
set(include_dir ${CMAKE_INSTALL_INCLUDEDIR}/emb)
set_target_properties(emb_client PROPERTIES EXPORT_NAME client)
set_target_properties(emb_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(emb_data_type PROPERTIES EXPORT_NAME data_type)
foreach(target emb_client emb_proto emb_data_type)
  target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${include_dir}>)
endforeach()
install(TARGETS emb_client emb_proto emb_data_type EXPORT embeddingTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development)
install(FILES client/embedding_client.h client/features.h client/admin_client.h client/call_deadline.h
              client/bench.h
        DESTINATION ${include_dir}/client COMPONENT Development)
install(FILES kernels/data_type.h DESTINATION ${include_dir}/kernels
        COMPONENT Development)
install(FILES proto/convert/data_type_proto.h DESTINATION ${include_dir}/proto/convert
        COMPONENT Development)
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/gen/ DESTINATION ${include_dir}
        COMPONENT Development FILES_MATCHING PATTERN "*.h")
install(DIRECTORY proto/embedding proto/grpc DESTINATION ${include_dir}
        COMPONENT Development FILES_MATCHING PATTERN "*.proto")

set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/embedding)
install(EXPORT embeddingTargets NAMESPACE emb:: DESTINATION ${config_dir}
        COMPONENT Development)
configure_package_config_file(cmake/embeddingConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/embeddingConfig.cmake
                              INSTALL_DESTINATION ${config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/embeddingConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/embeddingConfig.cmake
              ${PROJECT_BINARY_DIR}/embeddingConfigVersion.cmake
        DESTINATION ${config_dir} COMPONENT Development)
