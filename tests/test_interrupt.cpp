// Ctrl-C and SIGTERM in the apps, on the real mnist_mlp binary: the first SIGINT stops training
// after the step in flight, writes the checkpoint --save names, says where it stopped, and exits with
// 130; resuming from that checkpoint ends bit for bit where an uninterrupted run ends. SIGTERM, what
// a batch scheduler sends before it kills a job, does the same and exits with 143. A second signal
// of either kind ends the app at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <regex>
#include <string>
#include <vector>

#include "apps/common/interrupt.h"
#include "apps/common/models.h"
#include "app_process.h"
#include "data/mnist.h"
#include "data/paths.h"
#include "test_file_util.h"

namespace minidl::interrupt_test {

namespace {

using testing::AppProcess;
using testing::exit_code;

// mnist_mlp with these flags.
class App : public AppProcess {
 public:
  explicit App(std::vector<std::string> args) : AppProcess(testing::kMnistMlp, std::move(args)) {}
};

class Interrupt : public testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    if (std::string(testing::kMnistMlp).empty()) GTEST_SKIP() << "this build has no mnist_mlp (MINIDL_BUILD_APPS=OFF)";
    try {
      data::MNIST(data::data_root(), /*train=*/false);
    } catch (const Error& e) {
      GTEST_SKIP() << "MNIST not found; fetch it with scripts/get_data.sh (" << e.what() << ")";
    }
  }
  // 50 steps of batch 64 on one thread: long enough that a SIGINT sent when the run starts lands
  // well before its end, short enough for three runs in a few seconds.
  std::vector<std::string> args(std::vector<std::string> more, const std::string& limit = "3200") const {
    std::vector<std::string> a{"--device", "cpu", "--epochs", "1", "--limit", limit, "--threads", "1",
                               "--log-interval", "10"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
};

TEST_F(Interrupt, TheFirstSigintSavesAndExits130AndTheRunResumesExactly) {
  const std::string saved = path("interrupted.safetensors");
  App interrupted(args({"--save", saved}));
  // The header comes after the data is loaded, right before training: the handler is in place.
  ASSERT_TRUE(interrupted.wait_for("training / ")) << interrupted.output();
  interrupted.signal(SIGINT);
  const int status = interrupted.finish();
  const std::string out = interrupted.output();
  ASSERT_EQ(exit_code(status), 130) << out;
  EXPECT_NE(out.find("interrupt: stopping after the current step"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("interrupted in epoch 1 after (\\d+) of its 50 batches; checkpoint "
                                                   "written to (\\S+) \\(continue with --resume")))
      << out;
  const int64_t done = std::stoll(m[1]);
  EXPECT_GE(done, 1);
  EXPECT_LT(done, 50) << "the run ended before the interrupt came: make it longer";
  EXPECT_EQ(m[2], saved);

  // The checkpoint loads: the model, the optimizer and the position in the epoch.
  auto model = std::make_shared<mnist_app::Mlp>();
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const optim::TrainingPosition at = optim::load_checkpoint(saved, *model, optimizer);
  EXPECT_EQ(at.epoch, 0);
  EXPECT_EQ(at.step, done);
  EXPECT_EQ(mnist_app::batches_done_in(saved), done);

  // Resuming trains the rest of the epoch and ends with the very bytes of an uninterrupted run.
  const std::string resumed_path = path("resumed.safetensors"), straight_path = path("straight.safetensors");
  App resumed(args({"--resume", saved, "--save", resumed_path}));
  ASSERT_EQ(exit_code(resumed.finish()), 0) << resumed.output();
  EXPECT_NE(resumed.output().find("in epoch 1 after " + std::to_string(done) + " of its batches"), std::string::npos)
      << resumed.output();
  App straight(args({"--save", straight_path}));
  ASSERT_EQ(exit_code(straight.finish()), 0) << straight.output();
  EXPECT_TRUE(testing::read_bytes(resumed_path) == testing::read_bytes(straight_path))
      << "the resumed run's checkpoint differs from the uninterrupted run's";
}

TEST_F(Interrupt, TheAutoencoderResumesItsRunInsteadOfStartingOver) {
  // --resume used to be accepted and ignored there: a resubmitted job trained from scratch and wrote
  // over its checkpoint. One epoch, then a resumed second, must end with a straight run's bytes.
  if (std::string(testing::kAutoencoder).empty()) GTEST_SKIP() << "this build has no autoencoder";
  const std::vector<std::string> common{"--device", "cpu", "--dataset", "mnist", "--limit", "256", "--batch-size", "64",
                                        "--threads", "1", "--test-batch-size", "1000"};
  auto run = [&](std::vector<std::string> more) {
    more.insert(more.begin(), common.begin(), common.end());
    AppProcess app(testing::kAutoencoder, more);
    const int status = app.finish();
    EXPECT_EQ(exit_code(status), 0) << app.output();
    return app.output();
  };
  const std::string first = path("first.safetensors"), resumed = path("resumed.safetensors"),
                    straight = path("straight.safetensors");
  run({"--epochs", "1", "--save", first});
  const std::string out = run({"--epochs", "2", "--resume", first, "--save", resumed});
  EXPECT_NE(out.find("resumed from " + first + " after epoch 1"), std::string::npos) << out;
  EXPECT_EQ(out.find("epoch 1:"), std::string::npos) << "the resumed run trained epoch 1 again:\n" << out;
  run({"--epochs", "2", "--save", straight});
  EXPECT_TRUE(testing::read_bytes(resumed) == testing::read_bytes(straight))
      << "the resumed run's checkpoint differs from the uninterrupted run's";
}

TEST_F(Interrupt, ASecondSigintEndsTheAppAtOnce) {
  // Batches of 2000: the first step takes long enough for the second signal to come during it.
  App app(args({"--batch-size", "2000"}, "6000"));
  ASSERT_TRUE(app.wait_for("training / ")) << app.output();
  app.signal(SIGINT);
  ASSERT_TRUE(app.wait_for("interrupt: stopping after the current step")) << app.output();
  app.signal(SIGINT);
  const int status = app.finish();
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << exit_code(status) << ":\n" << app.output();
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

TEST_F(Interrupt, AResumeWithAnotherEpochSizeIsAnError) {
  const std::string saved = path("interrupted.safetensors");
  App first(args({"--save", saved}));
  ASSERT_TRUE(first.wait_for("training / ")) << first.output();
  first.signal(SIGINT);
  ASSERT_EQ(exit_code(first.finish()), 130) << first.output();
  App other(args({"--resume", saved}, "64"));
  const int status = other.finish();
  EXPECT_EQ(exit_code(status), 1) << other.output();
  EXPECT_NE(other.output().find("resume with the --batch-size and --limit of the interrupted run"), std::string::npos)
      << other.output();
}

TEST_F(Interrupt, SigtermSavesAndExits143AndTheRunResumes) {
  const std::string saved = path("terminated.safetensors");
  App terminated(args({"--save", saved}));
  ASSERT_TRUE(terminated.wait_for("training / ")) << terminated.output();
  terminated.signal(SIGTERM);
  const int status = terminated.finish();
  const std::string out = terminated.output();
  ASSERT_EQ(exit_code(status), 143) << (WIFSIGNALED(status) ? "ended by signal " + std::to_string(WTERMSIG(status)) : "")
                                    << "\n" << out;
  EXPECT_NE(out.find("SIGTERM: stopping after the current step"), std::string::npos) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("terminated in epoch 1 after (\\d+) of its 50 batches; checkpoint "
                                                   "written to (\\S+) \\(continue with --resume")))
      << out;
  const std::string done = m[1];
  EXPECT_EQ(m[2], saved);
  EXPECT_EQ(mnist_app::batches_done_in(saved), std::stoll(done));

  App resumed(args({"--resume", saved}));
  ASSERT_EQ(exit_code(resumed.finish()), 0) << resumed.output();
  EXPECT_NE(resumed.output().find("in epoch 1 after " + done + " of its batches"), std::string::npos)
      << resumed.output();
}

TEST_F(Interrupt, ACtrlCAfterSigtermEndsTheAppAtOnce) {
  App app(args({"--batch-size", "2000"}, "6000"));  // a first step long enough for both signals
  ASSERT_TRUE(app.wait_for("training / ")) << app.output();
  app.signal(SIGTERM);
  ASSERT_TRUE(app.wait_for("SIGTERM: stopping after the current step")) << app.output();
  app.signal(SIGINT);
  const int status = app.finish();
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << exit_code(status) << ":\n" << app.output();
  EXPECT_EQ(WTERMSIG(status), SIGINT);
}

}  // namespace

}  // namespace minidl::interrupt_test
