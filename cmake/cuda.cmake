# The CUDA backend: core/cuda/ and ops/cuda/, cuBLAS and cuRAND from CUDAToolkit, cuDNN found under
# CUDNN_ROOT (also where only libcudnn.so.9 exists, as in a pip-installed cuDNN).
#
# Options and hints:
#   MINIDL_CUDA=AUTO|ON|OFF     AUTO builds the backend when a toolkit is found; ON requires it.
#   CMAKE_CUDA_ARCHITECTURES    default: `native` when `nvidia-smi -L` lists a GPU, else 90 (H100/H200).
#   CUDNN_ROOT                  where cuDNN lives (include/cudnn.h, lib/libcudnn.so[.9]); also read from
#                               the environment. Without cuDNN the backend builds without its cuDNN path.
#   MINIDL_CUDNN=AUTO|ON|OFF    ON fails when cuDNN is not found; OFF skips it.
#
# Sets MINIDL_WITH_CUDA (and MINIDL_WITH_CUDNN) in the including scope and defines
# minidl_add_cuda_backend(target).
include(CheckLanguage)

set(MINIDL_CUDNN AUTO CACHE STRING "Build the cuDNN path of the CUDA backend: AUTO, ON or OFF")
set_property(CACHE MINIDL_CUDNN PROPERTY STRINGS AUTO ON OFF)
set(CUDNN_ROOT "$ENV{CUDNN_ROOT}" CACHE PATH "cuDNN install prefix (include/ and lib/)")

# The architecture must be chosen before enable_language(CUDA), which would otherwise pick the
# compiler's oldest default (sm_52 / sm_75) and leave Hopper running JIT-compiled PTX.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(_minidl_arch 90)
  find_program(MINIDL_NVIDIA_SMI nvidia-smi)
  if(MINIDL_NVIDIA_SMI)
    execute_process(COMMAND ${MINIDL_NVIDIA_SMI} -L RESULT_VARIABLE _smi_rc OUTPUT_VARIABLE _smi_out ERROR_QUIET
                    TIMEOUT 20)
    if(_smi_rc EQUAL 0 AND _smi_out MATCHES "GPU [0-9]")
      set(_minidl_arch native)
    endif()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES ${_minidl_arch} CACHE STRING
      "CUDA architectures: native where a GPU is visible at configure time, else 90 (H100/H200)")
  message(STATUS "minidl: CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}")
endif()

check_language(CUDA)
find_package(CUDAToolkit QUIET)
if(NOT CMAKE_CUDA_COMPILER OR NOT CUDAToolkit_FOUND)
  if(MINIDL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MINIDL_CUDA=ON but no CUDA toolkit was found (nvcc: '${CMAKE_CUDA_COMPILER}'); "
                        "install the CUDA toolkit or set CMAKE_CUDA_COMPILER / CUDAToolkit_ROOT")
  endif()
  message(STATUS "minidl: CUDA toolkit not found; building the CPU backend only")
  return()
endif()

enable_language(CUDA)
# CMake before 3.26 does not know nvcc's C++20 flag; teach it, so CUDA_STANDARD 20 (also inherited
# from CMAKE_CXX_STANDARD) works.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
# One shared CUDA runtime for our kernels, cuBLAS and cuDNN: a static copy would be a second runtime.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
set(MINIDL_WITH_CUDA ON)
message(STATUS "minidl: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, toolkit ${CUDAToolkit_VERSION}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES})")

