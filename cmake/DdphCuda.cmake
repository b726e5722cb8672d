# CUDA support: decides DDPH_WITH_CUDA and, when it is on, enables the CUDA
# language and finds the toolkit (CUDA::cudart). Included by the top-level
# CMakeLists.txt before any subdirectory, so every folder sees the result as
# `if(DDPH_WITH_CUDA)`.
#
#   -DDDPH_WITH_CUDA=AUTO (default)  on when a working nvcc is found, else off
#   -DDDPH_WITH_CUDA=ON              nvcc must work, or configuring fails
#   -DDDPH_WITH_CUDA=OFF             nothing CUDA is looked for or built
#   -DCMAKE_CUDA_ARCHITECTURES=...   default "80;90" (A100, H100)
#   -DCMAKE_CUDA_HOST_COMPILER=...   default: the C++ compiler of the build
#
# The cache keeps the user's choice (AUTO/ON/OFF); a normal variable of the
# same name, set below, holds the decision (ON/OFF) for the rest of the build.

set(DDPH_WITH_CUDA AUTO CACHE STRING "Build the CUDA kernels: AUTO (when nvcc works), ON or OFF")
set_property(CACHE DDPH_WITH_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${DDPH_WITH_CUDA}" _ddph_cuda_request)

if(_ddph_cuda_request STREQUAL "AUTO")
  set(_ddph_cuda_required FALSE)
elseif(DDPH_WITH_CUDA)
  set(_ddph_cuda_required TRUE)
else()
  set(DDPH_WITH_CUDA OFF)
  message(STATUS "ddphooks: CUDA off (DDPH_WITH_CUDA=${_ddph_cuda_request})")
  return()
endif()

# A failed check is cached as NOTFOUND; forget it so that installing nvcc or
# fixing the host compiler takes effect on the next configure.
if(DEFINED CMAKE_CUDA_COMPILER AND NOT CMAKE_CUDA_COMPILER)
  unset(CMAKE_CUDA_COMPILER CACHE)
  unset(CMAKE_CUDA_COMPILER)
endif()

# The toolkit lives in /usr/local/cuda without being on PATH in most images
# (ours included); look there so a plain `./build.sh` finds it. CUDACXX is
# the variable CMake itself reads, and it also reaches check_language's
# child configure, which a -D would not.
set(_ddph_nvcc "")
if(DEFINED ENV{CUDACXX})
  set(_ddph_nvcc "$ENV{CUDACXX}")
elseif(NOT DEFINED CMAKE_CUDA_COMPILER)
  find_program(_ddph_nvcc_on_path nvcc)
  if(_ddph_nvcc_on_path)
    set(_ddph_nvcc "${_ddph_nvcc_on_path}")
  elseif(EXISTS /usr/local/cuda/bin/nvcc)
    set(_ddph_nvcc /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} "${_ddph_nvcc}")
  endif()
  unset(_ddph_nvcc_on_path CACHE)
endif()

# nvcc otherwise compiles host code with whatever `g++` is first on PATH,
# which need not be the compiler the rest of the build uses (a different
# libstdc++, or a version this nvcc rejects). Use the build's own C++
# compiler; a user who needs another sets CMAKE_CUDA_HOST_COMPILER (or
# CUDAHOSTCXX) to a compiler nvcc supports. Never -allow-unsupported-compiler:
# it trades a clear error for possible miscompiles.
# check_language's child configure sees only the environment, so the choice
# travels as CUDAHOSTCXX.
if(NOT DEFINED ENV{CUDAHOSTCXX})
  if(CMAKE_CUDA_HOST_COMPILER)
    set(ENV{CUDAHOSTCXX} "${CMAKE_CUDA_HOST_COMPILER}")
  else()
    set(ENV{CUDAHOSTCXX} "${CMAKE_CXX_COMPILER}")
  endif()
endif()

# Before enable_language: CMake would otherwise pick nvcc's own default
# architecture. CUDAARCHS is CMake's environment override.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to build for")
endif()

include(CheckLanguage)
check_language(CUDA)

if(NOT CMAKE_CUDA_COMPILER)
  if(_ddph_nvcc)
    set(_ddph_why "${_ddph_nvcc} could not build a test program with host compiler \
$ENV{CUDAHOSTCXX}; set CMAKE_CUDA_HOST_COMPILER to a compiler this nvcc supports \
(docs/cuda.md); details in CMakeFiles/CMakeError.log")
  else()
    set(_ddph_why "no nvcc on PATH or in /usr/local/cuda/bin")
  endif()
  if(_ddph_cuda_required)
    message(FATAL_ERROR "ddphooks: DDPH_WITH_CUDA=ON but ${_ddph_why}")
  endif()
  set(DDPH_WITH_CUDA OFF)
  message(STATUS "ddphooks: CUDA off: ${_ddph_why}")
  return()
endif()

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
set(CMAKE_CUDA_VISIBILITY_PRESET hidden)
set(DDPH_WITH_CUDA ON)
message(STATUS "ddphooks: CUDA on: nvcc ${CMAKE_CUDA_COMPILER_VERSION} (${CMAKE_CUDA_COMPILER}), "
               "host ${CMAKE_CUDA_HOST_COMPILER}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
