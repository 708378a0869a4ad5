// libFuzzer target: the character-level text readers on any bytes. Input: one control byte, then
// the bytes. Control bit 0 clear: CharCorpus::from_file reads them as a corpus file. Set:
// CharVocabulary::from_characters takes them as the vocabulary a checkpoint's metadata holds
// (apps/char_gpt.cpp resumes and samples from it). Either may throw minidl::Error and nothing else:
// any other exception, crash, sanitizer report or leak is a bug. What they accept must hold
// together: the text encodes to ids of the vocabulary and decodes back to the same bytes, the
// splits add up to its characters, a window past a split's end is an error, and a vocabulary
// rebuilt from its own characters is the same.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/text.h"
#include "fuzz_input.h"

using namespace minidl;

namespace {

void check_round_trip(const data::CharVocabulary& vocab, std::string_view text) {
  const std::vector<int64_t> ids = vocab.encode(text);
  for (int64_t id : ids)
    if (id < 0 || id >= vocab.size()) fuzz::fail("encode gave an id outside the vocabulary");
  if (vocab.decode(ids) != text) fuzz::fail("decode(encode(text)) is not the text");
}

void check_corpus(const std::string& path, std::string_view text) {
  data::CharCorpus corpus;
  try {
    corpus = data::CharCorpus::from_file(path);
  } catch (const Error&) {
    return;
  }
  const data::CharVocabulary& vocab = corpus.vocab();
  if (vocab.size() < 1) fuzz::fail("an accepted corpus has an empty vocabulary");
  if (static_cast<size_t>(corpus.size()) != data::decode_utf8(text).size())
    fuzz::fail("the splits do not add up to the text's characters");
  check_round_trip(vocab, text);
  if (data::CharVocabulary::from_characters(vocab.characters()).characters() != vocab.characters())
    fuzz::fail("a vocabulary rebuilt from its characters differs");
  const int64_t train = corpus.split_size(data::Split::Train);
  if (train >= 2) {
    const int64_t block = train - 1;  // the longest window the split holds
    auto [x, y] = corpus.windows(data::Split::Train, Tensor::from_vector<int64_t>({0}), block);
    if (x.size(1) != block || y.size(1) != block) fuzz::fail("a window has the wrong length");
    bool refused = false;
    try {
      corpus.windows(data::Split::Train, Tensor::from_vector<int64_t>({1}), block);
    } catch (const Error&) {
      refused = true;
    }
    if (!refused) fuzz::fail("a window past the split's end was accepted");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((data[0] & 1) == 0) {
    check_corpus(fuzz::write_input("input.txt", data + 1, size - 1), bytes);
    return 0;
  }
  data::CharVocabulary vocab;
  try {
    vocab = data::CharVocabulary::from_characters(bytes);
  } catch (const Error&) {
    return 0;
  }
  // Its characters must be the bytes it was made from (so rebuilding it from them, as the corpus
  // path checks, would only repeat this load).
  if (vocab.characters() != bytes) fuzz::fail("an accepted vocabulary's characters differ from its bytes");
  check_round_trip(vocab, bytes);
  return 0;
}
