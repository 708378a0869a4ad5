// Character-level corpora: UTF-8 decoding, the vocabulary, the 90/10 split and nanoGPT's batches.
#include "data/text.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "ops/ops.h"

namespace minidl::data {

namespace {

std::string hex_byte(unsigned char b) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "0x%02x", static_cast<unsigned>(b));
  return buffer;
}

std::string describe(char32_t c) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "U+%04X", static_cast<unsigned>(c));
  if (c < 0x20 || c == 0x7f) return buffer;  // a control character prints as nothing useful
  std::string out = "'";  // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "'" + std::string&&
  out += encode_utf8(std::u32string(1, c));
  out += "' (";
  out += buffer;
  out += ")";
  return out;
}

}  // namespace

std::u32string decode_utf8(std::string_view bytes, const std::string& source) {
  const std::string where = source.empty() ? "" : source + ": ";
  std::u32string out;
  out.reserve(bytes.size());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(lead);
      ++i;
      continue;
    }
    int extra = 0;
    char32_t c = 0, least = 0;
    if ((lead & 0xe0) == 0xc0) extra = 1, c = lead & 0x1f, least = 0x80;
    else if ((lead & 0xf0) == 0xe0) extra = 2, c = lead & 0x0f, least = 0x800;
    else if ((lead & 0xf8) == 0xf0) extra = 3, c = lead & 0x07, least = 0x10000;
    else
      MINIDL_FAIL(where, "invalid UTF-8 at byte offset ", i, ": ", hex_byte(lead),
                  (lead & 0xc0) == 0x80 ? " is a continuation byte without a leading byte"
                                        : " cannot start a character");
    MINIDL_CHECK(i + extra < n, where, "invalid UTF-8 at byte offset ", i, ": the text ends inside a ", extra + 1,
                 "-byte character");
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(bytes[i + k]);
      MINIDL_CHECK((next & 0xc0) == 0x80, where, "invalid UTF-8 at byte offset ", i + k,
                   ": expected a continuation byte of the character starting at offset ", i, ", found ",
                   hex_byte(next));
      c = (c << 6) | (next & 0x3f);
    }
    MINIDL_CHECK(c >= least, where, "invalid UTF-8 at byte offset ", i, ": an overlong encoding of U+",
                 static_cast<unsigned>(c));
    MINIDL_CHECK(c < 0xd800 || c > 0xdfff, where, "invalid UTF-8 at byte offset ", i, ": a UTF-16 surrogate");
    MINIDL_CHECK(c <= 0x10ffff, where, "invalid UTF-8 at byte offset ", i, ": a value past U+10FFFF");
    out.push_back(c);
    i += extra + 1;
  }
  return out;
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    } else {
      MINIDL_CHECK(c <= 0x10ffff, "encode_utf8: U+", static_cast<unsigned>(c), " is past U+10FFFF");
      out.push_back(static_cast<char>(0xf0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3f)));
    }
  }
  return out;
}

// ---- CharVocabulary ----

CharVocabulary CharVocabulary::from_text(std::string_view text) {
  std::u32string chars = decode_utf8(text);
  std::sort(chars.begin(), chars.end());
  chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
  return from_characters(encode_utf8(chars));
}

CharVocabulary CharVocabulary::from_characters(std::string_view chars) {
  CharVocabulary vocab;
  vocab.chars_ = decode_utf8(chars, "vocabulary");
  for (size_t i = 0; i < vocab.chars_.size(); ++i) {
    MINIDL_CHECK(i == 0 || vocab.chars_[i - 1] < vocab.chars_[i], "CharVocabulary: expected distinct characters in "
                 "code-point order, found ", describe(vocab.chars_[i]), " after ", describe(vocab.chars_[i - 1]));
    vocab.ids_.emplace(vocab.chars_[i], static_cast<int64_t>(i));
  }
  return vocab;
}

std::vector<int64_t> CharVocabulary::encode(std::string_view text) const {
  const std::u32string chars = decode_utf8(text);
  std::vector<int64_t> ids;
  ids.reserve(chars.size());
  for (size_t i = 0; i < chars.size(); ++i) {
    const auto it = ids_.find(chars[i]);
    MINIDL_CHECK(it != ids_.end(), "encode: the character ", describe(chars[i]), " at position ", i,
                 " is not in the vocabulary of ", size(), " characters");
    ids.push_back(it->second);
  }
  return ids;
}

std::string CharVocabulary::character(int64_t id) const {
  MINIDL_CHECK(id >= 0 && id < size(), "decode: id ", id, " is outside the vocabulary's 0..", size() - 1);
  return encode_utf8(std::u32string(1, chars_[static_cast<size_t>(id)]));
}

std::string CharVocabulary::decode(const std::vector<int64_t>& ids) const {
  std::u32string chars;
  chars.reserve(ids.size());
  for (int64_t id : ids) {
    MINIDL_CHECK(id >= 0 && id < size(), "decode: id ", id, " is outside the vocabulary's 0..", size() - 1);
    chars.push_back(chars_[static_cast<size_t>(id)]);
  }
  return encode_utf8(chars);
}

