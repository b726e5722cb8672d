# Installs the header, libddph.so, the plugins (see DdphPlugin.cmake), the ddph
# tool, a CMake package (find_package(ddphooks)) and a pkg-config file.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/abi/include/ddph DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ddph_abi EXPORT ddphooksTargets)
if(TARGET ddph)
  install(TARGETS ddph EXPORT ddphooksTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
if(TARGET ddph_tool)
  install(TARGETS ddph_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ddphooks/configs
  FILES_MATCHING PATTERN "*.yaml")

install(EXPORT ddphooksTargets NAMESPACE ddphooks:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddphooks)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ddphooksConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ddphooksConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddphooks
  PATH_VARS CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ddphooksConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ddphooksConfig.cmake ${PROJECT_BINARY_DIR}/ddphooksConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ddphooks)

file(RELATIVE_PATH DDPH_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
# DLPack has no pkg-config file to name in Requires: its include directory
# goes into Cflags, unless it is one the compiler searches anyway.
get_target_property(ddph_dlpack_includes dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
set(DDPH_PC_DLPACK_CFLAGS "")
foreach(dir ${ddph_dlpack_includes})
  if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES AND NOT dir STREQUAL "/usr/include")
    string(APPEND DDPH_PC_DLPACK_CFLAGS " -I${dir}")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/ddphooks.pc.in ${PROJECT_BINARY_DIR}/ddphooks.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ddphooks.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
