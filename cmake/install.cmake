# cmake/install.cmake — `cmake --install`: the zerolab command, the libraries and their headers, and
# a CMake package, so that another project can
#   find_package(zerolab REQUIRED)
#   target_link_libraries(app PRIVATE zerolab::zerolab)
# zerolab::zerolab is an interface target bringing the run layer (run/train.hpp's train()) and every
# library below it, with their include directories: <prefix>/include/zerolab (src/'s parts as
# "core/...", "run/...") and <prefix>/include/zerolab/sim (the simulator's headers).
include(CMakePackageConfigHelpers)

add_library(zerolab_library INTERFACE)
target_link_libraries(zerolab_library INTERFACE zerolab_run)
set_target_properties(zerolab_library PROPERTIES EXPORT_NAME zerolab)
add_library(zerolab::zerolab ALIAS zerolab_library)

set(ZL_EXPORTED_TARGETS zerolab_library zerolab_run zerolab_ckpt zerolab_engines zerolab_model
  zerolab_ops zerolab_optim zerolab_comm zerolab_mpi zerolab_sim zerolab_core)
if(ZL_HAVE_CUDA)
  list(APPEND ZL_EXPORTED_TARGETS zerolab_cuda zerolab_sim_cuda)
endif()
if(TARGET zerolab_nccl)
  list(APPEND ZL_EXPORTED_TARGETS zerolab_nccl)
endif()

set(ZL_CONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/zerolab)
install(TARGETS zerolab RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${ZL_EXPORTED_TARGETS} EXPORT zerolabTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zerolab
  FILES_MATCHING PATTERN "*.hpp" PATTERN "cli" EXCLUDE PATTERN "bench" EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sim/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zerolab/sim
  FILES_MATCHING PATTERN "*.hpp")
install(EXPORT zerolabTargets NAMESPACE zerolab:: DESTINATION ${ZL_CONFIG_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zerolabConfig.cmake.in
  ${PROJECT_BINARY_DIR}/zerolabConfig.cmake INSTALL_DESTINATION ${ZL_CONFIG_DIR})
# 0.x: a minor release may change the interface, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zerolabConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zerolabConfig.cmake
  ${PROJECT_BINARY_DIR}/zerolabConfigVersion.cmake DESTINATION ${ZL_CONFIG_DIR})