std::string CharVocabulary::decode(const Tensor& ids) const {
  MINIDL_CHECK(ids.dtype() == kInt64, "decode: expected int64 ids, found ", ids.dtype());
  return decode(ids.to(Device::cpu()).contiguous().flatten().to_vector<int64_t>());
}

// ---- CharCorpus ----

const char* split_name(Split split) { return split == Split::Train ? "train" : "val"; }

CharCorpus CharCorpus::from_file(const std::filesystem::path& path, double train_fraction) {
  std::error_code ec;
  MINIDL_CHECK(std::filesystem::exists(path, ec), "text corpus ", path.string(), " does not exist (scripts/get_data.sh "
               "--text fetches one into datasets/text/fortunes.txt)");
  MINIDL_CHECK(!std::filesystem::is_directory(path, ec), "text corpus ", path.string(), " is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  MINIDL_CHECK(in, "cannot read the text corpus ", path.string());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MINIDL_CHECK(!in.bad(), "error reading the text corpus ", path.string());
  return from_text(bytes, train_fraction, path.string());
}

CharCorpus CharCorpus::from_text(std::string_view text, double train_fraction, const std::string& source) {
  MINIDL_CHECK(train_fraction > 0 && train_fraction < 1, "CharCorpus: expected a training fraction in (0, 1), got ",
               train_fraction);
  const std::u32string chars = decode_utf8(text, source);
  MINIDL_CHECK(!chars.empty(), source, ": the text corpus is empty");
  CharCorpus corpus;
  corpus.source_ = source;
  corpus.vocab_ = CharVocabulary::from_text(text);
  const auto n = static_cast<int64_t>(chars.size());
  corpus.train_size_ = static_cast<int64_t>(static_cast<double>(n) * train_fraction);
  corpus.val_size_ = n - corpus.train_size_;
  std::vector<int64_t> ids = corpus.vocab_.encode(text);
  std::vector<int64_t> train(ids.begin(), ids.begin() + corpus.train_size_);
  std::vector<int64_t> val(ids.begin() + corpus.train_size_, ids.end());
  corpus.on_device_["cpu"] = {Tensor::from_vector(train), Tensor::from_vector(val)};
  return corpus;
}

const Tensor& CharCorpus::ids(Split split, Device device) const {
  auto it = on_device_.find(device.str());
  if (it == on_device_.end()) {
    const auto& cpu = on_device_.at("cpu");
    it = on_device_.emplace(device.str(), std::make_pair(cpu.first.to(device), cpu.second.to(device))).first;
  }
  return split == Split::Train ? it->second.first : it->second.second;
}

void CharCorpus::check_window(Split split, int64_t block_size, const char* who) const {
  MINIDL_CHECK(block_size >= 1, who, ": expected a block size of at least 1, got ", block_size);
  const int64_t n = split_size(split);
  MINIDL_CHECK(n > block_size, who, ": the ", split_name(split), " split of ", source_, " has ", n,
               " characters; a window of block_size ", block_size, " needs at least ", block_size + 1);
}

std::pair<Tensor, Tensor> CharCorpus::get_batch(Split split, int64_t batch, int64_t block_size, Device device) const {
  return windows(split, random_starts(split, batch, block_size, device), block_size);
}

Tensor CharCorpus::random_starts(Split split, int64_t batch, int64_t block_size, Device device) const {
  MINIDL_CHECK(batch >= 1, "random_starts: expected a batch of at least 1, got ", batch);
  check_window(split, block_size, "random_starts");
  NoGradGuard no_grad;
  return randint(split_size(split) - block_size, {batch}, TensorOptions().device(device));
}

std::pair<Tensor, Tensor> CharCorpus::windows(Split split, const Tensor& starts, int64_t block_size) const {
  check_window(split, block_size, "windows");
  MINIDL_CHECK(starts.dtype() == kInt64 && starts.dim() == 1 && starts.numel() >= 1,
               "windows: expected the starts as a non-empty 1-D int64 tensor, got ", starts.dtype(), " of shape ",
               starts.shape());
  const Tensor& data = ids(split, starts.device());
  const int64_t batch = starts.numel(), n = split_size(split);
  NoGradGuard no_grad;
  // Every position of every window as one index tensor, so that each of x and y is one gather on
  // the device: x reads ids[0 : n - 1] and y ids[1 : n] at the same positions. A start outside
  // 0 .. n - block_size - 1 puts a position outside both, which the gather reports.
  Tensor positions = add(starts.unsqueeze(1), arange(block_size, kInt64, starts.device()).unsqueeze(0)).flatten();
  Tensor x = index_select(data.narrow(0, 0, n - 1), 0, positions).view({batch, block_size});
  Tensor y = index_select(data.narrow(0, 1, n - 1), 0, positions).view({batch, block_size});
  return {x, y};
}

}  // namespace minidl::data
