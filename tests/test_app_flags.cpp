// What the apps say to bad flags and to a run that diverges: a flag out of range names the flag and
// the value in plain words and exits non-zero; a loss that turns NaN stops training with an error
// naming the epoch and step instead of finishing at chance accuracy with exit status 0.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "apps/common/mnist_app.h"
#include "apps/common/models.h"

namespace {

void parse(std::vector<std::string> args) {
  args.insert(args.begin(), "app");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  mnist_app::parse_flags(static_cast<int>(argv.size()), argv.data(), "test", 1);
}

// An exit predicate for EXPECT_EXIT: the process exited with a nonzero status.
bool ExitedWithFailure(int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 0; }

}  // namespace

TEST(AppFlags, OutOfRangeFlagsSayWhatWasExpected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(parse({"--batch-size", "0"}), ExitedWithFailure,
              "--batch-size: must be at least 1, got 0");
  EXPECT_EXIT(parse({"--epochs", "two"}), ExitedWithFailure,
              "--epochs: expected a whole number, got 'two'");
  EXPECT_EXIT(parse({"--limit", "-5"}), ExitedWithFailure, "--limit: must be at least 0");
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
