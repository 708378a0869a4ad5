// Data loading: the IDX reader on generated files (good and broken), MNIST on a tiny generated
// folder, data-folder resolution, and the DataLoader's order, batching, threading and errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <stdexcept>

#include "data/data.h"
#include "minidl.h"
#include "test_util.h"

namespace minidl::data_test {

using minidl::testing::expect_error;
using namespace minidl::data;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(gen() & 0xff);
  return out;
}

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// IDX bytes with any header, consistent or not.
std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  auto put32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
  };
  put32(magic);
  for (uint32_t d : dims) put32(d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

uint32_t crc32(const std::vector<uint8_t>& data) {
  uint32_t crc = 0xffffffffu;
  for (uint8_t b : data) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A gzip file made of stored (uncompressed) deflate blocks: lets a test compress any bytes without
// zlib, and checks the reader against an encoder other than its own.
std::vector<uint8_t> gzip_stored(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(65535, data.size() - pos);
    const bool last = pos + n == data.size();
    out.push_back(last ? 1 : 0);
    out.push_back(static_cast<uint8_t>(n & 0xff));
    out.push_back(static_cast<uint8_t>(n >> 8));
    out.push_back(static_cast<uint8_t>(~n & 0xff));
    out.push_back(static_cast<uint8_t>((~n >> 8) & 0xff));
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(pos), data.begin() + static_cast<std::ptrdiff_t>(pos + n));
    pos += n;
  } while (pos < data.size());
  const uint32_t crc = crc32(data), size = static_cast<uint32_t>(data.size());
  for (int s = 0; s < 32; s += 8) out.push_back(static_cast<uint8_t>(crc >> s));
  for (int s = 0; s < 32; s += 8) out.push_back(static_cast<uint8_t>(size >> s));
  return out;
}

class DataFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("minidl_test_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A path as a user might pass it: relative to the working directory. Errors must still name the
  // absolute path.
  static fs::path relative(const fs::path& p) { return fs::relative(p, fs::current_path()); }

  // Writes a consistent split: `n` images of rows x cols and `n` labels in 0..9.
  void write_split(const fs::path& folder, const std::string& split, int64_t n, int64_t rows, int64_t cols,
                   bool dot_names = false, bool gz = false) {
    fs::create_directories(folder);
    images_ = random_bytes(static_cast<size_t>(n * rows * cols), 1);
    labels_.clear();
    for (int64_t i = 0; i < n; ++i) labels_.push_back(static_cast<uint8_t>((i * 7 + 3) % 10));
    const std::string sep = dot_names ? "." : "-", ext = gz ? ".gz" : "";
    write_idx(folder / (split + "-images" + sep + "idx3-ubyte" + ext), {n, rows, cols}, images_);
    write_idx(folder / (split + "-labels" + sep + "idx1-ubyte" + ext), {n}, labels_);
  }

  fs::path dir_;
  std::vector<uint8_t> images_, labels_;
};

}  // namespace

// ---- IDX files ----

TEST_F(DataFiles, IdxRoundTripsEveryNamingAndCompression) {
  for (bool dot : {false, true}) {
    for (bool gz : {false, true}) {
      for (bool train : {true, false}) {
        const fs::path folder = dir_ / (std::to_string(dot) + std::to_string(gz) + std::to_string(train));
        write_split(folder, train ? "train" : "t10k", 5, 3, 4, dot, gz);
        IdxSplit split = read_idx_split(relative(folder), train);
        EXPECT_EQ(split.images.shape, (std::vector<int64_t>{5, 3, 4}));
        EXPECT_EQ(split.labels.shape, (std::vector<int64_t>{5}));
        EXPECT_EQ(split.images.bytes, images_);
        EXPECT_EQ(split.labels.bytes, labels_);
        EXPECT_TRUE(split.images.path.is_absolute());
        EXPECT_EQ(split.images.path.extension() == ".gz", gz);
        // A split that is not there is not picked up from the other one.
        EXPECT_THROW(read_idx_split(folder, !train), Error);
      }
    }
  }
}

