# `cmake --install build --prefix P`: headers (with the generated .inc
# files), libraries, tools, runtimes, scripts, the plugin, the emulator and
# the docs, and P/lib/cmake/fff/FFFConfig.cmake exporting the FFF:: targets.

include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

# Include dirs of every fff library, in the build tree and installed.
add_library(FFFHeaders INTERFACE)
set_target_properties(FFFHeaders PROPERTIES EXPORT_NAME Headers)
target_include_directories(FFFHeaders INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# In the build tree, MLIR's headers and definitions go with fff's to targets
# outside fff's directories (the Python wheel's extension); installed,
# FFFConfig.cmake adds those of the MLIR it finds.
foreach(dir ${MLIR_INCLUDE_DIRS} ${LLVM_INCLUDE_DIRS})
  target_include_directories(FFFHeaders SYSTEM INTERFACE $<BUILD_INTERFACE:${dir}>)
endforeach()
foreach(definition ${LLVM_DEFINITIONS_LIST})
  target_compile_options(FFFHeaders INTERFACE $<BUILD_INTERFACE:${definition}>)
endforeach()

set(FFF_COMPONENT_LIBRARIES
  FFFDialect FFFUtils FFFTransforms FFFGenericTransforms FFFConversion
  FFFPipelines FFFTargetPTX FFFRegistration)
foreach(library ${FFF_COMPONENT_LIBRARIES})
  target_link_libraries(${library} INTERFACE FFFHeaders)
endforeach()

# FFF::fff: what an embedding compiler links.
add_library(fff INTERFACE)
target_link_libraries(fff INTERFACE FFFRegistration FFFHeaders)
set_target_properties(fff_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(fff_cuda_runtime PROPERTIES EXPORT_NAME cuda_runtime)
target_link_libraries(fff_runtime INTERFACE FFFHeaders)

install(TARGETS fff FFFHeaders ${FFF_COMPONENT_LIBRARIES} fff_runtime fff_cuda_runtime FFFCAPI
  EXPORT FFFTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS fff-opt fff-run fff-translate RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS fff_cuda_emulator FFFPlugin LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/fff-aot.sh DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ ${PROJECT_BINARY_DIR}/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.inc" PATTERN "*.td"
  PATTERN CMakeFiles EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
  FILES_MATCHING PATTERN "*.md")

set(FFF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fff)
install(EXPORT FFFTargets NAMESPACE FFF:: DESTINATION ${FFF_CMAKE_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/FFFConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/FFFConfig.cmake
  INSTALL_DESTINATION ${FFF_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/FFFConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/FFFConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/FFFConfigVersion.cmake
  DESTINATION ${FFF_CMAKE_DIR})
