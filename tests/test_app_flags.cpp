// What the apps say to bad flags and to a run that diverges: a flag out of range names the flag and
// the value in plain words and exits with 2, as argparse does, and so do an unknown flag and a
// --save, --resume or --metrics path the run could not use, before any data is loaded; --help exits
// 0. A loss that turns NaN stops training with an error naming the epoch and step instead of
// finishing at chance accuracy with exit status 0. --precision takes fp32, tf32, bf16 or fp16 and
// sets the TF32 switches, autocast and the gradient scaler as PyTorch's users do.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app_process.h"
#include "apps/common/mnist_app.h"
#include "apps/common/models.h"
#include "apps/common/precision.h"

namespace minidl::app_flags_test {

namespace {

mnist_app::Flags parse(std::vector<std::string> args) {
  args.insert(args.begin(), "app");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return mnist_app::parse_flags(static_cast<int>(argv.size()), argv.data(), "test", 1);
}

using mnist_app::Precision;
constexpr Precision kAllPrecisions[] = {Precision::Fp32, Precision::Tf32, Precision::Bf16, Precision::Fp16};

const auto kUsageError = ::testing::ExitedWithCode(2);

}  // namespace

TEST(AppFlags, OutOfRangeFlagsSayWhatWasExpectedAndExit2) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(parse({"--batch-size", "0"}), kUsageError, "--batch-size: must be at least 1, got 0");
  EXPECT_EXIT(parse({"--epochs", "two"}), kUsageError, "--epochs: expected a whole number, got 'two'");
  EXPECT_EXIT(parse({"--limit", "-5"}), kUsageError, "--limit: must be at least 0");
  EXPECT_EXIT(parse({"--schedule", "linear"}), kUsageError, "--schedule");
}

TEST(AppFlags, AnUnknownFlagExits2AndHelpExits0) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(parse({"--no-such-flag"}), kUsageError, "--no-such-flag");
  EXPECT_EXIT(parse({"--epochs"}), kUsageError, "--epochs");  // a value is missing
  EXPECT_EXIT(parse({"--help"}), ::testing::ExitedWithCode(0), "");
}

TEST(AppFlags, PathsTheRunCannotUseExit2NamingThem) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(parse({"--save", "/no-such-minidl-folder/run.safetensors"}), kUsageError,
              "--save: cannot write /no-such-minidl-folder/run.safetensors: the folder /no-such-minidl-folder does "
              "not exist");
  EXPECT_EXIT(parse({"--save", "/tmp"}), kUsageError, "--save: cannot write /tmp: it is a folder");
  EXPECT_EXIT(parse({"--resume", "/no-such-minidl-folder/run.safetensors"}), kUsageError,
              "--resume: cannot read /no-such-minidl-folder/run.safetensors \\(No such file or directory\\)");
  EXPECT_EXIT(parse({"--resume", "/tmp"}), kUsageError, "--resume: cannot read /tmp: it is a folder");
  EXPECT_EXIT(parse({"--metrics", "/dev/null/curves"}), kUsageError,
              "--metrics: cannot write /dev/null/curves: /dev/null is not a folder");
}

// On the binary: the run stops at the flags, before it loads the data, let alone trains an epoch.
TEST(AppFlags, ASaveIntoAMissingFolderFailsBeforeTraining) {
  if (std::string(minidl::testing::kMnistMlp).empty()) GTEST_SKIP() << "this build has no mnist_mlp";
  const std::string save = "/no-such-minidl-folder/run.safetensors";
  minidl::testing::AppProcess app(minidl::testing::kMnistMlp, {"--device", "cpu", "--epochs", "1", "--limit", "640",
                                                               "--threads", "1", "--save", save});
  const int status = app.finish();
  EXPECT_EQ(minidl::testing::exit_code(status), 2) << app.output();
  EXPECT_NE(app.output().find("cannot write " + save), std::string::npos) << app.output();
  EXPECT_EQ(app.output().find("training / "), std::string::npos) << "it loaded the data first:\n" << app.output();
}

