// Embedding: the lookup against hand-picked rows, the weight's gradient by hand (repeated ids,
// padding_idx, scale_grad_by_freq) and by float64 gradcheck, 16-bit against float32, max_norm,
// nn::Embedding (init, from_pretrained, printing, clone) and the errors. On CUDA (skipped without a
// GPU): the same against the CPU, and the backward's bits repeating run to run.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "minidl.h"
#include "ops/kernels.h"
#include "test_cuda_util.h"
#include "test_util.h"

namespace minidl::embedding_test {

using minidl::testing::expect_error;
using minidl::testing::shape_str;

namespace {

Tensor ids_of(const std::vector<int64_t>& v, const Shape& shape) { return Tensor::from_vector<int64_t>(v, shape); }

// weight [4, 2] = [[0, 1], [10, 11], [20, 21], [30, 31]].
Tensor table() { return Tensor::from_vector<double>({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}); }

std::string printed(const nn::Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

}  // namespace

TEST(Embedding, LooksUpRowsForAnyIndexShape) {
  Tensor out = embedding(table(), ids_of({3, 0, 3, 1, 2, 2}, {2, 3}));
  EXPECT_EQ(out.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(out.to_vector<double>(), (std::vector<double>{30, 31, 0, 1, 30, 31, 10, 11, 20, 21, 20, 21}));
  // int32 ids, a 0-d id, no ids, a float32 table.
  EXPECT_EQ(embedding(table(), ids_of({2, 1}, {2}).to(kInt32)).to_vector<double>(),
            (std::vector<double>{20, 21, 10, 11}));
  EXPECT_EQ(embedding(table(), full({}, 1, kInt64)).shape(), (Shape{2}));
  EXPECT_EQ(embedding(table(), Tensor::empty({0, 3}, kInt64)).shape(), (Shape{0, 3, 2}));
  EXPECT_EQ(embedding(table().to(kFloat32), ids_of({1}, {1})).to_vector<float>(), (std::vector<float>{10, 11}));
}

TEST(Embedding, GradientSumsRepeatedIdsSkipsPaddingAndScalesByCount) {
  // Ids 1, 3, 1, 0, 1 with upstream rows (k+1, -(k+1)) for position k: row 1 gets 1 + 3 + 5 = 9,
  // row 3 gets 2, row 0 gets 4, row 2 none.
  const Tensor ids = ids_of({1, 3, 1, 0, 1}, {5});
  const Tensor g = Tensor::from_vector<double>({1, -1, 2, -2, 3, -3, 4, -4, 5, -5}, {5, 2});
  auto grad_of = [&](std::optional<int64_t> padding, bool by_freq) {
    Tensor w = table().requires_grad_();
    embedding(w, ids, padding, by_freq).backward(g);
    return w.grad().to_vector<double>();
  };
  EXPECT_EQ(grad_of(std::nullopt, false), (std::vector<double>{4, -4, 9, -9, 0, 0, 2, -2}));
  EXPECT_EQ(grad_of(1, false), (std::vector<double>{4, -4, 0, 0, 0, 0, 2, -2}));
  EXPECT_EQ(grad_of(-1, false), (std::vector<double>{4, -4, 9, -9, 0, 0, 0, 0}));  // -1 is row 3, as PyTorch's
  EXPECT_EQ(grad_of(std::nullopt, true), (std::vector<double>{4, -4, 3, -3, 0, 0, 2, -2}));
  EXPECT_EQ(grad_of(0, true), (std::vector<double>{0, 0, 3, -3, 0, 0, 2, -2}));
  // The padding row is still looked up as it is.
  EXPECT_EQ(embedding(table(), ids_of({0}, {1}), 0).to_vector<double>(), (std::vector<double>{0, 1}));
}

TEST(Embedding, Gradcheck) {
  // padding_idx and scale_grad_by_freq change the gradient on purpose (checked by hand above), so the
  // numeric Jacobian checks the plain lookup, with a padding row that no id names.
  manual_seed(3301);
  const Tensor ids = ids_of({4, 0, 4, 2, 4, 1, 0, 2}, {2, 4});
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return embedding(in[0], ids, 3) * in[0].sum(); },
                     {randn({5, 3}, kFloat64).requires_grad_()}, {1e-6, 1e-8, 1e-6});
  EXPECT_TRUE(r) << r.message;
}

TEST(Embedding, SixteenBitMatchesFloat32) {
  manual_seed(3302);
  Tensor w32 = randn({7, 5});
  const Tensor ids = ids_of({6, 1, 1, 0, 6, 6, 3, 1, 6}, {3, 3});
  const Tensor g32 = randn({3, 3, 5});
  Tensor ref_w = w32.clone().requires_grad_();
  embedding(ref_w, ids, std::nullopt, true).backward(g32);
  for (DType dtype : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor w = w32.to(dtype).requires_grad_();
    Tensor out = embedding(w, ids, std::nullopt, true);
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_TRUE(out.to(kFloat32).equal(embedding(w32.to(dtype).to(kFloat32), ids)));  // a gather: exact
    out.backward(g32.to(dtype));
    EXPECT_EQ(w.grad().dtype(), dtype);
    // Summed in float32 and rounded once: within the 16-bit rounding of the inputs and the result.
    const double tolerance = dtype == kBFloat16 ? 3e-2 : 4e-3;
    EXPECT_TRUE(w.grad().to(kFloat32).allclose(ref_w.grad(), tolerance, tolerance));
  }
}

TEST(Embedding, MaxNormRescalesLookedUpRowsInPlace) {
  // Rows 1 ([10, 11], norm 14.87) and 3 are looked up with max_norm 5: rescaled to norm 5 in the
  // weight itself; rows 0 and 2 are not looked up and stay.
  Tensor w = table().requires_grad_();
  namespace F = nn::functional;
  Tensor out = F::embedding(ids_of({1, 3, 1}, {3}), w, F::EmbeddingFuncOptions().max_norm(5.0));
  const std::vector<double> v = w.detach().to_vector<double>();
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[4], 20);
  EXPECT_NEAR(std::hypot(v[2], v[3]), 5.0, 1e-6);
  EXPECT_NEAR(std::hypot(v[6], v[7]), 5.0, 1e-6);
  EXPECT_NEAR(v[2] / v[3], 10.0 / 11.0, 1e-12);
  EXPECT_EQ(out.to_vector<double>()[0], v[2]);  // the lookup sees the rescaled rows
  out.sum().backward();                           // and the weight still gets its gradient
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{0, 0, 2, 2, 0, 0, 1, 1}));
  // A 1-norm bound, through the module.
  nn::Embedding layer(nn::EmbeddingOptions(3, 2).max_norm(1.0).norm_type(1.0));
  layer(ids_of({0, 1, 2}, {3}));
  EXPECT_TRUE(layer->weight.detach().abs().sum({1}).le(1.0 + 1e-6).all().item<bool>());
}

