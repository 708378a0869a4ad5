# `cmake --install` makes minidl a CMake package: the public headers under include/minidl/ (users keep
# writing "minidl.h", "nn/nn.h", "core/tensor.h"), the library, and a package config exporting
# minidl::minidl. A project then does
#   find_package(minidl CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE minidl::minidl)
# as examples/ does. The device-specific headers (core/cuda/, ops/cpu/, ops/cuda/) stay private: no
# public header includes them.
include(CMakePackageConfigHelpers)

set(MINIDL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/minidl" CACHE STRING
    "Where minidlConfig.cmake goes, relative to the install prefix")

install(TARGETS minidl EXPORT minidlTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES minidl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/minidl)
# The kernels' headers stay out: ops/cpu, ops/cuda, and ops/special_functions.h (Eigen's special
# functions for both devices' kernels; Eigen is a build dependency only).
install(DIRECTORY core ops nn optim data distributed DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/minidl
        FILES_MATCHING PATTERN "*.h" PATTERN "cpu" EXCLUDE PATTERN "cuda" EXCLUDE
        PATTERN "special_functions.h" EXCLUDE)
# core/dlpack.h includes <dlpack/dlpack.h>: the vendored header goes under include/minidl/ too, with
# its license (Apache-2.0 asks for it beside the copy).
install(FILES third_party/dlpack/include/dlpack/dlpack.h third_party/dlpack/LICENSE
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/minidl/dlpack)
install(EXPORT minidlTargets NAMESPACE minidl:: FILE minidlTargets.cmake DESTINATION ${MINIDL_INSTALL_CMAKEDIR})

# What the config needs to recreate the targets minidl::minidl links: the namespaced names in its
# exported link interface (a static library's private dependencies appear there as LINK_ONLY, and are
# still linked by its users; BUILD_INTERFACE ones are dropped from the export).
get_target_property(_minidl_links minidl INTERFACE_LINK_LIBRARIES)
set(MINIDL_EXPORTED_DEPENDENCIES "")
foreach(_link IN LISTS _minidl_links)
  string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _link "${_link}")
  if(_link MATCHES "::" AND NOT _link MATCHES "^\\$<")
    list(APPEND MINIDL_EXPORTED_DEPENDENCIES "${_link}")
  endif()
endforeach()
set(MINIDL_NEEDS_ZLIB OFF)
if("ZLIB::ZLIB" IN_LIST MINIDL_EXPORTED_DEPENDENCIES)
  set(MINIDL_NEEDS_ZLIB ON)
endif()
set(MINIDL_CUDA_TOOLKIT_ROOT "")
set(MINIDL_CUDA_VERSION_MAJOR "")
if(MINIDL_WITH_CUDA)
  get_filename_component(MINIDL_CUDA_TOOLKIT_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  set(MINIDL_CUDA_VERSION_MAJOR ${CUDAToolkit_VERSION_MAJOR})
endif()
set(MINIDL_PACKAGE_WITH_CUDNN OFF)  # MINIDL_WITH_CUDNN is unset where CUDA is off
set(MINIDL_CUDNN_LIBRARY_DIR "")
if(MINIDL_WITH_CUDNN)
  set(MINIDL_PACKAGE_WITH_CUDNN ON)
  get_filename_component(MINIDL_CUDNN_LIBRARY_DIR "${CUDNN_LIBRARY}" DIRECTORY)
endif()

set(MINIDL_NCCL_LIBRARY_DIR "")
if(MINIDL_WITH_NCCL)
  get_filename_component(MINIDL_NCCL_LIBRARY_DIR "${NCCL_LIBRARY}" DIRECTORY)
endif()

configure_package_config_file(cmake/minidlConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/minidlConfig.cmake
                              INSTALL_DESTINATION ${MINIDL_INSTALL_CMAKEDIR})
# 0.x: a new minor version may break the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/minidlConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/minidlConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/minidlConfigVersion.cmake
        DESTINATION ${MINIDL_INSTALL_CMAKEDIR})
