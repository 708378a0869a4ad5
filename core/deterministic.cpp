#include "core/deterministic.h"

namespace minidl {

namespace detail {
std::atomic<bool> deterministic_mode{false};
}  // namespace detail

void set_deterministic(bool enabled) { detail::deterministic_mode.store(enabled, std::memory_order_relaxed); }

}  // namespace minidl