# ---- cuDNN: an IMPORTED target CUDNN::cudnn ----
set(MINIDL_WITH_CUDNN OFF)
if(NOT MINIDL_CUDNN STREQUAL "OFF")
  set(_cudnn_hints ${CUDNN_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
  get_filename_component(_cudart_dir "${CUDAToolkit_LIBRARY_DIR}" DIRECTORY)
  list(APPEND _cudnn_hints ${_cudart_dir})
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cudnn_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  # A pip-installed cuDNN ships libcudnn.so.9 and no unversioned link: name it explicitly. NAMES_PER_DIR
  # keeps the library next to the headers found above (CUDNN_ROOT first) rather than an unversioned
  # libcudnn.so of another install in a system directory.
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR HINTS ${_cudnn_hints} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    if(NOT TARGET CUDNN::cudnn)
      add_library(CUDNN::cudnn SHARED IMPORTED)
      set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                                                    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
    endif()
    set(MINIDL_WITH_CUDNN ON)
    message(STATUS "minidl: cuDNN ${CUDNN_LIBRARY} (headers ${CUDNN_INCLUDE_DIR})")
  elseif(MINIDL_CUDNN STREQUAL "ON")
    message(FATAL_ERROR "MINIDL_CUDNN=ON but cuDNN was not found; pass -DCUDNN_ROOT=<prefix with include/cudnn.h "
                        "and lib/libcudnn.so.9>")
  else()
    message(STATUS "minidl: cuDNN not found (set CUDNN_ROOT); the CUDA backend builds without its cuDNN path")
  endif()
endif()

# Adds the CUDA sources to `target`. The .cu files compile in an object library of their own so that
# the host-only warning flags of the main target never reach nvcc.
function(minidl_add_cuda_backend target)
  set(_root ${CMAKE_CURRENT_SOURCE_DIR})
  file(GLOB _cu CONFIGURE_DEPENDS ${_root}/core/cuda/*.cu ${_root}/ops/cuda/*.cu)
  file(GLOB _cpp CONFIGURE_DEPENDS ${_root}/core/cuda/*.cpp ${_root}/ops/cuda/*.cpp)
  if(NOT MINIDL_WITH_CUDNN)
    list(FILTER _cpp EXCLUDE REGEX ".*/ops/cuda/cudnn[a-z_]*\\.cpp$")
  endif()

  add_library(${target}_cuda_kernels OBJECT ${_cu})
  target_include_directories(${target}_cuda_kernels PRIVATE ${_root})
  # Eigen: the special functions of ops/special_functions.h, which Eigen writes for host and device.
  target_link_libraries(${target}_cuda_kernels PRIVATE CUDA::cudart CUDA::curand CUDA::cublas Eigen3::Eigen)
  target_compile_definitions(${target}_cuda_kernels PRIVATE MINIDL_WITH_CUDA EIGEN_DONT_PARALLELIZE)  # as the library's
  set_target_properties(${target}_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_RUNTIME_LIBRARY Shared)
  target_compile_options(${target}_cuda_kernels PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra -Xcudafe=--diag_suppress=177>)
  # The diagnostics (apps/doctor) tell binary (-real) from PTX (-virtual) architectures by the spec.
  string(REPLACE ";" "," _archs "${CMAKE_CUDA_ARCHITECTURES}")
  set_property(SOURCE ${_root}/core/cuda/diagnostics.cu APPEND PROPERTY COMPILE_DEFINITIONS
               "MINIDL_CUDA_ARCHITECTURES=\"${_archs}\"")

  target_sources(${target} PRIVATE ${_cpp} $<TARGET_OBJECTS:${target}_cuda_kernels>)
  target_compile_definitions(${target} PUBLIC MINIDL_WITH_CUDA)
  target_link_libraries(${target} PUBLIC CUDA::cudart CUDA::cublas CUDA::cublasLt CUDA::curand)
  # NVRTC compiles the run-time kernels (ops/cuda/rtc_*.cpp). Their driver API calls are looked up
  # through cudaGetDriverEntryPoint instead of linking CUDA::cuda_driver: a NEEDED libcuda.so.1
  # would keep minidl from starting where no NVIDIA driver is installed.
  target_link_libraries(${target} PRIVATE CUDA::nvrtc)
  set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
  # CUPTI (kernel activity records) serves cuda::profile_kernels, which apps/bench reports from.
  if(TARGET CUDA::cupti)
    target_compile_definitions(${target} PRIVATE MINIDL_WITH_CUPTI)
    target_link_libraries(${target} PRIVATE CUDA::cupti)
  endif()
  if(MINIDL_WITH_CUDNN)
    target_compile_definitions(${target} PUBLIC MINIDL_WITH_CUDNN)
    target_compile_definitions(${target}_cuda_kernels PRIVATE MINIDL_WITH_CUDNN)
    target_link_libraries(${target} PUBLIC CUDNN::cudnn)
    # The cuDNN files use the legacy (v7-style) convolution API, deprecated but present through cuDNN 9.
    set_source_files_properties(${_root}/ops/cuda/cudnn.cpp ${_root}/ops/cuda/cudnn_autotune.cpp
                                PROPERTIES COMPILE_OPTIONS -Wno-deprecated-declarations)
  endif()
endfunction()
