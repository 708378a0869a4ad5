// Float32 GEMMs on cuBLASLt. cuBLAS's own choice for the small products of training (a batch of 64
// against a 784 x 512 weight) is often a split-K kernel followed by a reduction kernel, and often
// not the fastest; which is fastest depends on the shape and the GPU. So, as cudnn.benchmark does
// for convolutions, every configuration cuBLASLt accepts for a shape (its heuristic's picks, and
// each algorithm with each tile, split-K and reduction scheme) is timed on it and the fastest is
// kept. That happens the second time a shape comes, not the first: a shape that comes once (the
// last, partial batch of an epoch) is not worth the milliseconds of timing, and a step captured
// into a CUDA graph has run eagerly at least twice before. The bias and the ReLU of a linear layer
// go into the GEMM's epilogue. Float32 is strict (CUBLAS_COMPUTE_32F) unless TF32 is allowed
// (allow_tf32_matmul, ops/backend_setting.h: CUBLAS_COMPUTE_32F_FAST_TF32); bfloat16 and float16
// products take A, B, D and the bias in their type and accumulate in float32 (CUBLAS_COMPUTE_32F,
// float alpha and beta), as PyTorch's do. The data type and the compute type are part of the key of
// a shape's timed choice.
//
// A product may be given a limit on its thread blocks (max_blocks): the weight gradient that runs on
// the side stream beside the rest of a backward (ops/cuda/matmul.cpp, gemm_concurrent). It then
// takes the fastest configuration within the limit, where there is one no more than 3x slower than
// the fastest of all, else the fastest of all.
//
// A product may also be a batch of products of one shape at fixed strides (LtBatch): the slices of
// a linear layer's product split along k (ops/cuda/matmul.cpp, gemm_bias_split_k), timed as one.
//
// set_gemm_autotune(false) or MINIDL_GEMM_TUNE=0 (ops/backend_setting.h) keeps the heuristic's first
// pick instead of timing; MINIDL_GEMM_TUNE=verbose also prints, for every shape timed, the time of
// the pick and of the heuristic's first. Deterministic mode
// (core/deterministic.h) also runs the heuristic's first pick, whatever was timed: every
// configuration is deterministic by itself (split-K reductions are ordered), but which one timing
// picks can change from run to run.
#include "ops/cuda/cublaslt.h"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/deterministic.h"
#include "ops/backend_setting.h"
#include "ops/cuda/timing.h"

namespace minidl::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{8} << 20;  // enough for every split-K the heuristic offers here
constexpr int kHeuristicCandidates = 8;

// One handle per device, and one workspace per stream: GEMMs on one stream run in order, and the
// side stream's may run while the compute stream's do.
struct LtDevice {
  cublasLtHandle_t handle = nullptr;
  std::map<cudaStream_t, void*> workspaces;
};

struct LtStream {
  cublasLtHandle_t handle;
  void* workspace;
};

LtStream lt_stream(int device, cudaStream_t stream) {
  static std::mutex mutex;
  static auto* devices = new std::map<int, LtDevice>();  // never destroyed: used until exit
  std::lock_guard lock(mutex);
  LtDevice& d = (*devices)[device];
  if (!d.handle) CUBLAS_CHECK(cublasLtCreate(&d.handle));
  void*& workspace = d.workspaces[stream];
  // Outside the caching allocator: library scratch, like cuBLAS's own workspace, not model memory.
  if (!workspace) CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
  return {d.handle, workspace};
}

const char* tune_setting() {
  static const char* v = std::getenv("MINIDL_GEMM_TUNE");
  return v ? v : "";
}

// The largest power of two (up to 256) dividing a pointer: cuBLASLt's kernels assume 256-byte
// alignment unless told otherwise, and views can start anywhere.
uint32_t alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 4 && address % a != 0) a /= 2;
  return a;
}

cudaDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return CUDA_R_32F;
    case DType::BFloat16: return CUDA_R_16BF;
    case DType::Float16: return CUDA_R_16F;
    default: MINIDL_FAIL("gemm on cuBLASLt: expected float32, bfloat16 or float16, got ", dtype);
  }
}

cublasComputeType_t compute_type(const LtTypes& types) {
  return types.dtype == DType::Float32 && types.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// The alignment every matrix of a batch keeps: the first's, and no more than its stride allows.
uint32_t alignment(const void* p, const LtBatch& batch, int64_t stride, size_t element) {
  if (batch.count <= 1) return alignment(p);
  return std::min(alignment(p), alignment(reinterpret_cast<const void*>(stride * element)));
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's first; empty: cuBLASLt cannot do it
  size_t chosen = 0;  // index into candidates
  int seen = 0;       // calls outside graph capture so far
  std::string name;   // "m x n x k, ops, epilogue", for the log
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t type = CUDA_R_32F;      // of A, B and the bias
  cudaDataType_t out_type = CUDA_R_32F;  // of D
  bool timed = false;
  int64_t max_blocks = 0;     // 0: no limit
  std::atomic<bool> within_limit = false;  // timed, and the pick keeps to max_blocks
  // Held from the choice to the launch (the bias pointer is set on desc). Per plan, so that one
  // device's timing never holds up another device's GEMMs: with ranks as threads of one process,
  // the other rank may have to reach its next collective before this device's work can finish.
  std::mutex mutex;
  ~Plan() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    for (auto layout : {a, b, d})
      if (layout) cublasLtMatrixLayoutDestroy(layout);
  }
};

// The last three: the data types of A and B and of D, and the compute type (a TF32 plan is another plan).
using Key = std::tuple<int, int64_t, int64_t, int64_t, bool, bool, int, uint32_t, uint32_t, uint32_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int>;

Key plan_key(int device, int64_t m, int64_t n, int64_t k, bool trans_a, const void* a, bool trans_b, const void* b,
             const void* d, LtEpilogue epilogue, int64_t max_blocks, const LtBatch& batch, const LtTypes& types) {
  const size_t e = element_size(types.dtype);
  return {device,         m,          n,          k,           trans_a,        trans_b,
          static_cast<int>(epilogue), alignment(a, batch, batch.stride_a, e), alignment(b, batch, batch.stride_b, e),
          alignment(d, batch, batch.stride_d, element_size(types.out)), max_blocks,
          batch.count,    batch.stride_a, batch.stride_b, batch.stride_d, batch.ld_a, batch.ld_b,
          static_cast<int>(types.dtype), static_cast<int>(types.out), static_cast<int>(compute_type(types))};
}

struct Plans {
  std::mutex mutex;  // the map only
  std::map<Key, std::unique_ptr<Plan>> map;
};

Plans& plans() {
  static auto* all = new Plans();  // never destroyed: used until exit
  return *all;
}

// One of a configuration's settings (cublasLt.h's CUBLASLT_ALGO_CONFIG_*), or `unset` where it has none.
template <class V>
V config_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute, V unset) {
  V value = unset;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof value, &written) != CUBLAS_STATUS_SUCCESS)
    return unset;
  return value;
}

// Thread blocks of a configuration on `batch` m x n outputs: its tiles times its slices of k, times
// the batch. Tiles are cuBLASLt's enum (cublasLt.h), rows x columns; an unknown one counts as
// unbounded.
int64_t block_count(const cublasLtMatmulAlgo_t& algo, int64_t m, int64_t n, int64_t batch) {
  static constexpr int kTiles[][2] = {
      {0, 0},     {8, 8},     {8, 16},    {16, 8},    {8, 32},    {16, 16},   {32, 8},    {8, 64},   {16, 32},
      {32, 16},   {64, 8},    {32, 32},   {32, 64},   {64, 32},   {32, 128},  {64, 64},   {128, 32}, {64, 128},
      {128, 64},  {64, 256},  {128, 128}, {256, 64},  {64, 512},  {128, 256}, {256, 128}, {512, 64}, {64, 96},
      {96, 64},   {96, 128},  {128, 160}, {160, 128}, {192, 128}, {128, 192}, {128, 96},  {32, 256}, {256, 32}};
  const uint32_t tile = config_value<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, 0);
  const int32_t splits = config_value<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1);
  if (tile == 0 || tile >= std::size(kTiles)) return std::numeric_limits<int64_t>::max();
  const int64_t rows = kTiles[tile][0], cols = kTiles[tile][1];
  return ((m + rows - 1) / rows) * ((n + cols - 1) / cols) * std::max<int32_t>(splits, 1) * batch;
}

