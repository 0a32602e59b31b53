# install.cmake - `cmake --install build [--prefix P]`: the bertx binary, its shared libraries and in-tree
# plugins (registered by bertx_add_plugin), and the plugin SDK: the public headers (include/bertx), the
# exported targets bertx::api (headers, C++20), bertx::core (libbertx_core: tokenizer, bertx::Error) and
# bertx::ops (libbertx_ops: fused operators), bertx::data (libbertx_data: pre-training shards and masking,
# bertx/data/*.hpp), and
# a CMake package (bertxConfig.cmake + version file + bertx_add_plugin) so an outside project writes
#   find_package(bertx REQUIRED)
#   bertx_add_plugin(my_task TORCH SOURCES my_task.cpp)
include(CMakePackageConfigHelpers)

set(BERTX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/bertx)

# The API version the installed headers speak, read from the header itself (one source of truth).
file(STRINGS ${CMAKE_SOURCE_DIR}/core/include/bertx/version.hpp api_line REGEX "^#define BERTX_PLUGIN_API_VERSION ")
string(REGEX REPLACE "^#define BERTX_PLUGIN_API_VERSION ([0-9]+)u?.*$" "\\1" BERTX_PLUGIN_API_VERSION "${api_line}")
if(NOT BERTX_PLUGIN_API_VERSION MATCHES "^[0-9]+$")
  message(FATAL_ERROR "cannot read BERTX_PLUGIN_API_VERSION from core/include/bertx/version.hpp (got '${api_line}')")
endif()

install(TARGETS bertx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Plugins merged into others (plugins/CMakeLists.txt): an earlier install's copies would register components twice.
foreach(old ${BERTX_OBSOLETE_PLUGINS})
  install(CODE "file(REMOVE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/bertx/plugins/${old}\")")
endforeach()
install(TARGETS bertx_engine LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS bertx_api bertx_core bertx_ops bertx_data EXPORT bertxTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/core/include/bertx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT bertxTargets NAMESPACE bertx:: DESTINATION ${BERTX_CMAKE_DIR})

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/bertxConfig.cmake.in ${CMAKE_BINARY_DIR}/bertxConfig.cmake
  INSTALL_DESTINATION ${BERTX_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
# 0.x: a minor release may change the C++ API; the plugin API version is checked again at load time.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/bertxConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/bertxConfig.cmake ${CMAKE_BINARY_DIR}/bertxConfigVersion.cmake
  ${CMAKE_SOURCE_DIR}/cmake/BertxPlugin.cmake DESTINATION ${BERTX_CMAKE_DIR})
