# ddph_add_plugin(<family> SOURCES ... [LIBS ...])
# Builds libddph_<family>.so into lib/ddphooks/ and installs it beside the
# other plugins. Only ddph_plugin_entry (and other ddph_* names) is exported.
function(ddph_add_plugin family)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  set(target ddph_${family})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ddph_core ${ARG_LIBS})
  ddph_limit_exports(${target})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "ddph_${family}"
    LIBRARY_OUTPUT_DIRECTORY ${DDPH_PLUGIN_OUTPUT_DIR})
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/${DDPH_PLUGIN_SUBDIR})
  set_property(GLOBAL APPEND PROPERTY DDPH_PLUGIN_TARGETS ${target})
endfunction()

function(ddph_limit_exports target)
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/exports.map" "LINKER:--as-needed")
  # A sanitized shared object takes the sanitizer runtime from the program
  # that loads it, so it has undefined symbols by design.
  if(NOT DDPH_FUZZ)
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
endfunction()