// Sets a layout's batch: `count` matrices, `stride` elements apart.
void set_batch(cublasLtMatrixLayout_t layout, int64_t count, int64_t stride) {
  const int32_t n = static_cast<int32_t>(count);
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                sizeof stride));
}

void create_plan(Plan& p, cublasLtHandle_t handle, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                 LtEpilogue epilogue, uint32_t align_a, uint32_t align_b, uint32_t align_d, const LtBatch& batch,
                 const LtTypes& types) {
  const cudaDataType_t type = data_type(types.dtype);
  p.compute = compute_type(types);
  p.type = type;
  p.out_type = data_type(types.out);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasLtEpilogue_t ep = epilogue == LtEpilogue::BiasRelu ? CUBLASLT_EPILOGUE_RELU_BIAS
                                : epilogue == LtEpilogue::Bias   ? CUBLASLT_EPILOGUE_BIAS
                                                                 : CUBLASLT_EPILOGUE_DEFAULT;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, p.compute, CUDA_R_32F));  // float alpha and beta
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
  if (epilogue != LtEpilogue::None) {
    MINIDL_CHECK(types.out == types.dtype, "gemm on cuBLASLt: a bias epilogue takes one dtype, got ",
                 dtype_name(types.dtype), " inputs and a ", dtype_name(types.out), " output");
    const cudaDataType_t bias_type = type;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                sizeof bias_type));
  }
  const char* ep_name = epilogue == LtEpilogue::BiasRelu ? " bias+relu" : epilogue == LtEpilogue::Bias ? " bias" : "";
  p.name = std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) + (trans_a ? " T" : " N") +
           (trans_b ? "T" : "N") + ep_name + (batch.count > 1 ? ", batch of " + std::to_string(batch.count) : "") +
           (types.dtype != DType::Float32 ? std::string(", ") + dtype_name(types.dtype)
            : p.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? std::string(", tf32") : std::string()) +
           (types.out != types.dtype ? std::string(" -> ") + dtype_name(types.out) : std::string());
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int64_t ld_a = batch.ld_a ? batch.ld_a : trans_a ? k : m, ld_b = batch.ld_b ? batch.ld_b : trans_b ? n : k;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, type, u(trans_a ? k : m), u(trans_a ? m : k), ld_a));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, type, u(trans_b ? n : k), u(trans_b ? k : n), ld_b));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, p.out_type, u(m), u(n), m));
  if (batch.count > 1) {
    set_batch(p.a, batch.count, batch.stride_a);
    set_batch(p.b, batch.count, batch.stride_b);
    set_batch(p.d, batch.count, batch.stride_d);
  }

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                    sizeof align_a));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                    sizeof align_b));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                    sizeof align_d));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                    sizeof align_d));
  cublasLtMatmulHeuristicResult_t results[kHeuristicCandidates]{};
  int count = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, kHeuristicCandidates, results, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(status);
  for (int i = 0; i < count; ++i) p.candidates.push_back(results[i].algo);
}

template <class V>
std::vector<V> capability_list(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attribute) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attribute, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS || bytes == 0)
    return {};
  std::vector<V> values(bytes / sizeof(V));
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attribute, values.data(), bytes, &bytes) != CUBLAS_STATUS_SUCCESS)
    return {};
  return values;
}