TEST(Embedding, Errors) {
  expect_error([] { embedding(table(), ids_of({1, 4}, {2})); }, {"embedding", "id 4", "position 1", "4 rows"});
  expect_error([] { embedding(table(), ids_of({-1}, {1})); }, {"embedding", "id -1", "0 <= id < 4"});
  expect_error([] { embedding(table(), Tensor::from_vector<float>({1}, {1})); }, {"int64 or int32", "float32"});
  expect_error([] { embedding(table().view({8}), ids_of({1}, {1})); }, {"2-D weight", "[8]"});
  expect_error([] { embedding(table(), ids_of({1}, {1}), 4); }, {"padding_idx", "[-4, 4)", "got 4"});
  expect_error([] { embedding(table(), ids_of({1}, {1}), std::nullopt, false, true); }, {"sparse"});
  expect_error([] { nn::Embedding(nn::EmbeddingOptions(3, 2).padding_idx(-4)); }, {"padding_idx", "got -4"});
  expect_error([] { nn::Embedding(0, 2); }, {"positive"});
  expect_error([] { nn::Embedding(nn::EmbeddingOptions(3, 2).sparse(true)); }, {"sparse"});
  expect_error([] { nn::Embedding::from_pretrained(zeros({4})); }, {"2-D", "[4]"});
}

