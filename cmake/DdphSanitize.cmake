# DDPH_SANITIZE: build every library, plugin, tool and test with sanitizers,
# so the ordinary test suite (tests/sanitize/run_sanitized.sh) finds memory
# errors, undefined behaviour and data races in the code it exercises.
#   ""                  off (the default)
#   address,undefined   ASan + UBSan; any UBSan finding aborts (fails the test)
#   thread              TSan
# Made for GCC, the compiler the rest of CI uses: it links the sanitizer
# runtime into every shared object, so plugins keep --no-undefined and are
# checked when dlopen()ed, and the per-function `#pragma GCC target` SIMD
# kernels are the ones that ship. (The fuzz build, DDPH_FUZZ, needs clang for
# libFuzzer and brings its own ASan + UBSan.)
set(DDPH_SANITIZE "" CACHE STRING "Sanitizers for the whole build: \"\", address,undefined or thread")
set_property(CACHE DDPH_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")
if(DDPH_SANITIZE)
  if(DDPH_FUZZ)
    message(FATAL_ERROR "DDPH_SANITIZE and DDPH_FUZZ are separate builds; DDPH_FUZZ has ASan + UBSan already")
  endif()
  if(DDPH_SANITIZE STREQUAL "address,undefined")
    set(ddph_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=all)
  elseif(DDPH_SANITIZE STREQUAL "thread")
    set(ddph_sanitize_flags -fsanitize=thread)
  else()
    message(FATAL_ERROR "DDPH_SANITIZE=${DDPH_SANITIZE}: expected address,undefined or thread")
  endif()
  # Frame pointers: whole stacks in every report, at little cost.
  list(APPEND ddph_sanitize_flags -fno-omit-frame-pointer)
  # C and C++ only: the sanitizer builds run with DDPH_WITH_CUDA=OFF.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${ddph_sanitize_flags}>")
  add_link_options(${ddph_sanitize_flags})
  message(STATUS "ddphooks: sanitizers ${DDPH_SANITIZE}")
endif()
