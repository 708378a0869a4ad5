#pragma once
// Helpers of the file tests (safetensors, checkpoints): a fresh folder per test, raw bytes in and
// out, and bit-exact snapshots of a model's or an optimizer's tensors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "minidl.h"
#include "nn/nn.h"
#include "optim/optim.h"

namespace minidl::testing {

namespace fs = std::filesystem;

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Every tensor by name with a hash of its bytes: two snapshots are equal only if every value is
/// bit-identical, and a failure names the tensors that differ.
using Snapshot = std::map<std::string, std::string>;

inline Snapshot snapshot(const std::map<std::string, Tensor>& state) {
  Snapshot out;
  for (auto& [name, t] : state) {
    Tensor c = t.to(Device::cpu()).contiguous();
    uint64_t hash = 1469598103934665603ull;  // FNV-1a
    for (size_t i = 0; i < c.nbytes(); ++i)
      hash = (hash ^ static_cast<const uint8_t*>(c.raw_data())[i]) * 1099511628211ull;
    out[name] = detail::concat(c.dtype(), " ", c.shape(), " #", hash);
  }
  return out;
}
inline Snapshot snapshot(const nn::Module& m) { return snapshot(m.state_dict()); }
inline Snapshot snapshot(const optim::Optimizer& opt) { return snapshot(opt.state_dict()); }

// Not `values`: float64_util.h's minidl::testing::values returns doubles, and two inline functions of
// one name and parameters are one function to the linker, whichever body it keeps (at -O0, where
// nothing is inlined, a test then read float32 elements as float64 ones).
inline std::vector<float> float32_values(const Tensor& t) { return t.to_vector<float>(); }

/// Parameters and buffers (BatchNorm running statistics and an int64 count), and dropout.
inline nn::Sequential small_model() {
  return nn::Sequential(nn::Linear(6, 8), nn::ReLU(), nn::BatchNorm1d(8), nn::Dropout(0.25), nn::Linear(8, 3));
}

/// A fixture whose tests each work in a folder of their own, removed afterwards.
class TempFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("minidl_" + std::string(test->test_suite_name()) + "_" + test->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  size_t files_in_dir() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }

  fs::path dir_;
};

}  // namespace minidl::testing