TEST_F(DataFiles, IdxReadsGzipFromAnotherEncoderAndConcatenatedMembers) {
  const std::vector<uint8_t> payload = random_bytes(70000, 2);  // spans two stored blocks
  const std::vector<uint8_t> file = idx_bytes(0x801, {70000}, payload);
  write_all(dir_ / "a.gz", gzip_stored(file));
  EXPECT_EQ(read_idx(dir_ / "a.gz", 1).bytes, payload);
  // Two gzip members back to back decompress to their concatenation, as with `cat a.gz b.gz`.
  std::vector<uint8_t> first(file.begin(), file.begin() + 1000), second(file.begin() + 1000, file.end());
  std::vector<uint8_t> both = gzip_stored(first), tail = gzip_stored(second);
  both.insert(both.end(), tail.begin(), tail.end());
  write_all(dir_ / "b.gz", both);
  EXPECT_EQ(read_idx(dir_ / "b.gz", 1).bytes, payload);
  // Gzip data is recognized by content, whatever the name.
  write_all(dir_ / "c-idx1-ubyte", gzip_stored(file));
  EXPECT_EQ(read_idx(dir_ / "c-idx1-ubyte", 1).bytes, payload);
}

TEST_F(DataFiles, IdxHeaderErrorsNameTheAbsolutePath) {
  const fs::path p = dir_ / "x-idx3-ubyte";
  const std::string abs = p.string();
  write_all(p, idx_bytes(0x12340803, {1, 2, 2}, {1, 2, 3, 4}));
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "not an IDX file", "expected magic number 0x00000803", "found 0x12340803"});
  write_all(p, idx_bytes(0x00000903, {1, 2, 2}, {1, 2, 3, 4}));
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "0x00000803", "found 0x00000903"});
  // A labels file where images were expected: right type, wrong dimension count.
  write_idx(p, {4}, {1, 2, 3, 4});
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "wrong number of dimensions", "expected 3", "found 1"});
  write_idx(p, {2, 2}, {1, 2, 3, 4});
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "expected 3", "found 2 (magic 0x00000802)"});
  write_all(p, {0, 0});
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "holds only 2 bytes"});
  write_all(p, idx_bytes(0x803, {1, 2}, {}));
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "truncated header", "found 8 bytes"});
  write_all(p, {});
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "holds only 0 bytes"});
  expect_error([&] { read_idx(relative(dir_ / "missing-idx3-ubyte"), 3); }, {(dir_ / "missing-idx3-ubyte").string(), "does not exist"});
  expect_error([&] { read_idx(relative(dir_), 3); }, {dir_.string(), "found a folder"});
}

TEST_F(DataFiles, IdxSizeErrorsNameTheAbsolutePath) {
  const fs::path p = dir_ / "x-idx3-ubyte";
  const std::string abs = p.string();
  write_idx(p, {3, 4, 5}, random_bytes(60, 3));
  fs::resize_file(p, fs::file_size(p) - 1);
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "truncated file", "shape [3, 4, 5]", "needs 76 bytes", "has 75"});
  write_idx(p, {3, 4, 5}, random_bytes(60, 3));
  std::vector<uint8_t> bytes = read_all(p);
  bytes.push_back(0);
  bytes.push_back(0);
  write_all(p, bytes);
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "2 trailing bytes", "needs 76 bytes", "has 78"});
  // A header claiming far more than any file holds fails on the size, before allocating it.
  write_all(p, idx_bytes(0x803, {0xffffffffu, 0xffffffffu, 0xffffu}, {1, 2, 3}));
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "implausible header"});
  write_all(p, idx_bytes(0x803, {60000, 28, 28}, {1, 2, 3}));
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "truncated file", "needs 47040016 bytes", "has 19"});

  // The same inside gzip, where the size is known only by decompressing.
  const fs::path g = dir_ / "y-idx1-ubyte.gz";
  write_all(g, gzip_stored(idx_bytes(0x801, {10}, random_bytes(9, 4))));
  expect_error([&] { read_idx(relative(g), 1); }, {g.string(), "truncated decompressed data", "needs 18 bytes", "ends after 17"});
  write_all(g, gzip_stored(idx_bytes(0x801, {10}, random_bytes(11, 4))));
  expect_error([&] { read_idx(relative(g), 1); }, {g.string(), "trailing bytes", "decompressed data is longer"});
  write_all(g, gzip_stored(idx_bytes(0x801, {0x7fffffff}, random_bytes(5, 4))));
  expect_error([&] { read_idx(relative(g), 1); }, {g.string(), "truncated decompressed data"});
}

