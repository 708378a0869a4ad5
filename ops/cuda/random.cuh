#pragma once
// Random fills on cuRAND's Philox4x32-10 (device API). A fill reserves a range of the global
// generator's Philox stream with take_offset and draws element i from a fixed position in it, so a
// result depends only on manual_seed and the sequence of draws, never on the launch shape.
//
// Thread t handles kPer elements starting at t * kPer: four floats from one curand_uniform4 /
// curand_normal4, or two doubles from curand_uniform2_double / curand_normal2_double; either way it
// consumes four 32-bit draws, at stream offset base + 4 t.
#include <curand_kernel.h>

#include <mutex>

#include "core/random.h"
#include "ops/cuda/common.cuh"

namespace minidl::cuda {

template <class T>
constexpr int kRandomPer = std::is_same_v<T, float> ? 4 : 2;

/// Reserves the Philox draws for `numel` elements of T (relative to a graph's device state while
/// one captures: core/random.h).
template <class T>
PhiloxDraw reserve_philox(int64_t numel) {
  const uint64_t threads = static_cast<uint64_t>((numel + kRandomPer<T> - 1) / kRandomPer<T>);
  return default_generator().philox_draw(threads * 4);
}

/// The values one curand4 gives from `state`, as floats (four) or doubles (two).
template <class T, bool Uniform>
__device__ __forceinline__ void philox_values(curandStatePhilox4_32_10_t& state, T* v) {
  if constexpr (std::is_same_v<T, float>) {
    float4 r = Uniform ? curand_uniform4(&state) : curand_normal4(&state);
    v[0] = r.x, v[1] = r.y, v[2] = r.z, v[3] = r.w;
  } else {
    double2 r = Uniform ? curand_uniform2_double(&state) : curand_normal2_double(&state);
    v[0] = r.x, v[1] = r.y;
  }
}

/// The kRandomPer<T> values v[0..per) that thread t of a fill takes (elements t * per + j): a kernel
/// laid out otherwise draws what a fill would give the same elements. They are what
/// curand_init(seed, 0, offset + 4 t) then one curand4 give. Where that position starts a Philox
/// block (always: reservations take whole blocks, Generator::whole_steps) the state is set up
/// directly, with STATE a known 0: curand_init would also compute the next block ahead, which
/// curand4 then never reads, and the compiler can drop it only when it sees STATE. That halves the
/// Philox rounds a value costs (dropout_add_layer_norm's forward was bound by its instructions).
template <class T, bool Uniform = true>
__device__ __forceinline__ void philox_values_at(PhiloxDraw draw, uint64_t t, T* v) {
  const uint64_t seed = draw.device_state ? draw.device_state[0] : draw.seed;
  const uint64_t offset = draw.offset + (draw.device_state ? draw.device_state[1] : 0);
  const uint64_t position = offset + 4 * t;
  curandStatePhilox4_32_10_t state;
  if (position % 4 == 0) {  // the same for every thread of a launch
    const uint64_t block = position / 4;
    state.ctr = make_uint4(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u);
    state.key = make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    state.STATE = 0;
    state.boxmuller_flag = state.boxmuller_flag_double = 0;
    state.boxmuller_extra = 0.f, state.boxmuller_extra_double = 0.;
    state.output = curand_Philox4x32_10(state.ctr, state.key);
    philox_values<T, Uniform>(state, v);
  } else {
    curand_init(seed, 0, position, &state);
    philox_values<T, Uniform>(state, v);
  }
}

/// Calls store_pack(t, v) for each thread's kRandomPer<T> values v[0..per), which belong to elements
/// t * per + j (the caller checks those past numel); values are uniform on (0, 1] (Uniform = true)
/// or standard normal draws.
template <class T, bool Uniform, class StorePack>
__device__ __forceinline__ void philox_for_each_pack(PhiloxDraw draw, int64_t numel, StorePack store_pack) {
  constexpr int per = kRandomPer<T>;
  const int64_t threads = (numel + per - 1) / per;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < threads; t += int64_t(gridDim.x) * blockDim.x) {
    T v[per];
    philox_values_at<T, Uniform>(draw, static_cast<uint64_t>(t), v);
    store_pack(t, v);
  }
}

/// Calls store(i, value) for each element, value drawn as by philox_for_each_pack.
template <class T, bool Uniform, class Store>
__device__ __forceinline__ void philox_for_each(PhiloxDraw draw, int64_t numel, Store store) {
  constexpr int per = kRandomPer<T>;
  philox_for_each_pack<T, Uniform>(draw, numel, [&](int64_t t, const T* v) {
#pragma unroll
    for (int j = 0; j < per; ++j) {
      const int64_t i = t * per + j;
      if (i < numel) store(i, v[j]);
    }
  });
}

}  // namespace minidl::cuda
