// The safetensors format: the byte layout checked by hand, files laid out as PyTorch writes them,
// every rule of the format on loading (each corrupt file gives a clear error and harms nothing),
// and atomic writes.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/cuda.h"
#include "test_file_util.h"
#include "test_util.h"

namespace minidl::safetensors_test {

using namespace minidl::testing;

class Safetensors : public TempFolderTest {};

namespace {

std::string le64(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A safetensors file put together by hand: size field, header, data.
std::string st_file(const std::string& header, const std::string& data) { return le64(header.size()) + header + data; }

std::string float_bytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

}  // namespace

// ---- the byte layout ----

TEST_F(Safetensors, WrittenBytesFollowTheFormat) {
  safetensors::Tensors tensors = {
      {"w", Tensor::from_vector<float>({1.5f, -2.f, 0.25f, 3.f, 0.f, -0.5f}, {2, 3})},
      {"ids", Tensor::from_vector<int64_t>({7, -1})},
      {"mask", Tensor::from_vector<bool>({true, false, true})},
      {"scale", Tensor::from_vector<double>({0.1}, {}).reshape({})},
      {"empty", Tensor::empty({0, 4})},
  };
  safetensors::save(path("t.safetensors"), tensors, {{"note", "hand-checked"}});
  const std::string bytes = read_bytes(path("t.safetensors"));

  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "the data buffer starts 8-aligned";
  const std::string text = bytes.substr(8, n);
  EXPECT_EQ(text[0], '{');
  EXPECT_EQ(text.find_last_not_of(' ') + 1, text.find_last_of('}') + 1) << "padding is spaces after the JSON";
  const auto header = nlohmann::json::parse(text);
  EXPECT_EQ(header["__metadata__"], (nlohmann::json{{"note", "hand-checked"}}));

  // Wider elements first (8-byte, then 4-byte, then 1-byte), by name within a width.
  const std::string buffer = bytes.substr(8 + n);
  EXPECT_EQ(header["ids"], (nlohmann::json{{"dtype", "I64"}, {"shape", {2}}, {"data_offsets", {0, 16}}}));
  EXPECT_EQ(header["scale"],
            (nlohmann::json{{"dtype", "F64"}, {"shape", nlohmann::json::array()}, {"data_offsets", {16, 24}}}));
  EXPECT_EQ(header["empty"], (nlohmann::json{{"dtype", "F32"}, {"shape", {0, 4}}, {"data_offsets", {24, 24}}}));
  EXPECT_EQ(header["w"], (nlohmann::json{{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {24, 48}}}));
  EXPECT_EQ(header["mask"], (nlohmann::json{{"dtype", "BOOL"}, {"shape", {3}}, {"data_offsets", {48, 51}}}));
  ASSERT_EQ(buffer.size(), 51u);

  // Little-endian values: 7 and -1 as int64, 1.5f = 0x3FC00000, -2.f = 0xC0000000, bools as 1/0 bytes.
  EXPECT_EQ(buffer.substr(0, 16), std::string("\x07\0\0\0\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff", 16));
  double scale;
  std::memcpy(&scale, buffer.data() + 16, 8);
  EXPECT_EQ(scale, 0.1);
  EXPECT_EQ(buffer.substr(24, 8), std::string("\0\0\xc0\x3f\0\0\0\xc0", 8));
  EXPECT_EQ(buffer.substr(48, 3), std::string("\x01\x00\x01", 3));

  safetensors::Contents back = safetensors::load(path("t.safetensors"));
  EXPECT_EQ(back.metadata, (safetensors::Metadata{{"note", "hand-checked"}}));
  ASSERT_EQ(back.tensors.size(), 5u);
  EXPECT_EQ(float32_values(back.tensors["w"]), float32_values(tensors["w"]));
  EXPECT_EQ(back.tensors["ids"].to_vector<int64_t>(), (std::vector<int64_t>{7, -1}));
  EXPECT_EQ(back.tensors["mask"].to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(back.tensors["scale"].shape(), Shape{});
  EXPECT_EQ(back.tensors["empty"].shape(), (Shape{0, 4}));
}

TEST_F(Safetensors, ReadsAFileLaidOutAsPyTorchWritesIt) {
  // safetensors.torch.save_file: {"format": "pt"} metadata, the header padded with spaces to 8 bytes.
  std::string header = R"({"__metadata__":{"format":"pt"},"fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  write_bytes(path("pt.safetensors"), st_file(header, float_bytes({0.5f, -4.f})));
  safetensors::Contents c = safetensors::load(path("pt.safetensors"));
  EXPECT_EQ(c.metadata.at("format"), "pt");
  EXPECT_EQ(float32_values(c.tensors.at("fc.bias")), (std::vector<float>{0.5f, -4.f}));

  // nn::load takes it: no minidl metadata is needed for a plain state dict.
  nn::Linear fc(3, 2);
  nn::StateDict state = fc->state_dict();
  safetensors::save(path("pt2.safetensors"), {{"weight", ones({2, 3})}, {"bias", c.tensors.at("fc.bias")}},
                    {{"format", "pt"}});
  nn::load(*fc, path("pt2.safetensors"));
  EXPECT_EQ(float32_values(fc->bias), (std::vector<float>{0.5f, -4.f}));
}

TEST_F(Safetensors, WritesNonContiguousViews) {
  Tensor base = arange(6.0).reshape({2, 3});
  safetensors::save(path("v.safetensors"), {{"t", base.t()}});
  Tensor back = safetensors::load(path("v.safetensors")).tensors.at("t");
  EXPECT_EQ(back.shape(), (Shape{3, 2}));
  EXPECT_EQ(float32_values(back), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST_F(Safetensors, CudaTensorsAreWrittenFromTheHostAndLoadOntoTheModelsDevice) {
  if (!cuda::is_available()) GTEST_SKIP() << "no usable CUDA device: " << cuda::unavailable_reason();
  manual_seed(3);
  nn::Sequential model = small_model();
  model->to(Device::cuda());
  nn::save(*model, path("gpu.safetensors"));
  manual_seed(4);
  nn::Sequential other = small_model();
  other->to(Device::cuda());
  nn::load(*other, path("gpu.safetensors"));
  EXPECT_EQ(snapshot(*other), snapshot(*model));
  EXPECT_TRUE(other->parameters()[0].device().is_cuda());
}

// ---- rejecting corrupt files ----

TEST_F(Safetensors, EveryCorruptFileGivesAClearErrorAndHarmsNothing) {
  manual_seed(1);
  nn::Linear model(2, 2);
  nn::save(*model, path("good.safetensors"));
  const std::string good = read_bytes(path("good.safetensors"));
  const Snapshot before = snapshot(*model);
  const std::string f8 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

  struct Case {
    const char* what;
    std::string bytes;
    std::vector<std::string> message;
  };
  std::string bool_header = R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})";
  const std::vector<Case> cases = {
      {"corrupt JSON", st_file(R"({"a":{"dtype":"F32",)", ""), {"not valid JSON"}},
      {"header not an object", st_file("[1, 2]", ""), {"must begin with '{'"}},
      {"truncated data", good.substr(0, good.size() - 5), {"truncated", "only"}},
      {"truncated header", good.substr(0, 20), {"truncated: the header size is"}},
      {"short file", std::string("\x10\0\0", 3), {"too short for the 8-byte header size"}},
      {"oversized header", le64(200'000'000) + "{}", {"200000000", "over the limit of 100000000"}},
      {"trailing bytes", good + "xyz", {"3 trailing bytes"}},
      {"overlapping offsets",
       st_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           std::string(12, '\0')),
       {"overlap", "\"b\" starts at byte 4 inside \"a\""}},
      {"gap in offsets",
       st_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
           std::string(20, '\0')),
       {"gap", "[8, 12)"}},
      {"buffer not starting at 0",
       st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')),
       {"gap", "[0, 4)"}},
      {"unknown dtype",
       st_file(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')),
       {"unknown dtype \"F33\""}},
      {"unsupported dtype",
       st_file(R"({"a":{"dtype":"I16","shape":[4],"data_offsets":[0,8]}})", std::string(8, '\0')),
       {"I16", "does not support"}},
      {"shape/size mismatch",
       st_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
       {"\"a\"", "needs 3 x 4 = 12 bytes", "hold 8"}},
      {"negative dimension",
       st_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, '\0')),
       {"non-negative integers", "-2"}},
      {"fractional dimension",
       st_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", std::string(8, '\0')),
       {"non-negative integers"}},
      {"overflowing shape",
       st_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", std::string(8, '\0')),
       {"more elements than fit in 64 bits"}},
      {"overflowing byte size",
       st_file(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", std::string(8, '\0')),
       {"needs more bytes than fit in 64 bits"}},
      {"duplicate names",
       st_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           std::string(8, '\0')),
       {"names the tensor \"a\" twice"}},
      {"missing field", st_file(R"({"a":{"dtype":"F32","shape":[2]}})", ""), {"missing \"data_offsets\""}},
      {"end before begin",
       st_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", ""),
       {"end before they begin"}},
      {"metadata not strings", st_file(R"({"__metadata__":{"epoch":3}})", ""), {"\"epoch\" holds number"}},
      {"bool byte not 0 or 1", st_file(bool_header, std::string("\x01\x02", 2)), {"BOOL tensor \"m\"", "byte 2"}},
      {"a checkpoint of another model",
       [&] {
         nn::Linear other(3, 2);
         nn::save(*other, path("other.safetensors"));
         return read_bytes(path("other.safetensors"));
       }(),
       {"\"weight\" is float32 of shape [2, 3] there but float32 of shape [2, 2] in the model"}},
      {"another model's names",
       [&] {
         nn::Sequential other(nn::Linear(2, 2));
         nn::save(*other, path("other.safetensors"));
         return read_bytes(path("other.safetensors"));
       }(),
       {"missing \"weight\""}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    write_bytes(path("bad.safetensors"), c.bytes);
    std::vector<std::string> parts = c.message;
    parts.push_back(path("bad.safetensors"));  // every message names the file
    expect_error([&] { nn::load(*model, path("bad.safetensors")); }, parts);
    EXPECT_EQ(snapshot(*model), before) << "a failed load changed the model";
    EXPECT_NO_THROW(nn::load(*model, path("good.safetensors"))) << "the previous checkpoint must stay readable";
  }
  // A state dict with one extra tensor: the unexpected name is named.
  safetensors::Tensors extra = model->state_dict();
  extra["running_mean"] = zeros({2});
  safetensors::save(path("extra.safetensors"), extra);
  expect_error([&] { nn::load(*model, path("extra.safetensors")); }, {"unexpected \"running_mean\""});
  // A float64 copy of the same model: the dtype differs.
  nn::Linear wide(2, 2);
  wide->to(kFloat64);
  nn::save(*wide, path("f64.safetensors"));
  expect_error([&] { nn::load(*model, path("f64.safetensors")); },
               {"\"weight\" is float64 of shape [2, 2] there but float32"});
  expect_error([&] { nn::load(*model, path("missing.safetensors")); }, {"cannot open", "missing.safetensors"});
  EXPECT_EQ(snapshot(*model), before);
}

// ---- atomic writes ----

TEST_F(Safetensors, ACrashBeforeTheRenameLeavesTheOldFile) {
  manual_seed(1);
  nn::Linear model(3, 2);
  nn::save(*model, path("m.safetensors"));
  const std::string old_bytes = read_bytes(path("m.safetensors"));

  // The write half of a save, then a "crash": the rename never happens.
  const std::string temporary = write_temporary_beside(path("m.safetensors"), {"half a new checkpoint"});
  EXPECT_EQ(fs::path(temporary).parent_path(), dir_) << "the temporary file must be beside the target";
  EXPECT_EQ(read_bytes(path("m.safetensors")), old_bytes);
  nn::Linear other(3, 2);
  nn::load(*other, path("m.safetensors"));
  EXPECT_EQ(snapshot(*other), snapshot(*model));

  // A rename that fails: the old file stays, the temporary is removed, the error says why.
  expect_error([&] { replace_with(temporary + ".gone", path("m.safetensors")); }, {"renaming", "unchanged"});
  EXPECT_EQ(read_bytes(path("m.safetensors")), old_bytes);
  replace_with(temporary, path("m.safetensors"));  // finishing the interrupted write replaces it whole
  EXPECT_EQ(read_bytes(path("m.safetensors")), "half a new checkpoint");
  EXPECT_EQ(files_in_dir(), 1u);
}

TEST_F(Safetensors, AFailedSaveLeavesTheOldFileAndNoLitter) {
  manual_seed(1);
  nn::Linear model(3, 2);
  nn::save(*model, path("m.safetensors"));
  const std::string old_bytes = read_bytes(path("m.safetensors"));
  expect_error(
      [&] {
        safetensors::save(path("m.safetensors"), {{"w", Tensor()}});
      },
      {"\"w\" is undefined", "m.safetensors"});
  expect_error([&] { nn::save(*model, path("m.safetensors"), {{"minidl.format", "2"}}); }, {"reserved"});
  // A folder where the file should be: the rename fails after the temporary file was written.
  fs::create_directories(path("dir.safetensors/inside"));
  expect_error([&] { nn::save(*model, path("dir.safetensors")); }, {"renaming", "dir.safetensors"});
  EXPECT_EQ(read_bytes(path("m.safetensors")), old_bytes);
  EXPECT_EQ(files_in_dir(), 2u) << "no temporary file may be left behind";
  // Saving over an existing file replaces it.
  nn::Linear other(3, 2);
  nn::save(*other, path("m.safetensors"));
  nn::load(*model, path("m.safetensors"));
  EXPECT_EQ(snapshot(*model), snapshot(*other));
}

}  // namespace minidl::safetensors_test
