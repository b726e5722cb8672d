# ddph_add_plugin(<family> SOURCES ... [LIBS ...])
# Builds the family's sources into ddph_<family>_impl, a static PIC library,
# and links it whole into libddph_<family>.so in lib/ddphooks/, installed
# beside the other plugins; only ddph_plugin_entry (and other ddph_* names) is
# exported. A family sets its compile options, definitions and further
# libraries on ddph_<family>_impl, and its tests link that library rather
# than compiling its sources, so they test the code as the plugin ships it.
function(ddph_add_plugin family)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  set(impl ddph_${family}_impl)
  add_library(${impl} STATIC ${ARG_SOURCES})
  set_target_properties(${impl} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(${impl} PUBLIC ddph_base ${ARG_LIBS})
  set(target ddph_${family})
  add_library(${target} MODULE ${PROJECT_SOURCE_DIR}/cmake/plugin_module.cpp)
  # WHOLE_ARCHIVE: nothing inside the plugin calls ddph_plugin_entry, so
  # without it the linker would take nothing from the archive.
  target_link_libraries(${target} PRIVATE $<LINK_LIBRARY:WHOLE_ARCHIVE,${impl}>)
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
