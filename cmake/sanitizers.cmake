# Sanitized builds: MINIDL_SANITIZE is handed to -fsanitize= for every C++ target of the project
# (library, tests, apps), e.g.
#
#   cmake -B build-san -DMINIDL_SANITIZE=address,undefined -DMINIDL_CUDA=OFF       # scripts/sanitize.sh
#   cmake -B build-fuzz -DMINIDL_SANITIZE=fuzzer-no-link,address,undefined \
#         -DMINIDL_BUILD_FUZZERS=ON -DCMAKE_CXX_COMPILER=clang++                    # scripts/fuzz.sh
#
# Empty (the default) builds without sanitizers. Only C++ is instrumented: CUDA device code cannot
# be, and ASan's shadow memory collides with the CUDA driver's mappings, so use compute-sanitizer
# for the GPU. Prebuilt libraries (GoogleTest, zlib, libgomp) stay uninstrumented; ASan still
# catches their misuse of our memory through its interceptors.
set(MINIDL_SANITIZE "" CACHE STRING "Sanitizers to build with, as for -fsanitize= (e.g. address,undefined); empty for none")

if(MINIDL_SANITIZE)
  if(MINIDL_WITH_CUDA)
    message(WARNING "MINIDL_SANITIZE=${MINIDL_SANITIZE} instruments the C++ code only; "
                    "ASan usually fails to start next to the CUDA driver (configure with -DMINIDL_CUDA=OFF)")
  endif()
  # -fno-omit-frame-pointer: whole stacks in reports at any -O level. -fno-sanitize-recover=all:
  # undefined behaviour aborts the test that runs into it instead of printing a line and passing.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${MINIDL_SANITIZE};-fno-omit-frame-pointer;-fno-sanitize-recover=all>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:-fsanitize=${MINIDL_SANITIZE}>")
  message(STATUS "minidl: sanitizers ${MINIDL_SANITIZE}")
endif()