TEST_F(DataFiles, CorruptGzipIsAnErrorNotACrash) {
  const fs::path good = dir_ / "good-idx3-ubyte.gz";
  write_idx(good, {20, 28, 28}, random_bytes(20 * 28 * 28, 5));
  const std::vector<uint8_t> bytes = read_all(good);
  ASSERT_GT(bytes.size(), 200u);
  const fs::path p = dir_ / "bad-idx3-ubyte.gz";
  const std::string abs = p.string();

  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() / 2));
  write_all(p, cut);
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "corrupt gzip file", "ends early"});
  // Only the 8-byte trailer missing: all data decompresses, but the CRC cannot be checked.
  write_all(p, std::vector<uint8_t>(bytes.begin(), bytes.end() - 8));
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "corrupt gzip file"});

  std::vector<uint8_t> flipped = bytes;
  for (size_t i = 100; i < 140; ++i) flipped[i] ^= 0x5a;
  write_all(p, flipped);
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "corrupt gzip file"});

  std::vector<uint8_t> bad_crc = bytes;
  bad_crc[bad_crc.size() - 6] ^= 0xff;
  write_all(p, bad_crc);
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "corrupt gzip file", "incorrect data check"});

  std::vector<uint8_t> junk = bytes;
  junk.insert(junk.end(), {'j', 'u', 'n', 'k'});
  write_all(p, junk);
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "corrupt gzip file", "after the end of the compressed data"});

  std::vector<uint8_t> bad_header = bytes;
  bad_header[2] = 7;  // compression method other than deflate
  write_all(p, bad_header);
  expect_error([&] { read_idx(relative(p), 3); }, {abs, "corrupt gzip file"});

  write_idx(dir_ / "plain-idx1-ubyte", {3}, {1, 2, 3});
  fs::rename(dir_ / "plain-idx1-ubyte", p);
  expect_error([&] { read_idx(relative(p), 1); }, {abs, "expected gzip data", "found 00 00"});
}

TEST_F(DataFiles, RandomDamageNeverCrashes) {
  // Whatever the damage, the reader either returns data of the size its header states or throws
  // minidl::Error; any other outcome (a crash, another exception) fails.
  std::mt19937 gen(11);
  for (bool gz : {false, true}) {
    const fs::path good = dir_ / (gz ? "good-idx3-ubyte.gz" : "good-idx3-ubyte");
    write_idx(good, {4, 6, 5}, random_bytes(120, 8));
    const std::vector<uint8_t> bytes = read_all(good);
    const fs::path p = dir_ / (gz ? "bad-idx3-ubyte.gz" : "bad-idx3-ubyte");
    for (int trial = 0; trial < 90; ++trial) {
      std::vector<uint8_t> damaged = bytes;
      switch (trial % 3) {
        case 0: damaged[gen() % damaged.size()] ^= static_cast<uint8_t>(1 + gen() % 255); break;
        case 1: damaged.resize(gen() % damaged.size()); break;
        default: damaged.insert(damaged.begin() + static_cast<std::ptrdiff_t>(gen() % damaged.size()), static_cast<uint8_t>(gen())); break;
      }
      write_all(p, damaged);
      try {
        IdxArray a = read_idx(p, 3);
        EXPECT_EQ(a.bytes.size(), static_cast<size_t>(a.shape[0] * a.shape[1] * a.shape[2]));
      } catch (const Error&) {
      }
    }
  }
}