TEST(EmbeddingModule, InitFromPretrainedPrintingAndClone) {
  manual_seed(3303);
  nn::Embedding emb(nn::EmbeddingOptions(1000, 8).padding_idx(-2));
  EXPECT_EQ(*emb->options.padding_idx(), 998);
  EXPECT_EQ(emb->weight.shape(), (Shape{1000, 8}));
  EXPECT_TRUE(emb->weight.requires_grad());
  EXPECT_TRUE(emb->weight.select(0, 998).eq(0.0).all().item<bool>());
  const double mean = emb->weight.mean().item<double>(), var = emb->weight.var().item<double>();
  EXPECT_NEAR(mean, 0.0, 0.05);  // N(0, 1) over 8,000 draws
  EXPECT_NEAR(var, 1.0, 0.08);
  EXPECT_EQ(emb(ids_of({5, 998}, {1, 2})).shape(), (Shape{1, 2, 8}));
  EXPECT_EQ(printed(*emb), "Embedding(num_embeddings=1000, embedding_dim=8, padding_idx=998)");
  EXPECT_EQ(printed(*nn::Embedding(nn::EmbeddingOptions(3, 2).max_norm(1.5).norm_type(1).scale_grad_by_freq(true))),
            "Embedding(num_embeddings=3, embedding_dim=2, max_norm=1.5, norm_type=1, scale_grad_by_freq=true)");
  EXPECT_EQ(emb->named_parameters().size(), 1u);

  // from_pretrained shares the tensor, frozen by default.
  Tensor vectors = table();
  auto frozen = nn::Embedding::from_pretrained(vectors);
  EXPECT_FALSE(frozen->weight.requires_grad());
  EXPECT_EQ(frozen->weight.data_ptr(), vectors.data_ptr());
  EXPECT_EQ(frozen(ids_of({2}, {1})).to_vector<double>(), (std::vector<double>{20, 21}));
  auto trained = nn::Embedding::from_pretrained(table(), false, 0);
  EXPECT_TRUE(trained->weight.requires_grad());
  EXPECT_EQ(*trained->options.padding_idx(), 0);
  EXPECT_EQ(trained->weight.select(0, 0).to_vector<double>(), (std::vector<double>{0, 1}));  // kept as given

  // clone: a weight of its own with the same values and requires_grad.
  auto copy = std::dynamic_pointer_cast<nn::EmbeddingImpl>(frozen->clone());
  ASSERT_TRUE(copy);
  EXPECT_NE(copy->weight.data_ptr(), vectors.data_ptr());
  EXPECT_TRUE(copy->weight.equal(vectors));
  EXPECT_FALSE(copy->weight.requires_grad());
}

// embedding_sum: the two lookups added, the second ids broadcast against the first; values and both
// gradients those of the composition, float64 gradient checks, and the errors.
TEST(EmbeddingSum, EqualsTheTwoLookupsAdded) {
  MINIDL_FRESH_SEED();
  struct Case {
    Shape ids, other_ids;
  };
  for (const Case& c : {Case{{3, 5}, {5}}, Case{{3, 5}, {3, 5}}, Case{{3, 5}, {1, 5}}, Case{{2, 3, 5}, {3, 5}},
                        Case{{3, 1}, {5}}, Case{{7}, {}}}) {
    SCOPED_TRACE(shape_str(c.ids) + " and " + shape_str(c.other_ids));
    const Tensor ids = randint(6, c.ids), other_ids = randint(9, c.other_ids);
    Tensor w = randn({6, 4}, kFloat64).requires_grad_(), other = randn({9, 4}, kFloat64).requires_grad_();
    Tensor fused = embedding_sum(w, ids, other, other_ids);
    Tensor w2 = w.detach().clone().requires_grad_(), other2 = other.detach().clone().requires_grad_();
    Tensor composed = embedding(w2, ids) + embedding(other2, other_ids);
    ASSERT_EQ(fused.shape(), composed.shape());
    EXPECT_TRUE(fused.equal(composed));
    const Tensor seed = randn(fused.shape(), kFloat64);
    (fused * seed).sum().backward();
    (composed * seed).sum().backward();
    EXPECT_TRUE(w.grad().equal(w2.grad()));
    EXPECT_TRUE(other.grad().equal(other2.grad()));
    auto r = gradcheck([&](const std::vector<Tensor>& in) { return embedding_sum(in[0], ids, in[1], other_ids); },
                       {w.detach().requires_grad_(), other.detach().requires_grad_()}, {1e-6, 1e-8, 1e-6});
    EXPECT_TRUE(r) << r.message;
  }
  const Tensor ids = randint(4, {2, 3});
  expect_error([&] { embedding_sum(table(), ids, randn({5, 3}, kFloat64), ids); },
               {"embedding_sum", "one dtype and width", "[4, 2]", "[5, 3]"});
  expect_error([&] { embedding_sum(table(), ids, table().to(kFloat32), ids); },
               {"embedding_sum", "float64 [4, 2] and float32"});
  expect_error([&] { embedding_sum(table(), ids, table(), randint(4, {4})); }, {"embedding_sum", "broadcast"});
  expect_error([&] { embedding_sum(table(), ids.to(kFloat32), table(), ids); }, {"embedding_sum", "int64 or int32"});
  expect_error([&] { embedding_sum(table(), ids_of({0, 7}, {2}), table(), ids_of({1}, {1})); }, {"id 7"});
}

