# oneDNN for the CPU's float32 convolutions and GEMMs (ops/cpu/onednn_*.cpp), optional:
#   MINIDL_ONEDNN=AUTO|ON|OFF   AUTO (default) uses oneDNN 2.x where find_package(dnnl) finds it
#                               (Debian: libdnnl-dev); ON fails without it; OFF builds without.
# Sets MINIDL_WITH_ONEDNN and links DNNL::dnnl into minidl.
set(MINIDL_ONEDNN AUTO CACHE STRING "Build the CPU convolutions' oneDNN path: AUTO, ON or OFF")
set_property(CACHE MINIDL_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(MINIDL_WITH_ONEDNN OFF)
if(NOT MINIDL_ONEDNN STREQUAL "OFF")
  find_package(dnnl CONFIG QUIET)
  # The primitives are written against oneDNN 2's operation descriptors, which oneDNN 3 removed.
  if(dnnl_FOUND AND dnnl_VERSION VERSION_LESS 3)
    set(MINIDL_WITH_ONEDNN ON)
    target_link_libraries(minidl PRIVATE DNNL::dnnl)
    # Only the file that calls it needs to know: toggling the option rebuilds one file.
    set_property(SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/ops/cpu/onednn_conv.cpp ${CMAKE_CURRENT_SOURCE_DIR}/ops/cpu/onednn_gemm.cpp
                 APPEND PROPERTY COMPILE_DEFINITIONS MINIDL_WITH_ONEDNN=1)
    message(STATUS "minidl: oneDNN ${dnnl_VERSION} for the CPU convolutions")
  elseif(MINIDL_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "MINIDL_ONEDNN=ON but oneDNN 2.x was not found (found: ${dnnl_VERSION}); install "
                        "libdnnl-dev or pass -Ddnnl_DIR=<dir with dnnl-config.cmake>")
  else()
    message(STATUS "minidl: oneDNN 2.x not found; the CPU convolutions use im2col + GEMM only")
  endif()
endif()
