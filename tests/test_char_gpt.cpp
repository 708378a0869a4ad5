// apps/char_gpt end to end on the CPU: a small GPT (2 layers, 64 wide, context 64) trained for 50
// iterations on a text the test writes must predict it well below the text's unigram entropy (the
// best loss without context: about 2.9 nats here, 1.4 reached); then it samples from its checkpoint,
// resumes, and refuses bad prompts with clear errors. About 10 s on 2 idle cores.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "app_process.h"
#include "apps/common/gpt.h"
#include "core/cuda.h"
#include "data/text.h"

namespace minidl::char_gpt_test {

namespace {

#ifdef MINIDL_CHAR_GPT
constexpr const char* kCharGpt = MINIDL_CHAR_GPT;
#else
constexpr const char* kCharGpt = "";
#endif

// Sentences from a small grammar: structure a model with context learns (words, spaces, capitals
// after a full stop) and the unigram statistics cannot express. Two non-ASCII characters ride along.
std::string grammar_text(size_t sentences) {
  const std::vector<std::string> subjects = {"the cat", "a dog", "my friend", "the old man", "Zo\xc3\xab", "the bird"};
  const std::vector<std::string> verbs = {"sees", "likes", "finds", "follows", "calls"};
  const std::vector<std::string> objects = {"the ball", "a red hat", "the river", "some bread", "the caf\xc3\xa9"};
  std::mt19937 gen(7);
  auto pick = [&](const std::vector<std::string>& words) { return words[gen() % words.size()]; };
  std::string text;
  for (size_t i = 0; i < sentences; ++i) {
    std::string s = pick(subjects) + " " + pick(verbs) + " " + pick(objects) + ".";
    s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    text += s + (i % 4 == 3 ? "\n" : " ");
  }
  return text;
}

// -sum p log p over the characters of `text` (nats, as cross-entropy reports them).
double unigram_entropy(const std::string& text) {
  const auto ids = minidl::data::CharVocabulary::from_text(text).encode(text);
  std::map<int64_t, double> counts;
  for (int64_t id : ids) counts[id] += 1;
  double h = 0;
  for (const auto& [id, n] : counts) {
    const double p = n / static_cast<double>(ids.size());
    h -= p * std::log(p);
  }
  return h;
}

// The value of "key": in the last line of `jsonl` holding it.
double last_value(const std::string& jsonl, const std::string& key) {
  std::istringstream lines(jsonl);
  std::string line;
  double value = NAN;
  const std::string quoted = "\"" + key + "\": ";
  while (std::getline(lines, line)) {
    const size_t at = line.find(quoted);
    if (at != std::string::npos) value = std::stod(line.substr(at + quoted.size()));
  }
  return value;
}

struct AppRun {
  int status;
  std::string output;
};

AppRun run_app(std::vector<std::string> args) {
  minidl::testing::AppProcess app(kCharGpt, std::move(args));
  const int status = app.finish();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, app.output()};
}

}  // namespace

TEST(CharGpt, SmallModelLearnsBelowUnigramEntropyOnTheCpuAndSamples) {
  if (std::string(kCharGpt).empty()) GTEST_SKIP() << "built without the apps";
  const auto dir = std::filesystem::temp_directory_path() / ("minidl_char_gpt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string text = grammar_text(900);  // about 25 kB
  const std::string corpus = (dir / "corpus.txt").string(), checkpoint = (dir / "gpt.safetensors").string();
  std::ofstream(corpus, std::ios::binary) << text;
  const double entropy = unigram_entropy(text);

  const std::vector<std::string> model = {"--device", "cpu", "--data", corpus, "--n-layer", "2", "--n-head", "4",
                                          "--n-embd", "64", "--block-size", "64", "--batch-size", "16",
                                          "--dropout", "0", "--eval-iters", "4", "--warmup-iters", "10",
                                          "--lr", "3e-3", "--checkpoint", checkpoint};
  std::vector<std::string> args = model;
  for (const char* a : {"--max-iters", "50", "--eval-interval", "25", "--metrics"}) args.push_back(a);
  args.push_back((dir / "metrics").string());
  const AppRun trained = run_app(args);
  ASSERT_EQ(trained.status, 0) << trained.output;
  std::ifstream metrics_file(dir / "metrics" / "metrics.jsonl");
  const std::string metrics((std::istreambuf_iterator<char>(metrics_file)), std::istreambuf_iterator<char>());
  const double val_loss = last_value(metrics, "val_loss");
  EXPECT_LT(val_loss, entropy - 0.5) << "unigram entropy " << entropy << "\n" << trained.output;
  EXPECT_NE(trained.output.find("tokens/s"), std::string::npos) << trained.output;
  EXPECT_EQ(last_value(metrics, "iter"), 50) << metrics;

  // Generation from the checkpoint alone: the prompt, then max-new-tokens characters of the vocabulary.
  const AppRun sampled = run_app({"--device", "cpu", "--checkpoint", checkpoint, "--sample", "The cat ",
                               "--max-new-tokens", "40", "--top-k", "5"});
  ASSERT_EQ(sampled.status, 0) << sampled.output;
  ASSERT_EQ(sampled.output.rfind("The cat ", 0), 0u) << sampled.output;
  EXPECT_EQ(minidl::data::decode_utf8(sampled.output).size(), 8u + 40u + 1u) << sampled.output;  // and a newline

  const AppRun empty = run_app({"--checkpoint", checkpoint, "--sample", ""});
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.output.find("the prompt is empty"), std::string::npos) << empty.output;
  const AppRun unknown = run_app({"--device", "cpu", "--checkpoint", checkpoint, "--sample", "The cat?"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.output.find("the character '?' (U+003F) at position 7 is not in the vocabulary"),
            std::string::npos)
      << unknown.output;

  // --resume goes on from the checkpoint's iteration.
  args = model;
  for (const char* a : {"--max-iters", "54", "--eval-interval", "25", "--resume"}) args.push_back(a);
  args.push_back(checkpoint);
  const AppRun resumed = run_app(args);
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + checkpoint + " after iteration 50"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("step 54: train loss"), std::string::npos) << resumed.output;
  std::filesystem::remove_all(dir);
}

