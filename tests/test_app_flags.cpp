// What the apps say to bad flags and to a run that diverges: a flag out of range names the flag and
// the value in plain words and exits with 2, as argparse does, and so do an unknown flag and a
// --save, --resume or --metrics path the run could not use, before any data is loaded; --help exits
// 0. A loss that turns NaN stops training with an error naming the epoch and step instead of
// finishing at chance accuracy with exit status 0.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "app_process.h"
#include "apps/common/mnist_app.h"
#include "apps/common/models.h"

namespace {

void parse(std::vector<std::string> args) {
  args.insert(args.begin(), "app");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  mnist_app::parse_flags(static_cast<int>(argv.size()), argv.data(), "test", 1);
}

const auto kUsageError = testing::ExitedWithCode(2);

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
  EXPECT_EXIT(parse({"--help"}), testing::ExitedWithCode(0), "");
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
