# DDPH_FUZZ=ON: the libFuzzer build (tests/fuzz). Everything, plugins
# included, is compiled with coverage for the fuzzer and with AddressSanitizer
# and UndefinedBehaviorSanitizer, so a bug in a dlopen()ed hook is found too.
option(DDPH_FUZZ "Build the libFuzzer targets of tests/fuzz (clang only)" OFF)
if(DDPH_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DDPH_FUZZ needs clang: -DCMAKE_C_COMPILER=clang-14 "
                        "-DCMAKE_CXX_COMPILER=clang++-14 (Debian clang-14)")
  endif()
  set(DDPH_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  # C and C++ only: CUDA stays off in this build (run_fuzzers.sh).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link;${DDPH_SANITIZERS}>")
  add_link_options(${DDPH_SANITIZERS})
endif()

# ddph_isa_source(<file> <-m flag>...): clang ignores `#pragma GCC target`,
# so under clang (the fuzz build) a kernel file of one SIMD level is compiled
# for that level as a whole. Only that build does this; it runs on the
# machine that built it. GCC builds keep the per-function pragmas, which is
# what lets a release run on any x86-64. Call it in the folder that builds
# the file (source properties are per folder).
function(ddph_isa_source src)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set_property(SOURCE ${src} APPEND PROPERTY COMPILE_OPTIONS ${ARGN})
  endif()
endfunction()
