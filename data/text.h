#pragma once
// A character-level text corpus as nanoGPT's shakespeare_char prepares it: the vocabulary is the
// sorted distinct characters (Unicode code points) of a UTF-8 file, the text becomes one int64 id
// per character, the first 90% of the ids train and the rest validate, and a batch is `batch`
// random windows of `block_size` ids (x) with the same windows one character on (y).
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace minidl::data {

/// The code points of a UTF-8 string; invalid UTF-8 (a stray or missing continuation byte, an
/// overlong form, a surrogate, a value past U+10FFFF) is an error naming the byte offset, and
/// `source` (a file name) when given.   decode_utf8("h\xc3\xa9") == U"hé"
std::u32string decode_utf8(std::string_view bytes, const std::string& source = "");
/// The UTF-8 bytes of code points.   encode_utf8(U"é") == "\xc3\xa9"
std::string encode_utf8(std::u32string_view code_points);

/// The characters of a corpus in code-point order, each with its id (its position).
///   CharVocabulary vocab = CharVocabulary::from_text("hello");   // "ehlo": vocab.size() == 4
///   std::vector<int64_t> ids = vocab.encode("hole");              // {1, 3, 2, 0}
class CharVocabulary {
 public:
  CharVocabulary() = default;
  /// The sorted distinct characters of UTF-8 `text`.
  static CharVocabulary from_text(std::string_view text);
  /// The vocabulary whose characters, in id order, are the UTF-8 string `chars` (as `characters()`
  /// gives them); they must be distinct and sorted.
  static CharVocabulary from_characters(std::string_view chars);

  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  /// The ids of UTF-8 `text`; a character outside the vocabulary is an error naming it and where.
  std::vector<int64_t> encode(std::string_view text) const;
  /// The UTF-8 text of `ids`; an id outside 0..size()-1 is an error.
  std::string decode(const std::vector<int64_t>& ids) const;
  /// decode of an int64 tensor of ids (any shape, any device: read in row-major order).
  std::string decode(const Tensor& ids) const;
  /// Every character in id order as one UTF-8 string: what a checkpoint saves.
  std::string characters() const { return encode_utf8(chars_); }
  /// The character of `id` as UTF-8.
  std::string character(int64_t id) const;

 private:
  std::u32string chars_;                 // sorted, distinct
  std::map<char32_t, int64_t> ids_;      // the inverse of chars_
};

/// Which part of the ids get_batch draws from.
enum class Split { Train, Val };

/// A UTF-8 corpus as ids, split 90/10 into training and validation ids.
///   CharCorpus corpus = CharCorpus::from_file("datasets/text/fortunes.txt");
///   auto [x, y] = corpus.get_batch(Split::Train, 64, 256, Device::cuda());  // int64 [64, 256] each
class CharCorpus {
 public:
  /// Reads `path`: a missing or unreadable file, invalid UTF-8 (with the byte offset) or an empty
  /// file is an error naming the file.
  static CharCorpus from_file(const std::filesystem::path& path, double train_fraction = 0.9);
  /// The corpus of `text` (UTF-8; `source` names it in errors).
  static CharCorpus from_text(std::string_view text, double train_fraction = 0.9, const std::string& source = "text");

  const CharVocabulary& vocab() const { return vocab_; }
  /// Characters in the whole text, and in each split: train = floor(n * train_fraction), as
  /// nanoGPT's data[:int(n*0.9)].
  int64_t size() const { return train_size_ + val_size_; }
  int64_t split_size(Split split) const { return split == Split::Train ? train_size_ : val_size_; }
  /// The ids of a split, int64 [split_size] on `device` (copied there once, then kept).
  const Tensor& ids(Split split, Device device = Device::cpu()) const;

  /// `batch` windows of `block_size` ids of `split`, each starting at an index drawn uniformly from
  /// 0..split_size - block_size - 1 with the default generator (on `device`): x = ids[i : i + T],
  /// y = ids[i + 1 : i + T + 1], both int64 [batch, block_size] on `device`. The split must hold
  /// more than block_size ids. The windows are gathered on the device: no host copy per batch.
  std::pair<Tensor, Tensor> get_batch(Split split, int64_t batch, int64_t block_size,
                                      Device device = Device::cpu()) const;

  /// get_batch in two halves, for a step that gathers its own windows (in its CUDA graph, say):
  /// the starts, int64 [batch] on `device` (torch.randint(split_size - block_size, (batch,))), and
  /// the windows at given starts. get_batch(s, b, t, d) is windows(s, random_starts(s, b, t, d), t).
  Tensor random_starts(Split split, int64_t batch, int64_t block_size, Device device = Device::cpu()) const;
  /// Starts out of range (negative, or past split_size - block_size - 1) are an error.
  std::pair<Tensor, Tensor> windows(Split split, const Tensor& starts, int64_t block_size) const;

 private:
  void check_window(Split split, int64_t block_size, const char* who) const;

  CharVocabulary vocab_;
  int64_t train_size_ = 0, val_size_ = 0;
  std::string source_;
  // Per device ("cpu", "cuda:0"): the ids of each split, made on first use.
  mutable std::map<std::string, std::pair<Tensor, Tensor>> on_device_;
};

/// The name of a split in messages and metrics: "train" or "val".
const char* split_name(Split split);

}  // namespace minidl::data