template <class V>
V capability(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attribute) {
  V value{};
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attribute, &value, sizeof value, &written) != CUBLAS_STATUS_SUCCESS)
    return V{};
  return value;
}

// Adds every configuration cuBLASLt accepts for the plan's product beyond the heuristic's few: each
// algorithm with each of its tiles, unsplit and split along k in 2 to 8 or 16 parts with each reduction
// scheme it supports (the stage count left to cuBLASLt where it allows, else the first it accepts).
// The small products of training are where the heuristic's pick is most often not the fastest.
void add_all_configurations(cublasLtHandle_t handle, Plan& p) {
  constexpr int kMaxIds = 256;
  constexpr size_t kMaxCandidates = 400;
  int ids[kMaxIds];
  int id_count = 0;
  if (cublasLtMatmulAlgoGetIds(handle, p.compute, CUDA_R_32F, p.type, p.type, p.out_type, p.out_type, kMaxIds, ids,
                               &id_count) != CUBLAS_STATUS_SUCCESS)
    return;
  const auto accepted = [&](cublasLtMatmulAlgo_t& algo) {
    cublasLtMatmulHeuristicResult_t result{};
    return cublasLtMatmulAlgoCheck(handle, p.desc, p.a, p.b, p.d, p.d, &algo, &result) == CUBLAS_STATUS_SUCCESS &&
           result.workspaceSize <= kWorkspaceBytes;
  };
  for (int i = 0; i < id_count && p.candidates.size() < kMaxCandidates; ++i) {
    cublasLtMatmulAlgo_t base{};
    if (cublasLtMatmulAlgoInit(handle, p.compute, CUDA_R_32F, p.type, p.type, p.out_type, p.out_type, ids[i], &base) !=
        CUBLAS_STATUS_SUCCESS)
      continue;
    // No emulated floating point: the compute type asked for, and nothing else.
    if (capability<int32_t>(base, CUBLASLT_ALGO_CAP_FLOATING_POINT_EMULATION_SUPPORT)) continue;
    std::vector<uint32_t> tiles = capability_list<uint32_t>(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    if (tiles.empty()) tiles.push_back(CUBLASLT_MATMUL_TILE_UNDEFINED);
    const std::vector<uint32_t> stages = capability_list<uint32_t>(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    const bool can_split = capability<int32_t>(base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
    const uint32_t schemes = capability<uint32_t>(base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    for (uint32_t tile : tiles) {
      // Odd counts too: a product limited to a few blocks may fit only a tile count times 3, 5 or 7.
      for (int32_t splits : {1, 2, 3, 4, 5, 6, 7, 8, 16}) {
        if (splits > 1 && !can_split) break;
        for (uint32_t scheme : {CUBLASLT_REDUCTION_SCHEME_NONE, CUBLASLT_REDUCTION_SCHEME_INPLACE,
                                CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE}) {
          if ((splits == 1) != (scheme == CUBLASLT_REDUCTION_SCHEME_NONE)) continue;
          if (splits > 1 && !(schemes & scheme)) continue;
          cublasLtMatmulAlgo_t algo = base;
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile);
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof splits);
          cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme);
          bool ok = accepted(algo);
          for (size_t s = 0; !ok && s < stages.size(); ++s) {
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages[s], sizeof stages[s]);
            ok = accepted(algo);
          }
          if (ok) p.candidates.push_back(algo);
        }
      }
    }
  }
}

// "algo A, tile T, S splits, scheme R, W bytes of workspace": what a configuration is, for the log.
std::string describe(cublasLtHandle_t handle, const Plan& p, size_t candidate) {
  const cublasLtMatmulAlgo_t& algo = p.candidates[candidate];
  cublasLtMatmulHeuristicResult_t result{};
  cublasLtMatmulAlgoCheck(handle, p.desc, p.a, p.b, p.d, p.d, &algo, &result);
  return "algo " + std::to_string(config_value<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID, -1)) + ", tile " +
         std::to_string(config_value<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, 0)) + ", " +
         std::to_string(config_value<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1)) + " splits, scheme " +
         std::to_string(config_value<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, 0)) + ", " +
         std::to_string(result.workspaceSize) + " bytes of workspace";
}