TEST_F(DataFiles, SplitErrors) {
  const fs::path folder = dir_ / "split";
  expect_error([&] { read_idx_split(relative(folder), true); }, {folder.string(), "does not exist"});
  fs::create_directories(folder);
  write_idx(folder / "train-images-idx3-ubyte", {3, 2, 2}, random_bytes(12, 6));
  expect_error([&] { read_idx_split(relative(folder), true); },
               {folder.string(), "no training labels file", "train-labels-idx1-ubyte", "train-labels.idx1-ubyte.gz"});
  write_idx(folder / "train-labels.idx1-ubyte.gz", {4}, {1, 2, 3, 4});
  expect_error([&] { read_idx_split(relative(folder), true); },
               {"counts differ", (folder / "train-images-idx3-ubyte").string(), "3 images",
                (folder / "train-labels.idx1-ubyte.gz").string(), "4 labels"});
}

// ---- MNIST on generated files ----

TEST_F(DataFiles, MnistNormalizesAndFindsItsFolder) {
  write_split(dir_ / "mnist", "t10k", 6, 3, 4);
  for (const fs::path& root : {dir_, dir_ / "mnist"}) {  // the data folder, or the files' own folder
    MNIST test_set(relative(root), /*train=*/false);
    EXPECT_FALSE(test_set.is_train());
    EXPECT_EQ(test_set.folder(), dir_ / "mnist");
    EXPECT_EQ(test_set.size(), 6);
    EXPECT_EQ(test_set.images().shape(), (Shape{6, 1, 3, 4}));
    EXPECT_EQ(test_set.images().dtype(), kFloat32);
    EXPECT_EQ(test_set.targets().dtype(), kInt64);
    std::vector<float> x = test_set.images().to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_FLOAT_EQ(x[i], static_cast<float>((images_[i] / 255.0 - 0.1307) / 0.3081));
    }
    std::vector<int64_t> y = test_set.targets().to_vector<int64_t>();
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], labels_[i]);
    Example<> e = test_set.get(2);
    EXPECT_EQ(e.data.shape(), (Shape{1, 3, 4}));
    EXPECT_EQ(e.target.item<int64_t>(), labels_[2]);
    EXPECT_FLOAT_EQ(e.data.contiguous().to_vector<float>()[0], x[2 * 12]);
  }
  write_split(dir_ / "fashion-mnist", "train", 2, 2, 2, true, true);
  FashionMNIST fashion(dir_);
  EXPECT_FLOAT_EQ(fashion.images().to_vector<float>()[1], static_cast<float>((images_[1] / 255.0 - 0.2860) / 0.3530));
}

TEST_F(DataFiles, MnistMissingFilesSayHowToFetchThem) {
  const fs::path root = dir_ / "nowhere";
  expect_error([&] { MNIST(relative(root), true); },
               {"MNIST training files not found", (root / "mnist").string(), "get_data.sh", "--dir " + root.string()});
  expect_error([&] { FashionMNIST(relative(root), false); }, {"Fashion-MNIST test files", "get_data.sh --fashion"});
  // Training files do not stand in for test files.
  write_split(dir_ / "mnist", "train", 2, 2, 2);
  expect_error([&] { MNIST(dir_, false); }, {"t10k-images-idx3-ubyte", "get_data.sh"});
}

TEST_F(DataFiles, MnistRejectsLabelsOutsideTheClasses) {
  fs::create_directories(dir_ / "mnist");
  write_idx(dir_ / "mnist" / "train-images-idx3-ubyte", {3, 2, 2}, random_bytes(12, 7));
  write_idx(dir_ / "mnist" / "train-labels-idx1-ubyte", {3}, {1, 12, 3});
  expect_error([&] { MNIST(dir_, true); }, {(dir_ / "mnist" / "train-labels-idx1-ubyte").string(), "label 12 at index 1"});
}

