# bertx_add_plugin(<target> SOURCES ... [TORCH] [OUTPUT_DIR dir])
# Builds a bertx plugin: a MODULE library with hidden symbols (only bertx_plugin_entry is exported),
# compiled against the public headers (target bertx::api, C++20).
#   TORCH       also compile and link against LibTorch (bertx::torch) and bertx's fused operators (bertx::ops,
#               bertx/ops.hpp, which bertx/losses.hpp uses): any plugin that includes model.hpp, task.hpp,
#               dataset.hpp, batch.hpp, losses.hpp or optimizer.hpp needs it.
#   OUTPUT_DIR  where the .so is written. Default: the build's plugin folder in the bertx tree (which is also
#               installed to <libdir>/bertx/plugins); CMAKE_CURRENT_BINARY_DIR in an outside project.
# The same file serves the bertx tree (cmake/) and outside projects (installed beside bertxConfig.cmake,
# which defines bertx::api, bertx::core, bertx::ops, bertx::data and bertx::torch). Link bertx::core yourself for
# the tokenizer (bertx/tokenizer.hpp): target_link_libraries(my_task PRIVATE bertx::core).
#
# bertx_link_openmp(<target>): -fopenmp against the one OpenMP runtime LibTorch itself loads. With an OpenMP
# LibTorch, at::parallel_for is an inline `#pragma omp parallel`: code compiled with it needs -fopenmp or it runs on
# one thread. The wheel ships its own libgomp.so.1 (same soname as GCC's, older), which the loader shares with
# everything asking for libgomp.so.1: link against that file, so that nothing built here needs a symbol it lacks
# and the process holds one OpenMP runtime (tests/unit/test_compat.cpp checks it).
#
# bertx_system_header_shim(<folder>): <folder> gets links to the system's `fmt` and `oneapi` header folders. A PyPI
# LibTorch's torch/include carries its own fmt and oneDNN headers, searched before /usr/include, while Debian's
# spdlog links Debian's fmt (and bertx Debian's oneDNN): with <folder> ahead of LibTorch's headers, every
# translation unit sees the headers of the libraries it links (cmake/BertxTorch.cmake, bertxConfig.cmake).
include_guard(GLOBAL)

function(bertx_system_header_shim dir)
  file(MAKE_DIRECTORY "${dir}")
  foreach(sub fmt oneapi)
    if(IS_DIRECTORY "/usr/include/${sub}" AND NOT EXISTS "${dir}/${sub}")
      file(CREATE_LINK "/usr/include/${sub}" "${dir}/${sub}" SYMBOLIC)
    endif()
  endforeach()
endfunction()

function(bertx_link_openmp target)
  find_library(BERTX_TORCH_GOMP NAMES libgomp.so.1 PATHS "${TORCH_INSTALL_PREFIX}/lib" NO_DEFAULT_PATH)
  if(BERTX_TORCH_GOMP)
    target_compile_options(${target} PRIVATE -fopenmp)
    target_link_libraries(${target} PRIVATE "${BERTX_TORCH_GOMP}")
  else()
    find_package(OpenMP COMPONENTS CXX)
    if(OpenMP_CXX_FOUND)
      target_link_libraries(${target} PRIVATE OpenMP::OpenMP_CXX)
    endif()
  endif()
endfunction()

function(bertx_add_plugin target)
  cmake_parse_arguments(ARG "TORCH" "OUTPUT_DIR" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "bertx_add_plugin(${target}): no SOURCES given")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE bertx::api)
  if(ARG_TORCH)
    target_link_libraries(${target} PRIVATE bertx::torch bertx::ops)
  endif()
  set(in_tree FALSE)
  if(NOT ARG_OUTPUT_DIR AND DEFINED BERTX_PLUGIN_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${BERTX_PLUGIN_OUTPUT_DIR})
    set(in_tree TRUE)
  endif()
  if(ARG_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Unresolved symbols are an error at link time, not at dlopen time; the version script exports the entry
  # point only (no weak template or GNU-unique symbols leak into the host's namespace).
  set(map ${CMAKE_BINARY_DIR}/bertx_plugin.map)
  file(CONFIGURE OUTPUT ${map} CONTENT "{ global: bertx_plugin_entry; local: *; };\n")
  target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--version-script=${map})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${map})
  if(in_tree)
    # Installed plugins live in <libdir>/bertx/plugins and find libbertx_core.so two folders up.
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/../..")
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/bertx/plugins)
  endif()
endfunction()