cublasStatus_t launch(const LtStream& dev, cudaStream_t stream, const Plan& p, size_t candidate, const void* a,
                      const void* b, void* d, float alpha, float beta) {
  return cublasLtMatmul(dev.handle, p.desc, &alpha, a, p.a, b, p.b, &beta, d, p.d, d, p.d, &p.candidates[candidate],
                        dev.workspace, kWorkspaceBytes, stream);
}

// Times the candidates on the real inputs, writing a scratch output, and keeps the fastest. Each is
// timed as a captured step runs it: calls captured in a CUDA graph, then replayed, with no host in
// the measurement. Some of cuBLASLt's configurations zero a counter in their workspace before their
// kernel, one more node in every replay, which the time of the kernel alone does not show. A first
// pass times every candidate on a short replay; the five fastest are timed again on longer ones.
// False when no candidate runs.
bool choose_by_timing(int device, const LtStream& dev, cudaStream_t stream, Plan& p, const void* a, const void* b,
                      int64_t m, int64_t n, float alpha, float beta, const LtBatch& batch, size_t element) {
  // From the caching allocator, not cudaMalloc/cudaFree: cudaFree waits for every stream of the
  // device, a data-parallel all-reduce included, which waits for the other ranks.
  Allocator& allocator = allocator_for(Device::cuda(device));
  const int64_t last = batch.count > 1 ? (batch.count - 1) * batch.stride_d : 0;
  const size_t scratch_bytes = static_cast<size_t>(last + m * n) * element;
  void* scratch = allocator.allocate(scratch_bytes);
  const auto run = [&](size_t c) { CUBLAS_CHECK(launch(dev, stream, p, c, a, b, scratch, alpha, beta)); };
  std::vector<std::pair<float, size_t>> first_pass;  // microseconds, candidate
  for (size_t c = 0; c < p.candidates.size(); ++c) {
    // A candidate that refuses these pointers or this beta is skipped.
    if (launch(dev, stream, p, c, a, b, scratch, alpha, beta) != CUBLAS_STATUS_SUCCESS) continue;
    first_pass.emplace_back(time_per_replay_us(stream, [&] { run(c); }, 4, 1), c);
  }
  const float heuristic_us = !first_pass.empty() && first_pass[0].second == 0 ? first_pass[0].first : -1;
  std::sort(first_pass.begin(), first_pass.end());
  const float fastest_us = first_pass.empty() ? -1 : first_pass[0].first;
  if (p.max_blocks > 0) {
    std::vector<std::pair<float, size_t>> within;
    for (const auto& entry : first_pass)
      if (block_count(p.candidates[entry.second], m, n, batch.count) <= p.max_blocks) within.push_back(entry);
    // A configuration that small pays only where the work beside it hides the time it loses: in the
    // MNIST MLP, 2.1x the fastest (21.7 against 10.2 us) shortened the step. nanoGPT's weight
    // gradients (k = 16384 rows) lost 8-9x on 29 blocks (265 against about 30 us on an H100), far
    // more than the next layer's work, and the step waited for them.
    constexpr float kMostSlowdown = 3.0f;
    p.within_limit = !within.empty() && within[0].first <= kMostSlowdown * fastest_us;
    if (p.within_limit) first_pass = std::move(within);
  }
  float best_us = -1;
  for (size_t i = 0; i < std::min<size_t>(5, first_pass.size()); ++i) {
    const size_t c = first_pass[i].second;
    const float us = time_per_replay_us(stream, [&] { run(c); }, 8, 3);
    if (best_us < 0 || us < best_us) best_us = us, p.chosen = c;
  }
  allocator.deallocate(scratch, scratch_bytes);
  p.timed = true;
  if (gemm_tuning_verbose()) {
    std::fprintf(stderr, "minidl: gemm %s: candidate %zu of %zu, %.1f us (heuristic's first %.1f us), %s",
                 p.name.c_str(), p.chosen, p.candidates.size(), best_us, heuristic_us,
                 describe(dev.handle, p, p.chosen).c_str());
    if (p.max_blocks > 0)
      std::fprintf(stderr, ", %lld blocks of at most %lld%s (fastest of any %.1f us)",
                   static_cast<long long>(block_count(p.candidates[p.chosen], m, n, batch.count)),
                   static_cast<long long>(p.max_blocks), p.within_limit ? "" : ": none fits, or none within 3x", fastest_us);
    std::fprintf(stderr, "\n");
  }
  return best_us >= 0;
}

}  // namespace

