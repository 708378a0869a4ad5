// What every build has: the launcher's environment, the timeout, and the default group. The NCCL
// side of ProcessGroup is distributed/cuda/nccl_group.cpp (or distributed/no_nccl.cpp).
#include "distributed/process_group.h"

#include <cstdlib>
#include <string>

#include "core/cuda.h"
#include "core/error.h"

namespace minidl::distributed {

namespace {

// A whole number from the environment, or `fallback` where the variable is unset.
int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  MINIDL_CHECK(end && *end == '\0' && errno == 0 && value >= 0 && value <= (1 << 20), name,
               " must be a whole number from 0, got '", text, "'");
  return static_cast<int>(value);
}

std::unique_ptr<ProcessGroup>& default_group() {
  static std::unique_ptr<ProcessGroup> group;
  return group;
}

}  // namespace

std::chrono::milliseconds ProcessGroupOptions::timeout() const {
  if (timeout_.count() > 0) return timeout_;
  const int from_env = env_int("MINIDL_DIST_TIMEOUT", 600);
  MINIDL_CHECK(from_env > 0, "MINIDL_DIST_TIMEOUT must be at least 1 (seconds), got 0");
  return std::chrono::seconds(from_env);
}

LaunchEnv LaunchEnv::read() {
  LaunchEnv env;
  env.world_size = env_int("WORLD_SIZE", 1);
  env.rank = env_int("RANK", 0);
  env.local_rank = env_int("LOCAL_RANK", 0);
  MINIDL_CHECK(env.world_size >= 1, "WORLD_SIZE must be at least 1, got ", env.world_size);
  MINIDL_CHECK(env.rank < env.world_size, "RANK ", env.rank, " is outside 0..", env.world_size - 1,
               " for WORLD_SIZE ", env.world_size);
  return env;
}

void init(ProcessGroupOptions options) {
  const LaunchEnv env = LaunchEnv::read();
  MINIDL_CHECK(cuda::is_available(), "distributed::init: the NCCL process group needs a GPU for every process "
               "(train without --distributed to use the CPU); here: ", cuda::unavailable_reason());
  MINIDL_CHECK(env.local_rank < cuda::device_count(), "distributed::init: LOCAL_RANK ", env.local_rank,
               " names no GPU; this machine has ", cuda::device_count(),
               " (start at most that many processes per machine)");
  cuda::set_device(env.local_rank);
  init(env.rank, env.world_size, env.world_size > 1 ? Rendezvous::from_env() : Rendezvous::tcp("127.0.0.1", 1),
       Device::cuda(env.local_rank), options);
}

void init(int rank, int world_size, const Rendezvous& where, Device device, ProcessGroupOptions options) {
  MINIDL_CHECK(!default_group(), "distributed::init: already initialized (rank ", default_group()->rank(), " of ",
               default_group()->size(), "); call distributed::destroy() first");
  default_group() = std::make_unique<ProcessGroup>(rank, world_size, where, device, options);
}

bool is_initialized() { return default_group() != nullptr; }

ProcessGroup& group() {
  MINIDL_CHECK(default_group(), "distributed: no process group; call distributed::init() first");
  return *default_group();
}

int rank() { return is_initialized() ? group().rank() : 0; }
int world_size() { return is_initialized() ? group().size() : 1; }

void destroy() { default_group().reset(); }

}  // namespace minidl::distributed
