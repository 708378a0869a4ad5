# The CUDA backend: core/cuda/ and ops/cuda/, cuBLAS and cuRAND from CUDAToolkit, cuDNN found under
# CUDNN_ROOT (also where only libcudnn.so.9 exists, as in a pip-installed cuDNN).
include(CheckLanguage)
check_language(CUDA)
find_package(CUDAToolkit QUIET)
if(NOT CMAKE_CUDA_COMPILER OR NOT CUDAToolkit_FOUND)
  if(MINIDL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MINIDL_CUDA=ON but no CUDA toolkit was found (nvcc: '${CMAKE_CUDA_COMPILER}')")
  endif()
  message(STATUS "minidl: CUDA toolkit not found; building the CPU backend only")
  return()
endif()
# The backend sources arrive with the CUDA issue; until then the CPU build is complete on its own.
message(STATUS "minidl: CUDA backend not built yet")
return()
message(STATUS "minidl: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER})")