// ---- CUDA (skips without a GPU) ----

TEST(CudaEmbedding, MatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  using minidl::testing::all_close;
  using minidl::testing::gpu;
  // Many repeats, odd widths, a padding row, each dtype; ids of every shape go flat. The sort takes
  // the bits of the largest id only: tables of 11 rows (4 bits), 1 row (1 bit) and 300 (9 bits).
  // Widths of whole 16-byte groups take the wide kernel (160: a second, partial tile of columns).
  for (int64_t rows : {11, 1, 300}) {
    Tensor ids = randint(rows, {6, 37});
    // 300 rows: runs of a row or so (a thread per id and column), and one of 45 rows (past the
    // 32 lanes' interleaving) among them.
    if (rows == 300)
      for (int64_t i = 0; i < 45; ++i) ids.data<int64_t>()[i * 4] = 7;
    for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
      for (int64_t width : {1, 7, 64, 160}) {
        for (bool by_freq : {false, true}) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " width " + std::to_string(width) +
                       (by_freq ? " by_freq" : "") + ", " + std::to_string(rows) + " rows");
          Tensor w = randn({rows, width}).to(dtype);
          Tensor g = randn({6, 37, width}).to(dtype);
          Tensor cpu_w = w.clone().requires_grad_(), gpu_w = w.to(gpu()).requires_grad_();
          const std::optional<int64_t> padding = rows > 3 ? std::optional<int64_t>(3) : std::nullopt;
          Tensor cpu_out = embedding(cpu_w, ids, padding, by_freq);
          Tensor gpu_out = embedding(gpu_w, ids.to(gpu()), padding, by_freq);
          EXPECT_TRUE(all_close(gpu_out, cpu_out, 0, 0));
          cpu_out.backward(g);
          gpu_out.backward(g.to(gpu()));
          // The same additions in the same order: the same bits.
          EXPECT_TRUE(all_close(gpu_w.grad(), cpu_w.grad(), 0, 0));
        }
      }
    }
  }
  const Tensor ids = randint(11, {6, 37});
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return embedding(in[0], ids.to(gpu())) * in[0].sum(); },
                     {randn({11, 3}, kFloat64).to(gpu()).requires_grad_()}, {1e-6, 1e-8, 1e-6});
  EXPECT_TRUE(r) << r.message;
}

TEST(CudaEmbedding, BackwardBitsRepeat) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  // A GPT's token embedding: 16k ids over 65 rows (about 250 repeats each), float32 rows of 384.
  const Tensor ids = randint(65, {64, 256}).to(minidl::testing::gpu());
  const Tensor g = randn({64, 256, 384}, kFloat32, minidl::testing::gpu());
  auto grad_once = [&] {
    Tensor w = zeros({65, 384}, kFloat32, minidl::testing::gpu()).requires_grad_();
    embedding(w, ids).backward(g);
    return w.grad();
  };
  const Tensor first = grad_once();
  for (int run = 0; run < 3; ++run) EXPECT_TRUE(grad_once().equal(first)) << "run " << run;
}

