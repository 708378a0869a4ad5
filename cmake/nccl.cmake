# NCCL for distributed/ (multi-GPU data parallelism): an IMPORTED target NCCL::nccl, found in the CUDA
# toolkit or under NCCL_ROOT (also where only libnccl.so.2 exists, as in PyTorch's pip-installed
# `nvidia/nccl`). Without it the library builds, and distributed::init explains what is missing.
#
#   NCCL_ROOT                   NCCL's prefix (include/nccl.h, lib/libnccl.so[.2]); also read from the environment.
#   MINIDL_NCCL=AUTO|ON|OFF     ON fails when NCCL is not found; OFF skips it.
#
# Sets MINIDL_WITH_NCCL in the including scope and adds distributed/cuda/*.cpp to `minidl`.
set(MINIDL_NCCL AUTO CACHE STRING "Build minidl's NCCL process group: AUTO, ON or OFF")
set_property(CACHE MINIDL_NCCL PROPERTY STRINGS AUTO ON OFF)
set(NCCL_ROOT "$ENV{NCCL_ROOT}" CACHE PATH "NCCL install prefix (include/ and lib/)")

set(MINIDL_WITH_NCCL OFF)
if(MINIDL_WITH_CUDA AND NOT MINIDL_NCCL STREQUAL "OFF")
  set(_nccl_hints ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    if(NOT TARGET NCCL::nccl)
      add_library(NCCL::nccl SHARED IMPORTED)
      set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                                  INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
    endif()
    set(MINIDL_WITH_NCCL ON)
    message(STATUS "minidl: NCCL ${NCCL_LIBRARY} (headers ${NCCL_INCLUDE_DIR})")
  elseif(MINIDL_NCCL STREQUAL "ON")
    message(FATAL_ERROR "MINIDL_NCCL=ON but NCCL was not found; pass -DNCCL_ROOT=<prefix with include/nccl.h "
                        "and lib/libnccl.so.2>")
  else()
    message(STATUS "minidl: NCCL not found (set NCCL_ROOT); distributed training will say so when asked for")
  endif()
endif()

if(MINIDL_WITH_NCCL)
  file(GLOB _nccl_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/distributed/cuda/*.cpp)
  target_sources(minidl PRIVATE ${_nccl_sources})
  target_compile_definitions(minidl PRIVATE MINIDL_WITH_NCCL)
  target_link_libraries(minidl PRIVATE NCCL::nccl)
else()
  target_sources(minidl PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/distributed/no_nccl.cpp)
endif()