TEST(AppFlags, ADivergingRunStopsWithTheEpochAndStep) {
  mnist_app::Flags f;
  f.epochs = 1, f.limit = 640, f.batch_size = 64, f.log_interval = 5, f.device = "cpu", f.lr = 10;
  try {
    mnist_app::load(f, false);
  } catch (const minidl::Error& e) {
    GTEST_SKIP() << "MNIST not found; fetch it with scripts/get_data.sh (" << e.what() << ")";
  }
  minidl::manual_seed(1);
  try {
    mnist_app::run(std::make_shared<mnist_app::Mlp>(), f);
    FAIL() << "expected the run to stop";
  } catch (const minidl::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("training diverged"), std::string::npos) << message;
    // The loss is read at log points only (every 5 steps here), so the step named is one of those.
    EXPECT_TRUE(message.find("at epoch 1, step 5 ") != std::string::npos ||
                message.find("at epoch 1, step 10 ") != std::string::npos)
        << message;
  }
}

TEST(AppFlags, PrecisionIsFp32UnlessAskedAndTakesTheFourValues) {
  EXPECT_EQ(parse({}).precision, "fp32");
  for (const char* name : {"fp32", "tf32", "bf16", "fp16"}) EXPECT_EQ(parse({"--precision", name}).precision, name);
}

TEST(AppFlags, AnUnknownPrecisionExits2NamingTheValues) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(parse({"--precision", "fp8"}), kUsageError, "--precision: expected fp32, tf32, bf16 or fp16, got 'fp8'");
  EXPECT_EXIT(parse({"--precision", "BF16"}), kUsageError, "got 'BF16'");
}

TEST(AppPrecision, NamesRoundTripAndBf16AndFp16Autocast) {
  for (Precision p : kAllPrecisions) EXPECT_EQ(mnist_app::parse_precision(mnist_app::precision_name(p)), p);
  EXPECT_EQ(mnist_app::autocast_dtype(Precision::Fp32), std::nullopt);
  EXPECT_EQ(mnist_app::autocast_dtype(Precision::Tf32), std::nullopt);
  EXPECT_EQ(mnist_app::autocast_dtype(Precision::Bf16), minidl::kBFloat16);
  EXPECT_EQ(mnist_app::autocast_dtype(Precision::Fp16), minidl::kFloat16);
  try {  // a Flags set in code, not on the command line, gets the same words
    mnist_app::parse_precision("half");
    FAIL() << "'half' was taken for a precision";
  } catch (const minidl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--precision: expected fp32, tf32, bf16 or fp16, got 'half'"),
              std::string::npos)
        << e.what();
  }
}

TEST(AppPrecision, Fp32IsStrictTheOthersTurnTf32OnAndTheSwitchesComeBackAfter) {
  minidl::set_allow_tf32_matmul(true);  // as MINIDL_ALLOW_TF32=1 would leave them
  minidl::set_allow_tf32_cudnn(false);
  {
    mnist_app::PrecisionScope strict(Precision::Fp32);
    EXPECT_FALSE(minidl::allow_tf32_matmul());
    EXPECT_FALSE(minidl::allow_tf32_cudnn());
  }
  EXPECT_TRUE(minidl::allow_tf32_matmul());
  EXPECT_FALSE(minidl::allow_tf32_cudnn());
  for (Precision p : {Precision::Tf32, Precision::Bf16, Precision::Fp16}) {
    mnist_app::PrecisionScope scope(p);
    EXPECT_TRUE(minidl::allow_tf32_matmul()) << mnist_app::precision_name(p);
    EXPECT_TRUE(minidl::allow_tf32_cudnn()) << mnist_app::precision_name(p);
  }
  minidl::set_allow_tf32_matmul(false);
  minidl::set_allow_tf32_cudnn(false);
}

