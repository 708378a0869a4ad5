#pragma once
// Generated sources loaded on a device: compiled (or taken from a cache) and loaded into the
// device's primary context the first time they are asked for there, then found by a lookup.
#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "ops/elementwise_kernel_source.h"

namespace minidl::rtc {

/// A module on one device and its entry points, in the order of GeneratedSource::entry_points.
struct LoadedProgram {
  int device = 0;
  std::string source;
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;
};

/// `generated` loaded on `device`. Valid for the life of the process: modules are never unloaded.
std::shared_ptr<const LoadedProgram> load_program(int device, const GeneratedSource& generated);

/// Forgets the loaded programs (they stay loaded) and the compiled images kept in memory.
void clear_loaded_programs();

}  // namespace minidl::rtc
