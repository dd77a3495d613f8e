include(CMakePackageConfigHelpers)
install(TARGETS mycoll EXPORT mycollTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mycollTargets NAMESPACE mycoll:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mycoll)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mycollConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mycollConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mycoll)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mycollConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mycollConfig.cmake ${PROJECT_BINARY_DIR}/mycollConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mycoll)
configure_file(${PROJECT_SOURCE_DIR}/cmake/mycoll.pc.in ${PROJECT_BINARY_DIR}/mycoll.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mycoll.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET mycoll-perf)
  install(TARGETS mycoll-perf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(PROGRAMS ${PROJECT_SOURCE_DIR}/tools/flight/mycoll-flight DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET mycoll-perf-mpi)  # loaded by mycoll-perf for --vs mpi (tools/mycoll-perf/mpi_compare.h)
  install(TARGETS mycoll-perf-mpi LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/mycoll)
endif()