TEST(AppPrecision, AutocastCoversTheForwardInBf16AndFp16Only) {
  using namespace minidl;
  for (Precision p : kAllPrecisions) {
    const std::optional<DType> low = mnist_app::autocast_dtype(p);
    {
      mnist_app::ForwardPrecision forward(p, Device::cpu());
      EXPECT_EQ(autocast::is_enabled(kCPU), low.has_value()) << mnist_app::precision_name(p);
      if (low) {
        EXPECT_EQ(autocast::dtype(kCPU), *low);
      }
    }
    EXPECT_FALSE(autocast::is_enabled(kCPU)) << "left on after " << mnist_app::precision_name(p);
  }
  // The MLP's last Linear runs in the low dtype under it, as torch.autocast's linear does.
  manual_seed(1);
  mnist_app::Mlp mlp;
  const Tensor x = randn({4, 1, 28, 28});
  for (Precision p : kAllPrecisions) {
    mnist_app::ForwardPrecision forward(p, Device::cpu());
    EXPECT_EQ(mlp.forward(x).dtype(), mnist_app::autocast_dtype(p).value_or(kFloat32)) << mnist_app::precision_name(p);
  }
}

TEST(AppPrecision, OnlyFp16ScalesTheLoss) {
  for (Precision p : kAllPrecisions) {
    minidl::optim::GradScaler scaler(mnist_app::grad_scaler_options(p));
    EXPECT_EQ(scaler.is_enabled(), p == Precision::Fp16) << mnist_app::precision_name(p);
    EXPECT_EQ(mnist_app::step_scaler(scaler) != nullptr, p == Precision::Fp16) << mnist_app::precision_name(p);
  }
}

namespace {

struct TempFolder {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("minidl-precision-" + std::to_string(getpid()));
  ~TempFolder() { std::filesystem::remove_all(path); }
};

// One epoch of `Model` on `device` from seed 1 in `precision`: the mean training loss and the test
// accuracy, from the run's epochs.csv. With `errors`, what the run wrote to stderr.
template <class Model>
std::vector<double> one_epoch(const std::string& device, const std::string& precision, const TempFolder& folder,
                              int64_t images, std::string* errors = nullptr) {
  mnist_app::Flags f;
  f.epochs = 1, f.limit = images, f.batch_size = 64, f.log_interval = 5, f.device = device;
  f.precision = precision;
  f.metrics = (folder.path / (device + "-" + precision)).string();
  minidl::manual_seed(1);
  if (errors) ::testing::internal::CaptureStderr();
  EXPECT_EQ(mnist_app::run(std::make_shared<Model>(), f), 0) << device << " " << precision;
  if (errors) *errors = ::testing::internal::GetCapturedStderr();
  const auto rows = mnist_app::read_csv(f.metrics + "/epochs.csv", mnist_app::kEpochsHeader);
  EXPECT_EQ(rows.size(), 1u);
  return rows.empty() ? std::vector<double>{NAN, NAN} : std::vector<double>{rows[0][1], rows[0][3]};
}

bool has_mnist() {
  try {
    mnist_app::load(mnist_app::Flags(), false);
    return true;
  } catch (const minidl::Error&) {
    return false;
  }
}

}  // namespace