// The forward sorts the ids on the side stream for the backward (Kernels::embedding_backward_plan):
// the same bits as the backward sorting them itself, and a capture of the forward alone still
// ends (the side work joins inside the graph).
TEST(CudaEmbedding, TheForwardsPlanGivesTheBackwardsBits) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  using minidl::testing::gpu;
  const Tensor ids = randint(65, {64, 256}).to(gpu());
  const Tensor g = randn({64, 256, 48}, kFloat32, gpu());
  Tensor w = randn({65, 48}, kFloat32, gpu()).requires_grad_();
  embedding(w, ids).backward(g);
  Tensor unplanned = Tensor::empty({65, 48}, kFloat32, gpu());
  kernels_for(gpu()).embedding_backward(g.view({-1, 48}), ids.reshape({-1}), Tensor(), -1, false, unplanned);
  EXPECT_TRUE(unplanned.equal(w.grad()));
  EXPECT_GT(unplanned.abs().sum().item<double>(), 0.0);

  Tensor out;
  cuda::Graph graph;
  graph.capture_begin();
  out = embedding(w, ids);
  graph.capture_end();
  graph.replay();
  EXPECT_TRUE(out.equal(embedding(w, ids)));
}

// embedding_sum's kernel (the second ids tiling the first) against the CPU's composition: the same
// bits forward and back, for every dtype, widths with and without 16-byte packs; the cases that
// compose; an id out of range in either table reported at the next sync.
TEST(CudaEmbedding, EmbeddingSumMatchesCpu) {
  MINIDL_REQUIRE_CUDA();
  MINIDL_FRESH_SEED();
  using minidl::testing::all_close;
  using minidl::testing::gpu;
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    for (int64_t width : {3, 8, 64}) {
      for (const Shape& other_shape : {Shape{37}, Shape{1, 37}, Shape{6, 37}, Shape{6, 1}}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " width " + std::to_string(width) + " second ids " +
                     shape_str(other_shape));
        const Tensor ids = randint(65, {6, 37}), other_ids = randint(40, other_shape);
        const Tensor w = randn({65, width}).to(dtype), other = randn({40, width}).to(dtype);
        const Tensor g = randn({6, 37, width}).to(dtype);
        Tensor cw = w.clone().requires_grad_(), co = other.clone().requires_grad_();
        Tensor gw = w.to(gpu()).requires_grad_(), go = other.to(gpu()).requires_grad_();
        Tensor cpu_out = embedding_sum(cw, ids, co, other_ids);
        Tensor gpu_out = embedding_sum(gw, ids.to(gpu()), go, other_ids.to(gpu()));
        EXPECT_TRUE(all_close(gpu_out, cpu_out, 0, 0));
        cpu_out.backward(g);
        gpu_out.backward(g.to(gpu()));
        EXPECT_TRUE(all_close(gw.grad(), cw.grad(), 0, 0)) << "first table";
        // The broadcast's sum over the batch is a reduction of its own on each device.
        EXPECT_TRUE(all_close(go.grad(), co.grad(), dtype == kFloat64 ? 1e-12 : 1e-5,
                              is_reduced_floating(dtype) ? 1e-2 : 1e-5))
            << "second table";
      }
    }
  }
  const Tensor w = table().to(gpu());
  expect_error([&] { embedding_sum(w, ids_of({1, 9}, {2}).to(gpu()), w, ids_of({0, 1}, {2}).to(gpu())).cpu(); },
               {"index 9", "position 1", "out of range"});
  expect_error([&] { embedding_sum(w, ids_of({1, 2}, {2}).to(gpu()), w, ids_of({-1}, {1}).to(gpu())).cpu(); },
               {"index -1", "position 0", "out of range"});
  EXPECT_EQ(embedding_sum(w, ids_of({2}, {1}).to(gpu()), w, ids_of({1}, {1}).to(gpu())).to_vector<double>(),
            (std::vector<double>{30, 32}));  // the device goes on
}

TEST(CudaEmbedding, BadIdIsReportedAtTheNextSync) {
  MINIDL_REQUIRE_CUDA();
  Tensor w = table().to(minidl::testing::gpu());
  expect_error([&] { embedding(w, ids_of({1, 9}, {2}).to(minidl::testing::gpu())).to(Device::cpu()); },
               {"index 9", "position 1", "out of range"});
  EXPECT_EQ(embedding(w, ids_of({2}, {1}).to(minidl::testing::gpu())).to_vector<double>(),
            (std::vector<double>{20, 21}));  // the device goes on
}

}  // namespace minidl::embedding_test