TEST(DataRoot, ResolvesLikeTheFetchScript) {
  const char* old = std::getenv("MINIDL_DATA");
  const std::string saved = old ? old : "";
  ::unsetenv("MINIDL_DATA");
  EXPECT_EQ(resolve_data_root("/data/x", "/src"), fs::path("/data/x"));
  EXPECT_EQ(resolve_data_root("", "/src/minidl"), fs::path("/src/minidl/datasets"));
  EXPECT_EQ(resolve_data_root("", nullptr), (fs::current_path() / "datasets").lexically_normal());
  EXPECT_EQ(resolve_data_root("rel", nullptr), (fs::current_path() / "rel").lexically_normal());
  EXPECT_EQ(data_root(), fs::path(MINIDL_SOURCE_DIR) / "datasets");
  ::setenv("MINIDL_DATA", "/env/data", 1);
  EXPECT_EQ(resolve_data_root("", "/src/minidl"), fs::path("/env/data"));
  EXPECT_EQ(data_root(), fs::path("/env/data"));
  EXPECT_EQ(data_root("/explicit"), fs::path("/explicit"));
  if (old) ::setenv("MINIDL_DATA", saved.c_str(), 1); else ::unsetenv("MINIDL_DATA");
  const std::string cmd = get_data_command("/d", true);
  EXPECT_NE(cmd.find("get_data.sh --fashion --dir /d"), std::string::npos) << cmd;
}

// ---- DataLoader ----

namespace {

// Example i has data [i, 10 i] and target i, so a batch shows which examples it holds.
TensorDataset numbered(int64_t n) {
  std::vector<float> data;
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < n; ++i) {
    data.push_back(static_cast<float>(i));
    data.push_back(static_cast<float>(10 * i));
    targets.push_back(i);
  }
  return TensorDataset(Tensor::from_vector(data, {n, 2}), Tensor::from_vector(targets));
}

// The targets of one epoch, batch by batch, checking that each data row belongs to its target.
std::vector<std::vector<int64_t>> epoch_targets(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (Batch& batch : loader) {
    EXPECT_EQ(batch.data.dtype(), kFloat32);
    EXPECT_EQ(batch.target.dtype(), kInt64);
    EXPECT_EQ(batch.data.dim(), 2);
    EXPECT_EQ(batch.target.shape(), (Shape{batch.size()}));
    std::vector<int64_t> t = batch.target.to_vector<int64_t>();
    std::vector<float> d = batch.data.to_vector<float>();
    for (size_t k = 0; k < t.size(); ++k) {
      EXPECT_EQ(d[2 * k], static_cast<float>(t[k]));
      EXPECT_EQ(d[2 * k + 1], static_cast<float>(10 * t[k]));
    }
    out.push_back(t);
  }
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// A data set written the way a user would: computed examples, nothing stored.
struct Squares : Dataset {
  explicit Squares(int64_t n, int64_t throw_at = -1) : n(n), throw_at(throw_at) {}
  int64_t size() const override { return n; }
  Example<> get(int64_t i) const override {
    if (i == throw_at) throw std::runtime_error("broken example " + std::to_string(i));
    return {full({1, 2}, static_cast<double>(i)), full({}, static_cast<double>(i * i), kInt64)};
  }
  int64_t n, throw_at;
};

}  // namespace

TEST(DataLoader, CoversEveryExampleOncePerEpoch) {
  const int64_t n = 10;
  for (bool shuffle : {false, true}) {
    for (bool drop_last : {false, true}) {
      for (int64_t bs : {1, 3, 5, 10, 12}) {
        SCOPED_TRACE("shuffle " + std::to_string(shuffle) + " drop_last " + std::to_string(drop_last) + " batch " +
                     std::to_string(bs));
        DataLoader loader(numbered(n), DataLoaderOptions().batch_size(bs).shuffle(shuffle).seed(1).drop_last(drop_last));
        const int64_t full_batches = n / bs, rest = n % bs;
        EXPECT_EQ(loader.size(), full_batches + (rest && !drop_last ? 1 : 0));
        for (int epoch = 0; epoch < 2; ++epoch) {
          auto batches = epoch_targets(loader);
          ASSERT_EQ(static_cast<int64_t>(batches.size()), loader.size());
          for (size_t b = 0; b < batches.size(); ++b) {
            const bool last_partial = b + 1 == batches.size() && rest && !drop_last;
            EXPECT_EQ(static_cast<int64_t>(batches[b].size()), last_partial ? rest : bs);
          }
          std::vector<int64_t> seen = flat(batches);
          std::set<int64_t> unique(seen.begin(), seen.end());
          EXPECT_EQ(unique.size(), seen.size()) << "an example came twice";
          EXPECT_EQ(static_cast<int64_t>(seen.size()), drop_last ? full_batches * bs : n);
          for (int64_t v : seen) EXPECT_TRUE(v >= 0 && v < n);
          if (!shuffle) {
            for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int64_t>(i));
          }
        }
        EXPECT_EQ(loader.epoch(), 2);
      }
    }
  }
}