int64_t side_stream_blocks(int device) { return std::max<int64_t>(1, multiprocessor_count(device) * 22 / 100); }

bool gemm_tuning_enabled() { return gemm_autotune(); }
bool gemm_tuning_verbose() { return std::strcmp(tune_setting(), "verbose") == 0; }

bool lt_keeps_within(int device, int64_t m, int64_t n, int64_t k, bool trans_a, const void* a, bool trans_b,
                     const void* b, const void* d, int64_t max_blocks, const LtTypes& types) {
  Plans& all = plans();
  std::lock_guard lock(all.mutex);
  const auto it =
      all.map.find(plan_key(device, m, n, k, trans_a, a, trans_b, b, d, LtEpilogue::None, max_blocks, {}, types));
  return it != all.map.end() && it->second->within_limit && !is_deterministic();
}

bool lt_matmul(int device, cudaStream_t stream, int64_t m, int64_t n, int64_t k, bool trans_a, const void* a,
               bool trans_b, const void* b, void* d, float alpha, float beta, LtEpilogue epilogue, const void* bias,
               int64_t max_blocks, const LtBatch& batch, const LtTypes& types) {
  if (m <= 0 || n <= 0 || k <= 0 || batch.count <= 0) return false;
  if (bias && alignment(bias) < 16) return false;
  const LtStream dev = lt_stream(device, stream);
  Plan* plan;
  {
    Plans& all = plans();
    std::lock_guard lock(all.mutex);
    auto& slot = all.map[plan_key(device, m, n, k, trans_a, a, trans_b, b, d, epilogue, max_blocks, batch, types)];
    if (!slot) {
      slot = std::make_unique<Plan>();
      slot->max_blocks = max_blocks;
      const size_t e = element_size(types.dtype);
      create_plan(*slot, dev.handle, m, n, k, trans_a, trans_b, epilogue, alignment(a, batch, batch.stride_a, e),
                  alignment(b, batch, batch.stride_b, e), alignment(d, batch, batch.stride_d, element_size(types.out)),
                  batch, types);
    }
    plan = slot.get();
  }
  Plan& p = *plan;
  std::lock_guard plan_lock(p.mutex);
  if (p.candidates.empty()) return false;
  if (epilogue != LtEpilogue::None)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const bool deterministic = is_deterministic();
  if (!p.timed && gemm_tuning_enabled() && !deterministic) {
    // Timing needs the device to run now: inside a graph capture, use the current choice.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    if (capture == cudaStreamCaptureStatusNone && ++p.seen >= 2) {
      add_all_configurations(dev.handle, p);
      if (!choose_by_timing(device, dev, stream, p, a, b, m, n, alpha, beta, batch, element_size(types.out))) {
        p.candidates.clear();
        return false;
      }
    }
  }
  CUBLAS_CHECK(launch(dev, stream, p, deterministic ? 0 : p.chosen, a, b, d, alpha, beta));
  return true;
}

}  // namespace minidl::cuda