// fp16's loss scale and growth count go into the checkpoint and come back on --resume; a checkpoint
// of another precision leaves a fresh scaler as it is.
TEST(AppPrecision, TheScalerStateRoundTripsThroughACheckpoint) {
  using namespace minidl;
  TempFolder folder;
  std::filesystem::create_directories(folder.path);
  const std::string with_scaler = (folder.path / "fp16.safetensors").string(),
                    without = (folder.path / "fp32.safetensors").string();
  mnist_app::Mlp model;
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01));
  optim::GradScaler saved(mnist_app::grad_scaler_options(Precision::Fp16));
  saved.scale(full({}, 1.0, kFloat32));  // makes its scale, as the first step does
  saved.update(1024.0);
  optim::save_checkpoint(with_scaler, model, sgd, {1, 10}, mnist_app::scaler_metadata(saved));
  optim::GradScaler disabled(mnist_app::grad_scaler_options(Precision::Fp32));
  EXPECT_TRUE(mnist_app::scaler_metadata(disabled).empty());
  optim::save_checkpoint(without, model, sgd, {1, 10}, mnist_app::scaler_metadata(disabled));

  optim::GradScaler resumed(mnist_app::grad_scaler_options(Precision::Fp16));
  mnist_app::restore_scaler(resumed, with_scaler);
  EXPECT_EQ(resumed.get_scale(), 1024.0);
  EXPECT_EQ(resumed.get_growth_tracker(), saved.get_growth_tracker());
  EXPECT_EQ(resumed.scale(full({}, 2.0, kFloat32)).item<float>(), 2048.0f);  // the first step uses it

  optim::GradScaler fresh(mnist_app::grad_scaler_options(Precision::Fp16));
  mnist_app::restore_scaler(fresh, without);
  EXPECT_EQ(fresh.get_scale(), 65536.0);
}

// The whole app path on the CPU: bf16 autocast changes the numbers (it ran), and the run learns as
// the float32 one does, within bfloat16's rounding over an epoch of 20 steps.
TEST(AppPrecision, Bf16TrainingOnTheCpuFollowsFp32) {
  if (!has_mnist()) GTEST_SKIP() << "MNIST not found; fetch it with scripts/get_data.sh";
  TempFolder folder;
  const std::vector<double> fp32 = one_epoch<mnist_app::Mlp>("cpu", "fp32", folder, 1280),
                            bf16 = one_epoch<mnist_app::Mlp>("cpu", "bf16", folder, 1280);
  EXPECT_NE(bf16[0], fp32[0]) << "bf16 trained bit for bit as fp32: autocast did not take effect";
  EXPECT_NEAR(bf16[0], fp32[0], 0.05 * fp32[0]);  // mean training loss
  EXPECT_NEAR(bf16[1], fp32[1], 2.0);             // test accuracy, percent
  EXPECT_GT(bf16[1], 40.0);                       // it learned (59% in float32 here): chance is 10%
}

// On a GPU, the apps' real path: the MLP and the CNN train in every precision with each step one
// captured graph (autocast casts and fp16's scaler inside it; a failed capture would say on stderr
// that the steps run eagerly), learning as float32 does.
TEST(AppPrecision, CudaTrainsGraphedInEveryPrecision) {
  if (!minidl::cuda::is_available()) GTEST_SKIP() << "no GPU: " << minidl::cuda::unavailable_reason();
  if (!has_mnist()) GTEST_SKIP() << "MNIST not found; fetch it with scripts/get_data.sh";
  TempFolder folder;
  for (bool cnn : {false, true}) {
    double fp32_loss = NAN, fp32_accuracy = NAN;
    for (Precision p : kAllPrecisions) {
      const std::string name = mnist_app::precision_name(p);
      std::string errors;
      const std::vector<double> r =
          cnn ? one_epoch<mnist_app::Cnn>("cuda", name, folder, 2560, &errors)
              : one_epoch<mnist_app::Mlp>("cuda", name, folder, 2560, &errors);
      const std::string what = std::string(cnn ? "CNN " : "MLP ") + name;
      EXPECT_EQ(errors.find("eagerly"), std::string::npos) << what << ":\n" << errors;
      EXPECT_TRUE(std::isfinite(r[0])) << what;
      if (p == Precision::Fp32) {
        fp32_loss = r[0], fp32_accuracy = r[1];
        EXPECT_GT(r[1], 50.0) << what;
      } else {
        EXPECT_NEAR(r[0], fp32_loss, 0.1 * fp32_loss) << what;
        EXPECT_NEAR(r[1], fp32_accuracy, 5.0) << what;
      }
    }
  }
}

}  // namespace minidl::app_flags_test