TEST(DataLoader, ShuffleIsSeededAndChangesEachEpoch) {
  auto orders = [](std::optional<uint64_t> seed) {
    DataLoader loader(numbered(200), DataLoaderOptions().batch_size(16).shuffle(true).seed(seed));
    std::vector<int64_t> e0 = flat(epoch_targets(loader));
    std::vector<int64_t> e1 = flat(epoch_targets(loader));
    return std::make_pair(e0, e1);
  };
  auto a = orders(7), b = orders(7), c = orders(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a.first, a.second);
  EXPECT_NE(a.first, c.first);
  std::vector<int64_t> sorted = a.first;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, a.first) << "not shuffled";

  // set_epoch resumes a run's order; without a seed the global generator decides.
  DataLoader resumed(numbered(200), DataLoaderOptions().batch_size(16).shuffle(true).seed(7));
  resumed.set_epoch(1);
  EXPECT_EQ(flat(epoch_targets(resumed)), a.second);
  manual_seed(3);
  auto d = orders(std::nullopt);
  manual_seed(3);
  auto e = orders(std::nullopt);
  EXPECT_EQ(d, e);
}

TEST(DataLoader, BatchesOfImagesAndLabels) {
  Tensor images = rand({50, 1, 4, 5});
  Tensor labels = Tensor::from_vector(std::vector<int64_t>(50, 3));
  DataLoader loader(TensorDataset(images, labels), DataLoaderOptions(8).shuffle(true).seed(2));
  int64_t count = 0;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.data.shape(), (Shape{batch.size(), 1, 4, 5}));
    EXPECT_EQ(batch.data.dtype(), kFloat32);
    EXPECT_EQ(batch.target.shape(), (Shape{batch.size()}));
    EXPECT_EQ(batch.target.dtype(), kInt64);
    EXPECT_TRUE(batch.data.device().is_cpu());
    EXPECT_TRUE(batch.data.is_contiguous());
    EXPECT_FALSE(batch.data.impl().storage == images.impl().storage) << "a batch must not alias the data set";
    count += batch.size();
  }
  EXPECT_EQ(count, 50);
  // Gathering matches index_select on the same rows.
  DataLoader ordered(TensorDataset(images, labels), DataLoaderOptions(8));
  Batch first = *ordered.begin();
  EXPECT_EQ(first.data.to_vector<float>(), index_select(images, arange(8, kInt64)).to_vector<float>());
}

TEST(DataLoader, UserDatasetIsStacked) {
  DataLoader loader(Squares(11), DataLoaderOptions().batch_size(4).shuffle(true).seed(3));
  EXPECT_EQ(loader.size(), 3);
  std::vector<int64_t> seen;
  for (Batch& batch : loader) {
    EXPECT_EQ(batch.data.shape(), (Shape{batch.size(), 1, 2}));
    std::vector<float> d = batch.data.to_vector<float>();
    std::vector<int64_t> t = batch.target.to_vector<int64_t>();
    for (size_t k = 0; k < t.size(); ++k) {
      EXPECT_EQ(t[k], static_cast<int64_t>(d[2 * k]) * static_cast<int64_t>(d[2 * k]));
      seen.push_back(static_cast<int64_t>(d[2 * k]));
    }
  }
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> all(11);
  for (int64_t i = 0; i < 11; ++i) all[static_cast<size_t>(i)] = i;
  EXPECT_EQ(seen, all);
  // Shared ownership works too.
  auto shared = std::make_shared<Squares>(3);
  DataLoader from_ptr(shared, DataLoaderOptions(2));
  int64_t batches = 0;
  for (Batch& batch : from_ptr) batches += batch.size() > 0;
  EXPECT_EQ(batches, 2);
}

