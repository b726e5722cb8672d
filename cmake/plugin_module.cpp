// The one source of every libddph_<family>.so: a plugin's code comes whole
// from its family's static library, ddph_<family>_impl (cmake/DdphPlugin.cmake),
// and CMake wants a library target to have a source of its own. Defines nothing.