// ---- the model of apps/common/gpt.h ----

namespace {

char_gpt::GptConfig small_config(bool bias) {
  return {.vocab_size = 11, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 8, .dropout = 0, .bias = bias};
}
}  // namespace

TEST(CharGptModel, ParametersAreNanoGptsWithTheOutputLayerTied) {
  for (bool bias : {false, true}) {
    manual_seed(0);
    char_gpt::Gpt model(small_config(bias));
    const int64_t C = 8, V = 11, T = 16, L = 2;
    // Per block: two LayerNorms, c_attn, c_proj, c_fc, the MLP's c_proj (and their biases).
    const int64_t block =
        2 * C + 3 * C * C + C * C + 4 * C * C + 4 * C * C + (bias ? 2 * C + 3 * C + C + 4 * C + C : 0);
    EXPECT_EQ(model.num_parameters(), V * C + T * C + L * block + C + (bias ? C : 0)) << "bias " << bias;
    auto named = model.named_parameters();
    EXPECT_TRUE(named["transformer.wte.weight"].is_same(model.lm_head->weight));
    EXPECT_EQ(named.size(), static_cast<size_t>(3 + L * (bias ? 12 : 6) + (bias ? 1 : 0)));
    EXPECT_TRUE(named.contains("transformer.h.1.mlp.c_proj.weight"));
    const auto groups = model.param_groups();
    ASSERT_EQ(groups.size(), 2u);
    for (const Tensor& p : groups[0].params) EXPECT_EQ(p.dim(), 2);
    for (const Tensor& p : groups[1].params) EXPECT_EQ(p.dim(), 1);
    EXPECT_EQ(groups[0].params.size(), static_cast<size_t>(2 + 4 * L));
    EXPECT_EQ(groups[1].weight_decay, 0.0);
  }
}

TEST(CharGptModel, InitializationIsNanoGpts) {
  manual_seed(0);
  char_gpt::GptConfig c{.vocab_size = 64, .block_size = 64, .n_layer = 2, .n_head = 2, .n_embd = 64, .dropout = 0,
                        .bias = true};
  char_gpt::Gpt model(c);
  auto named = model.named_parameters();
  auto std_of = [&](const std::string& name) { return named[name].to(kFloat64).std().item<double>(); };
  EXPECT_NEAR(std_of("transformer.wte.weight"), 0.02, 0.001);
  EXPECT_NEAR(std_of("transformer.wpe.weight"), 0.02, 0.001);
  EXPECT_NEAR(std_of("transformer.h.0.attn.c_attn.weight"), 0.02, 0.0005);
  EXPECT_NEAR(std_of("transformer.h.0.mlp.c_fc.weight"), 0.02, 0.0005);
  EXPECT_NEAR(std_of("transformer.h.1.attn.c_proj.weight"), 0.01, 0.0005);  // 0.02 / sqrt(2 * 2)
  EXPECT_NEAR(std_of("transformer.h.1.mlp.c_proj.weight"), 0.01, 0.0005);
  EXPECT_EQ(named["transformer.h.0.attn.c_attn.bias"].abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(named["transformer.ln_f.weight"].sum().item<float>(), 64.0f);
}

TEST(CharGptModel, LogitsAtAPositionDependOnlyOnTheIdsUpToIt) {
  manual_seed(1);
  char_gpt::Gpt model(small_config(false));
  model.eval();
  NoGradGuard no_grad;
  Tensor ids = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1}, {2, 6});
  Tensor changed = ids.clone();
  changed.index_put_({indexing::Slice(), 3}, 9.0);  // position 3 of both rows
  Tensor a = model.forward(ids), b = model.forward(changed);
  ASSERT_EQ(a.shape(), (Shape{2, 6, 11}));
  EXPECT_TRUE(allclose(a.narrow(1, 0, 3), b.narrow(1, 0, 3), 0, 0));  // bit for bit before position 3
  EXPECT_GT((a.narrow(1, 3, 3) - b.narrow(1, 3, 3)).abs().max().item<float>(), 1e-4f);
  const std::string error = [&] {
    try {
      model.forward(zeros({1, 17}, kInt64));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  }();
  EXPECT_NE(error.find("cannot forward a sequence of length 17, block_size is only 16"), std::string::npos) << error;
}