TEST(DataLoader, ExceptionsInTheWorkerReachTheLoop) {
  // In a later batch, after some have been delivered.
  DataLoader loader(Squares(20, /*throw_at=*/13), DataLoaderOptions(4));
  int64_t delivered = 0;
  try {
    for (Batch& batch : loader) delivered += batch.size();
    ADD_FAILURE() << "the loop finished without the example's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "broken example 13");
  }
  EXPECT_EQ(delivered, 12);
  // In the first batch: begin() throws.
  DataLoader first(Squares(5, /*throw_at=*/0), DataLoaderOptions(2));
  EXPECT_THROW(first.begin(), std::runtime_error);
  // Examples that cannot be stacked.
  struct Ragged : Dataset {
    int64_t size() const override { return 4; }
    Example<> get(int64_t i) const override { return {zeros({i == 2 ? 3 : 2}), zeros({}, kInt64)}; }
  };
  expect_error([] { DataLoader l(Ragged(), DataLoaderOptions(4)); for (Batch& b : l) (void)b; },
               {"cannot stack", "example 2", "[3]", "[2]"});
}

TEST(DataLoader, BreakingEarlyOrDroppingTheLoaderStopsTheWorker) {
  DataLoader loader(numbered(5000), DataLoaderOptions(1).shuffle(true).seed(4));
  for (int round = 0; round < 20; ++round) {
    int64_t taken = 0;
    for (Batch& batch : loader) {
      taken += batch.size();
      if (taken == 3) break;
    }
    EXPECT_EQ(taken, 3);
  }
  EXPECT_EQ(loader.epoch(), 20);
  // An iterator that outlives its loader ends instead of hanging.
  DataLoader::Iterator it;
  {
    DataLoader doomed(numbered(5000), DataLoaderOptions(1));
    it = doomed.begin();
    EXPECT_EQ(it->target.item<int64_t>(), 0);
  }
  int64_t after = 0;
  for (; it != DataLoader::Iterator(); ++it) ++after;
  EXPECT_LE(after, 3) << "only batches already prepared may follow";
  // A worker blocked on a full queue is released when the loader goes away mid-epoch.
  for (int round = 0; round < 20; ++round) {
    DataLoader l(Squares(100), DataLoaderOptions(1).prefetch(1));
    auto i = l.begin();
    ++i;
  }
}

TEST(DataLoader, EdgeCasesAndBadOptions) {
  DataLoader empty(numbered(0), DataLoaderOptions(4));
  EXPECT_EQ(empty.size(), 0);
  EXPECT_TRUE(empty.begin() == empty.end());
  DataLoader small(numbered(3), DataLoaderOptions(4).drop_last(true));
  EXPECT_EQ(small.size(), 0);
  EXPECT_TRUE(small.begin() == small.end());
  expect_error([] { DataLoader l(numbered(3), DataLoaderOptions(0)); }, {"batch_size must be positive"});
  expect_error([] { DataLoader l(numbered(3), DataLoaderOptions(2).prefetch(0)); }, {"prefetch"});
  expect_error([] { DataLoader l(std::shared_ptr<const Dataset>(), DataLoaderOptions(2)); }, {"null"});
  expect_error([] { TensorDataset(zeros({3, 2}), zeros({4}, kInt64)); }, {"3 examples", "4"});
  expect_error([] { numbered(3).get(3); }, {"out of range"});
  DataLoaderOptions o = DataLoaderOptions().batch_size(64).shuffle(true).seed(9).drop_last(true);
  EXPECT_EQ(o.batch_size(), 64);
  EXPECT_TRUE(o.shuffle());
  EXPECT_EQ(o.seed(), 9u);
  EXPECT_TRUE(o.drop_last());
  EXPECT_EQ(o.device(), Device::cpu());
}

}  // namespace minidl::data_test
