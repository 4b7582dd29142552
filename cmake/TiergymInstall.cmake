# `cmake --install`: the programs, the shared libraries they load (phasemark shim, software
# backend agent), every layer's library and public headers (cmake/TiergymLayers.cmake), and a
# CMake package: find_package(tiergym) gives tiergym::base, tiergym::traces,
# tiergym::estimator, tiergym::env, tiergym::protocol, tiergym::client, tiergym::server,
# tiergym::profiler, ... (tests/install/ builds a consumer against it).
include(CMakePackageConfigHelpers)

set(_programs tiergym-prof tiergym-import-mckernel tiergym-testapp)
if(NOT TIERGYM_PROFILER_ONLY)
  list(PREPEND _programs tiergym)
  # msgpack-c header-only, linked privately by the protocol, the server and the client.
  install(TARGETS tiergym_msgpack EXPORT tiergymTargets)
endif()
install(TARGETS ${_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# tiergym-prof finds the agent as ../lib/ beside itself.
install(TARGETS phasemark tiergym_swsample LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

set(_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tiergym)
install(EXPORT tiergymTargets NAMESPACE tiergym:: DESTINATION ${_config_dir})
configure_package_config_file(cmake/tiergymConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tiergymConfig.cmake INSTALL_DESTINATION ${_config_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tiergymConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tiergymConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tiergymConfigVersion.cmake
        DESTINATION ${_config_dir})