// Gpt::forward threads the stream through Block::forward_fused (dropout, addition and the next
// layer norm as one op); the blocks' own forward, chained, is the reference. Training, with dropout:
// the fused op draws each mask where the composition does, so from one seed the two agree (bit for
// bit on the CPU, where the op is that composition; on a GPU within float32's rounding, gradients
// included). The sampled gradients are the first block's, the final norm's and the positions'.
void expect_fused_seams_match_blocks(Device device) {
  manual_seed(4);
  char_gpt::Gpt model(char_gpt::GptConfig{.vocab_size = 11, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 8,
                                          .dropout = 0.3, .bias = true});
  {
    // Norms of their own (not the initial ones and zeros): a seam that took the wrong norm shows.
    NoGradGuard no_grad;
    for (auto& [name, p] : model.named_parameters())
      if (name.find("ln_") != std::string::npos) p.copy_(uniform(p.shape(), 0.5, 1.5));
  }
  model.to(device);
  model.train();
  const Tensor ids = randint(11, {3, 16}).to(device);
  auto blocks_forward = [&] {
    Tensor x = model.drop(model.wte(ids) + model.wpe(arange(16, kInt64, device)));
    for (const auto& block : model.blocks) x = block->forward(x);
    return model.lm_head(model.ln_f(x));
  };
  auto logits_and_grads = [&](bool fused) {
    model.zero_grad();
    manual_seed(9);
    Tensor logits = fused ? model.forward(ids) : blocks_forward();
    (logits * logits).sum().backward();
    auto named = model.named_parameters();
    return std::vector<Tensor>{logits.detach(), named["transformer.h.0.ln_1.weight"].grad(),
                               named["transformer.h.0.ln_2.weight"].grad(),
                               named["transformer.h.0.mlp.c_fc.weight"].grad(),
                               named["transformer.ln_f.bias"].grad(), named["transformer.wpe.weight"].grad()};
  };
  const std::vector<Tensor> fused = logits_and_grads(true), reference = logits_and_grads(false);
  const double tol = device.is_cuda() ? 1e-4 : 0;
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_TRUE(allclose(fused[i].cpu(), reference[i].cpu(), tol, tol)) << "tensor " << i << " on " << device.str();
}

TEST(CharGptModel, FusedSeamsMatchTheBlocksForward) { expect_fused_seams_match_blocks(Device::cpu()); }

TEST(CharGptModel, CudaFusedSeamsMatchTheBlocksForward) {
  if (!minidl::cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << minidl::cuda::unavailable_reason();
  expect_fused_seams_match_blocks(Device::cuda(0));
}

// On a GPU: the whole training step (forward, backward, clipping, the fused AdamW following the
// schedule) is captured once and replayed, in float32 and under bfloat16 autocast, and still learns.
TEST(CharGpt, CudaTrainingStepIsGraphedAndLearns) {
  if (std::string(kCharGpt).empty()) GTEST_SKIP() << "built without the apps";
  if (!minidl::cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << minidl::cuda::unavailable_reason();
  const auto dir = std::filesystem::temp_directory_path() / ("minidl_char_gpt_cuda_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string text = grammar_text(900), corpus = (dir / "corpus.txt").string();
  std::ofstream(corpus, std::ios::binary) << text;
  const double entropy = unigram_entropy(text);
  for (const char* precision : {"fp32", "bf16"}) {
    const AppRun run = run_app({"--device", "cuda", "--precision", precision, "--data", corpus, "--n-layer", "2",
                                "--n-head", "2", "--n-embd", "64", "--block-size", "64", "--batch-size", "16",
                                "--dropout", "0.1", "--eval-iters", "4", "--warmup-iters", "10", "--lr", "3e-3",
                                "--max-iters", "60", "--eval-interval", "30", "--metrics", (dir / precision).string()});
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_NE(run.output.find("training step graphed (57 replays, 3 eager steps)"), std::string::npos)
        << precision << "\n" << run.output;
    std::ifstream file(dir / precision / "metrics.jsonl");
    const std::string metrics((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    EXPECT_LT(last_value(metrics, "val_loss"), entropy - 0.5) << precision << "\n" << run.output;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace minidl::char_gpt_test
