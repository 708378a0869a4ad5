// Ctrl-C in the apps, on the real mnist_mlp binary: the first SIGINT stops training after the step
// in flight, writes the checkpoint --save names, says where it stopped, and exits with 130; resuming
// from that checkpoint ends bit for bit where an uninterrupted run ends. A second SIGINT ends the
// app at once.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "apps/common/interrupt.h"
#include "apps/common/models.h"
#include "data/mnist.h"
#include "data/paths.h"
#include "test_file_util.h"

namespace minidl {
namespace {

#ifdef MINIDL_MNIST_MLP
constexpr const char* kApp = MINIDL_MNIST_MLP;
#else
constexpr const char* kApp = "";
#endif

// The app running with stdout and stderr on one pipe.
class App {
 public:
  explicit App(std::vector<std::string> args) {
    args.insert(args.begin(), kApp);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ == 0) {  // the child: only async-signal-safe calls until exec
      dup2(fds[1], STDOUT_FILENO);
      dup2(fds[1], STDERR_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(kApp, argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
  }
  ~App() {
    if (pid_ > 0 && status_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }

  /// Reads the output until it contains `text` (true), or until the app closes it or 60 s pass.
  bool wait_for(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (output_.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{out_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0 || !read_some()) return false;
    }
    return true;
  }
  void signal(int sig) { kill(pid_, sig); }
  /// Reads the rest of the output and waits for the app to end; returns its wait status.
  int finish() {
    while (read_some()) {
    }
    waitpid(pid_, &status_, 0);
    return status_;
  }
  const std::string& output() const { return output_; }

 private:
  bool read_some() {
    char buffer[4096];
    const ssize_t n = read(out_, buffer, sizeof buffer);
    if (n <= 0) return false;
    output_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int status_ = -1;
  std::string output_;
};

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

class Interrupt : public testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    if (std::string(kApp).empty()) GTEST_SKIP() << "this build has no mnist_mlp (MINIDL_BUILD_APPS=OFF)";
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

}  // namespace
}  // namespace minidl
