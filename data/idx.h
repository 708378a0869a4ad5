#pragma once
// IDX files, the format of MNIST and Fashion-MNIST: a big-endian header (magic number 0x0000080N
// for N dimensions of unsigned bytes, then N sizes) followed by the bytes in row-major order.
// Files may be raw or gzip-compressed. Every problem is a minidl::Error that names the absolute
// path, what was expected and what was found.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace minidl::data {

/// The contents of one IDX file of unsigned bytes.
///   IdxArray a = read_idx("/data/mnist/t10k-labels-idx1-ubyte", 1);  // a.shape == {10000}
struct IdxArray {
  std::filesystem::path path;  // absolute
  std::vector<int64_t> shape;  // from the header
  std::vector<uint8_t> bytes;  // shape's product of them, row-major
};

/// Reads an IDX file of unsigned bytes with `ndim` dimensions (magic 0x0000080<ndim>), raw or .gz.
/// Checks the magic number, the dimension count, and that the data is exactly as long as the
/// header says (no truncation, no trailing bytes); corrupt gzip data is an error too.
///   IdxArray images = read_idx("datasets/mnist/train-images-idx3-ubyte", 3);
IdxArray read_idx(const std::filesystem::path& path, int ndim);

/// Writes an IDX file of unsigned bytes; gzip-compressed when the name ends in .gz.
///   write_idx("/tmp/labels-idx1-ubyte.gz", {3}, std::vector<uint8_t>{1, 2, 3});
void write_idx(const std::filesystem::path& path, const std::vector<int64_t>& shape, const std::vector<uint8_t>& bytes);

/// The file of a split in `folder`: `split` is "train" or "t10k", `kind` "images" (idx3) or
/// "labels" (idx1). Tries, in order, `train-images-idx3-ubyte`, `train-images.idx3-ubyte`, and
/// both names with `.gz`. Empty when none exists.
///   auto p = find_idx_file("datasets/mnist", "t10k", "labels");
std::optional<std::filesystem::path> find_idx_file(const std::filesystem::path& folder, const std::string& split,
                                                   const std::string& kind);

/// The names find_idx_file tries, in its order.
std::vector<std::string> idx_file_names(const std::string& split, const std::string& kind);

/// Images [N, rows, cols] and labels [N] of one split of an MNIST-format folder.
struct IdxSplit {
  IdxArray images;
  IdxArray labels;
};

/// Reads the training (`train`) or test split from `folder` and checks that the image and label
/// counts agree.   IdxSplit test = read_idx_split("datasets/mnist", /*train=*/false);
IdxSplit read_idx_split(const std::filesystem::path& folder, bool train);

}  // namespace minidl::data
