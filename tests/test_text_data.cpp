// The character-level corpus (data/text.h): UTF-8 decoding and its errors, the vocabulary, the
// 90/10 split and nanoGPT's get_batch windows.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/cuda.h"
#include "data/text.h"
#include "minidl.h"

namespace minidl::text_data_test {

using data::CharCorpus;
using data::CharVocabulary;
using data::Split;

namespace {

// Characters of one, two, three and four UTF-8 bytes: 'a', 'é' (U+00E9), '€' (U+20AC), '😀' (U+1F600).
const std::string kSample = "caf\xc3\xa9 \xe2\x82\xac" "5\n\xf0\x9f\x98\x80 a caf\xc3\xa9!";

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::filesystem::path write_temp(const std::string& name, const std::string& bytes) {
  auto path = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

}  // namespace

TEST(TextData, Utf8DecodesEveryLengthAndRoundTrips) {
  const std::u32string chars = data::decode_utf8(kSample);
  EXPECT_EQ(chars.size(), 17u);
  EXPECT_EQ(chars[3], U'\u00e9');
  EXPECT_EQ(chars[5], U'\u20ac');
  EXPECT_EQ(chars[8], U'\U0001F600');
  EXPECT_EQ(data::encode_utf8(chars), kSample);
}

TEST(TextData, InvalidUtf8NamesTheByteOffset) {
  EXPECT_NE(error_of([] { data::decode_utf8("ab\x80", "f.txt"); }).find("f.txt: invalid UTF-8 at byte offset 2"),
            std::string::npos);
  EXPECT_NE(error_of([] { data::decode_utf8("abc\xc3"); }).find("byte offset 3: the text ends inside a 2-byte"),
            std::string::npos);
  EXPECT_NE(error_of([] { data::decode_utf8("a\xe2\x28\xa1"); }).find("byte offset 2: expected a continuation"),
            std::string::npos);
  EXPECT_NE(error_of([] { data::decode_utf8("\xc0\xaf"); }).find("overlong"), std::string::npos);
  EXPECT_NE(error_of([] { data::decode_utf8("x\xed\xa0\x80"); }).find("offset 1: a UTF-16 surrogate"),
            std::string::npos);
  EXPECT_NE(error_of([] { data::decode_utf8("\xf4\x90\x80\x80"); }).find("past U+10FFFF"), std::string::npos);
  EXPECT_NE(error_of([] { data::decode_utf8("\xff"); }).find("0xff cannot start a character"), std::string::npos);
}

TEST(TextData, VocabularyIsTheSortedDistinctCodePoints) {
  const CharVocabulary vocab = CharVocabulary::from_text(kSample);
  // "\n", " ", "!", "5", "a", "c", "f", "é", "€", "😀"
  ASSERT_EQ(vocab.size(), 10);
  EXPECT_EQ(vocab.characters(), "\n !5acf\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(vocab.encode("caf\xc3\xa9"), (std::vector<int64_t>{5, 4, 6, 7}));
  EXPECT_EQ(vocab.decode(vocab.encode(kSample)), kSample);
  EXPECT_EQ(vocab.decode(Tensor::from_vector<int64_t>({9, 8}, {1, 2})), "\xf0\x9f\x98\x80\xe2\x82\xac");
  // A checkpoint saves characters() and rebuilds the same ids from it.
  const CharVocabulary restored = CharVocabulary::from_characters(vocab.characters());
  EXPECT_EQ(restored.encode(kSample), vocab.encode(kSample));
}

TEST(TextData, VocabularyErrorsNameTheCharacterOrId) {
  const CharVocabulary vocab = CharVocabulary::from_text(kSample);
  const std::string unknown = error_of([&] { vocab.encode("cafe"); });
  EXPECT_NE(unknown.find("the character 'e' (U+0065) at position 3 is not in the vocabulary"), std::string::npos)
      << unknown;
  EXPECT_NE(error_of([&] { vocab.encode("\t"); }).find("U+0009"), std::string::npos);
  EXPECT_NE(error_of([&] { vocab.decode(std::vector<int64_t>{10}); }).find("id 10 is outside the vocabulary's 0..9"),
            std::string::npos);
  EXPECT_NE(error_of([] { CharVocabulary::from_characters("ba"); }).find("code-point order"), std::string::npos);
}

TEST(TextData, SplitIsNinetyTenInTextOrder) {
  const std::string text = "abcdefghijklmnopqrstuvwxyz0123";  // 30 characters
  const CharCorpus corpus = CharCorpus::from_text(text);
  EXPECT_EQ(corpus.size(), 30);
  EXPECT_EQ(corpus.split_size(Split::Train), 27);  // int(30 * 0.9)
  EXPECT_EQ(corpus.split_size(Split::Val), 3);
  EXPECT_EQ(corpus.vocab().decode(corpus.ids(Split::Train)), text.substr(0, 27));
  EXPECT_EQ(corpus.vocab().decode(corpus.ids(Split::Val)), text.substr(27));
  // nanoGPT's int(n * 0.9) truncates: 11 characters give 9 and 2.
  EXPECT_EQ(CharCorpus::from_text("hello world").split_size(Split::Train), 9);
}

TEST(TextData, GetBatchDrawsWindowsAndTheirNextCharacters) {
  // Every character distinct, so a window's ids say where it starts.
  std::string text;
  for (char c = '!'; c <= '~'; ++c) text.push_back(c);  // 94 characters: 84 train, 10 val
  const CharCorpus corpus = CharCorpus::from_text(text);
  manual_seed(3);
  auto [x, y] = corpus.get_batch(Split::Train, 5, 8);
  ASSERT_EQ(x.shape(), (Shape{5, 8}));
  ASSERT_EQ(y.shape(), (Shape{5, 8}));
  EXPECT_EQ(x.dtype(), kInt64);
  const auto xs = x.to_vector<int64_t>(), ys = y.to_vector<int64_t>();
  for (int64_t b = 0; b < 5; ++b) {
    const int64_t start = xs[b * 8];
    EXPECT_GE(start, 0);
    EXPECT_LT(start, 84 - 8);  // randint(len - block_size): y's last id stays inside the split
    for (int64_t t = 0; t < 8; ++t) {
      EXPECT_EQ(xs[b * 8 + t], start + t);
      EXPECT_EQ(ys[b * 8 + t], start + t + 1);
    }
  }
  // The validation windows come from the validation ids, and the same seed draws the same windows.
  auto [vx, vy] = corpus.get_batch(Split::Val, 3, 9);
  EXPECT_EQ(vx.to_vector<int64_t>(), (std::vector<int64_t>{84, 85, 86, 87, 88, 89, 90, 91, 92, 84, 85, 86, 87, 88, 89,
                                                           90, 91, 92, 84, 85, 86, 87, 88, 89, 90, 91, 92}));
  EXPECT_EQ(vy.select(0, 0).to_vector<int64_t>().back(), 93);
  manual_seed(3);
  EXPECT_EQ(corpus.get_batch(Split::Train, 5, 8).first.to_vector<int64_t>(), xs);
}

TEST(TextData, GetBatchStartsCoverTheSplitUniformly) {
  std::string text;
  for (char c = '!'; c <= '~'; ++c) text.push_back(c);
  const CharCorpus corpus = CharCorpus::from_text(text);
  manual_seed(0);
  auto [x, y] = corpus.get_batch(Split::Train, 7600, 4);
  std::vector<int> count(84, 0);
  const auto xs = x.select(1, 0).contiguous().to_vector<int64_t>();
  for (int64_t s : xs) ++count[static_cast<size_t>(s)];
  for (int s = 0; s < 80; ++s) EXPECT_GT(count[s], 50) << "start " << s;  // 95 expected each
  for (int s = 80; s < 84; ++s) EXPECT_EQ(count[s], 0) << "start " << s;
}

// get_batch's two halves: the starts drawn as get_batch draws them, and the windows at given starts,
// the last possible start included; a start past it, or before 0, is an error, not a window that
// reads beyond the split.
TEST(TextData, WindowsAtGivenStartsAreGetBatchsHalves) {
  std::string text;
  for (char c = '!'; c <= '~'; ++c) text.push_back(c);  // ids 0..93: 84 train, 10 val
  const CharCorpus corpus = CharCorpus::from_text(text);
  auto [x, y] = corpus.windows(Split::Train, Tensor::from_vector(std::vector<int64_t>{0, 75, 40}), 8);
  ASSERT_EQ(x.shape(), (Shape{3, 8}));
  const auto xs = x.to_vector<int64_t>(), ys = y.to_vector<int64_t>();
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < 8; ++t) {
      const int64_t start = std::vector<int64_t>{0, 75, 40}[static_cast<size_t>(b)];
      EXPECT_EQ(xs[b * 8 + t], start + t);
      EXPECT_EQ(ys[b * 8 + t], start + t + 1);
    }
  EXPECT_EQ(ys[15], 83) << "the last start's target is the split's last id";
  auto [vx, vy] = corpus.windows(Split::Val, Tensor::from_vector(std::vector<int64_t>{1}), 4);
  EXPECT_EQ(vx.to_vector<int64_t>(), (std::vector<int64_t>{85, 86, 87, 88}));
  EXPECT_EQ(vy.to_vector<int64_t>(), (std::vector<int64_t>{86, 87, 88, 89}));

  manual_seed(5);
  const auto [bx, by] = corpus.get_batch(Split::Train, 6, 8);
  manual_seed(5);
  const Tensor starts = corpus.random_starts(Split::Train, 6, 8);
  EXPECT_EQ(starts.shape(), (Shape{6}));
  EXPECT_EQ(corpus.windows(Split::Train, starts, 8).first.to_vector<int64_t>(), bx.to_vector<int64_t>());
  EXPECT_EQ(corpus.windows(Split::Train, starts, 8).second.to_vector<int64_t>(), by.to_vector<int64_t>());

  for (int64_t bad : {int64_t{76}, int64_t{-1}}) {
    const std::string message =
        error_of([&] { corpus.windows(Split::Train, Tensor::from_vector(std::vector<int64_t>{3, bad}), 8); });
    EXPECT_NE(message.find("index_select"), std::string::npos) << "start " << bad << ": " << message;
  }
  EXPECT_NE(error_of([&] { corpus.windows(Split::Train, Tensor::from_vector(std::vector<float>{3}), 8); })
                .find("expected the starts as a non-empty 1-D int64 tensor, got float32"),
            std::string::npos);
}

TEST(TextData, BadCorporaAndBatchesGiveClearErrors) {
  EXPECT_NE(error_of([] { CharCorpus::from_file("/nonexistent/corpus.txt"); }).find("/nonexistent/corpus.txt does not "
                                                                                   "exist"),
            std::string::npos);
  const auto empty = write_temp("minidl_empty_corpus", "");
  EXPECT_NE(error_of([&] { CharCorpus::from_file(empty); }).find("the text corpus is empty"), std::string::npos);
  std::filesystem::remove(empty);
  const auto invalid = write_temp("minidl_invalid_corpus", "hello\nw\xf6rld\n");
  const std::string message = error_of([&] { CharCorpus::from_file(invalid); });
  EXPECT_NE(message.find(invalid.string() + ": invalid UTF-8 at byte offset 8"), std::string::npos) << message;
  std::filesystem::remove(invalid);

  const CharCorpus corpus = CharCorpus::from_text("abcdefghijklmnopqrstuvwxyz0123");  // val: 3 characters
  EXPECT_NE(error_of([&] { corpus.get_batch(Split::Val, 2, 3); }).find("the val split of text has 3 characters; a "
                                                                        "window of block_size 3 needs at least 4"),
            std::string::npos);
  EXPECT_NE(error_of([&] { corpus.get_batch(Split::Train, 0, 3); }).find("at least 1"), std::string::npos);
}

TEST(TextData, FileRoundTrip) {
  const auto path = write_temp("minidl_text_corpus", kSample + kSample);
  const CharCorpus corpus = CharCorpus::from_file(path);
  std::filesystem::remove(path);
  EXPECT_EQ(corpus.size(), 34);
  EXPECT_EQ(corpus.vocab().decode(corpus.ids(Split::Train)) + corpus.vocab().decode(corpus.ids(Split::Val)),
            kSample + kSample);
}

TEST(TextData, CudaBatchesAreGatheredOnTheDevice) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  std::string text;
  for (char c = '!'; c <= '~'; ++c) text.push_back(c);
  const CharCorpus corpus = CharCorpus::from_text(text);
  EXPECT_TRUE(corpus.ids(Split::Train, Device::cuda()).device().is_cuda());
  auto [x, y] = corpus.get_batch(Split::Train, 16, 32, Device::cuda());
  ASSERT_TRUE(x.device().is_cuda());
  ASSERT_TRUE(y.device().is_cuda());
  const auto xs = x.to(Device::cpu()).to_vector<int64_t>(), ys = y.to(Device::cpu()).to_vector<int64_t>();
  for (int64_t b = 0; b < 16; ++b) {
    const int64_t start = xs[b * 32];
    EXPECT_LT(start, 84 - 32);
    for (int64_t t = 0; t < 32; ++t) {
      EXPECT_EQ(xs[b * 32 + t], start + t);
      EXPECT_EQ(ys[b * 32 + t], start + t + 1);
    }
  }
  // The windows at given starts, the last possible one included, are the CPU's.
  const Tensor starts = Tensor::from_vector(std::vector<int64_t>{51, 0, 17});
  auto [cx, cy] = corpus.windows(Split::Train, starts.to(Device::cuda()), 32);
  EXPECT_EQ(cx.to(Device::cpu()).to_vector<int64_t>(), corpus.windows(Split::Train, starts, 32).first.to_vector<int64_t>());
  EXPECT_EQ(cy.to(Device::cpu()).to_vector<int64_t>(), corpus.windows(Split::Train, starts, 32).second.to_vector<int64_t>());
}

}  // namespace minidl::text_data_test
