// DDPH_TARGET_BEGIN("avx2,f16c") ... DDPH_TARGET_END: the code between is
// compiled for that SIMD level (`#pragma GCC target`), never the whole build,
// so the library runs on any x86-64 and picks a level at run time (isa.h).
// Macros rather than the pragma itself so that the level can be a macro too
// (cpu_level.inc). clang ignores the pragma: in the one build that uses it
// (the fuzz build), CMake's ddph_isa_source() gives the file the level's -m
// flags instead.
#pragma once

#define DDPH_PRAGMA(text) _Pragma(#text)
#define DDPH_TARGET_BEGIN(isa) DDPH_PRAGMA(GCC push_options) DDPH_PRAGMA(GCC target(isa))
#define DDPH_TARGET_END DDPH_PRAGMA(GCC pop_options)
