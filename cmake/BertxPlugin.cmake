# bertx_add_plugin(<target> SOURCES ... [OUTPUT_DIR dir] [TORCH])
# Builds a bertx plugin: a MODULE library with hidden symbols (only bertx_plugin_entry is exported),
# compiled against the public headers in core/include, written to the plugin folder the host scans.
function(bertx_add_plugin target)
  cmake_parse_arguments(ARG "TORCH" "OUTPUT_DIR" "SOURCES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE bertx_api)
  if(ARG_TORCH)
    target_link_libraries(${target} PRIVATE bertx_torch)
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR ${BERTX_PLUGIN_OUTPUT_DIR})
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Unresolved symbols are an error at link time, not at dlopen time; the version script exports the entry
  # point only (no weak template or GNU-unique symbols leak into the host's namespace).
  set(map ${CMAKE_BINARY_DIR}/bertx_plugin.map)
  if(NOT EXISTS ${map})
    file(WRITE ${map} "{ global: bertx_plugin_entry; local: *; };\n")
  endif()
  target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,--version-script=${map})
endfunction()
