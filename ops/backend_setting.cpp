// The conv/pool and attention backend switches. Read from the environment once, on first use, so a
// bad value fails at the first convolution (or attention) with a message naming the variable.
#include "ops/backend_setting.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace minidl {

namespace {

constexpr int kUnset = -1;
std::atomic<int> g_backend{kUnset};
std::atomic<int> g_attention_backend{kUnset};
// The limit's states besides a number of bytes: no limit, not read from the environment yet, and the
// defaults (a limit op by op, none in a graph).
constexpr size_t kNoLimit = SIZE_MAX, kLimitUnset = SIZE_MAX - 1, kDefaults = SIZE_MAX - 2;
constexpr size_t kOpByOpDefault = size_t{32} << 20;
std::atomic<size_t> g_workspace_limit{kLimitUnset};

}  // namespace

ConvBackend parse_conv_backend(const std::string& name) {
  if (name == "auto") return ConvBackend::Auto;
  if (name == "im2col") return ConvBackend::Im2col;
  if (name == "cudnn") return ConvBackend::Cudnn;
  MINIDL_FAIL("conv backend: expected \"auto\", \"im2col\" or \"cudnn\", got \"", name, "\"");
}

const char* conv_backend_name(ConvBackend backend) {
  switch (backend) {
    case ConvBackend::Cudnn: return "cudnn";
    case ConvBackend::Im2col: return "im2col";
    default: return "auto";
  }
}

namespace {

// The backend `slot` holds: the one set, else the environment variable `var` read by `parse` the
// first time (a bad value fails, naming the variable), else Auto.
template <class Backend, class Parse>
Backend backend_in(std::atomic<int>& slot, const char* var, Parse&& parse) {
  const int value = slot.load(std::memory_order_relaxed);
  if (value != kUnset) return static_cast<Backend>(value);
  Backend backend = Backend::Auto;
  if (const char* env = std::getenv(var); env && *env) {
    try {
      backend = parse(env);
    } catch (const Error& e) {
      MINIDL_FAIL(var, ": ", e.what());
    }
  }
  int expected = kUnset;
  slot.compare_exchange_strong(expected, static_cast<int>(backend));
  return static_cast<Backend>(slot.load());
}

}  // namespace

ConvBackend conv_backend() { return backend_in<ConvBackend>(g_backend, "MINIDL_CONV_BACKEND", parse_conv_backend); }

void set_conv_backend(ConvBackend backend) { g_backend.store(static_cast<int>(backend)); }

AttentionBackend parse_attention_backend(const std::string& name) {
  if (name == "auto") return AttentionBackend::Auto;
  if (name == "minidl") return AttentionBackend::Minidl;
  if (name == "cudnn") return AttentionBackend::Cudnn;
  MINIDL_FAIL("attention backend: expected \"auto\", \"minidl\" or \"cudnn\", got \"", name, "\"");
}

AttentionBackend attention_backend() {
  return backend_in<AttentionBackend>(g_attention_backend, "MINIDL_ATTENTION_BACKEND", parse_attention_backend);
}

void set_attention_backend(AttentionBackend backend) { g_attention_backend.store(static_cast<int>(backend)); }

size_t conv_workspace_limit(bool in_graph) {
  size_t value = g_workspace_limit.load(std::memory_order_relaxed);
  if (value == kLimitUnset) {
    size_t limit = kDefaults;
    if (const char* env = std::getenv("MINIDL_CONV_WORKSPACE_MB"); env && *env) {
      char* end = nullptr;
      const unsigned long long mb = std::strtoull(env, &end, 10);
      MINIDL_CHECK(end && *end == '\0' && env[0] != '-' && mb < (size_t{1} << 40),
                   "MINIDL_CONV_WORKSPACE_MB: expected a whole number of megabytes, such as 64, got \"", env, "\"");
      limit = static_cast<size_t>(mb) << 20;
    }
    size_t expected = kLimitUnset;
    g_workspace_limit.compare_exchange_strong(expected, limit);
    value = g_workspace_limit.load();
  }
  if (value == kDefaults) return in_graph ? kNoLimit : kOpByOpDefault;
  return value;
}

void set_conv_workspace_limit(size_t bytes) { g_workspace_limit.store(bytes >= kDefaults ? kNoLimit : bytes); }

void reset_conv_workspace_limit() { g_workspace_limit.store(kLimitUnset); }

namespace {

// Each switch: unset (read MINIDL_ALLOW_TF32 on first use), 0 or 1.
std::atomic<int> g_tf32_matmul{kUnset}, g_tf32_cudnn{kUnset};
std::atomic<bool> g_medium{false};  // the precision was set as "medium" (reported back as set)

bool tf32_switch(std::atomic<int>& value) {
  int v = value.load(std::memory_order_relaxed);
  if (v != kUnset) return v == 1;
  int from_env = 0;
  if (const char* env = std::getenv("MINIDL_ALLOW_TF32"); env && *env) {
    const std::string s = env;
    MINIDL_CHECK(s == "0" || s == "1", "MINIDL_ALLOW_TF32: expected 0 or 1, got \"", s, "\"");
    from_env = s == "1";
  }
  int expected = kUnset;
  value.compare_exchange_strong(expected, from_env);
  return value.load() == 1;
}

}  // namespace

void set_allow_tf32_matmul(bool allow) {
  g_medium.store(false);
  g_tf32_matmul.store(allow ? 1 : 0);
}
bool allow_tf32_matmul() { return tf32_switch(g_tf32_matmul); }
void set_allow_tf32_cudnn(bool allow) { g_tf32_cudnn.store(allow ? 1 : 0); }
bool allow_tf32_cudnn() { return tf32_switch(g_tf32_cudnn); }

void set_float32_matmul_precision(const std::string& precision) {
  MINIDL_CHECK(precision == "highest" || precision == "high" || precision == "medium",
               "set_float32_matmul_precision: expected \"highest\", \"high\" or \"medium\", got \"", precision, "\"");
  set_allow_tf32_matmul(precision != "highest");
  g_medium.store(precision == "medium");
}

std::string float32_matmul_precision() {
  if (!allow_tf32_matmul()) return "highest";
  return g_medium.load() ? "medium" : "high";
}

namespace {
std::atomic<int> g_gemm_autotune{kUnset};
}  // namespace

void set_gemm_autotune(bool on) { g_gemm_autotune.store(on ? 1 : 0); }

bool gemm_autotune() {
  const int set = g_gemm_autotune.load();
  if (set != kUnset) return set == 1;
  const char* v = std::getenv("MINIDL_GEMM_TUNE");
  return !(v && std::string(v) == "0");
}

}  // namespace minidl
