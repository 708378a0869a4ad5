#pragma once
// An app binary run as a child process, its stdout and stderr on one pipe: what the tests that
// signal the apps or check their exit statuses see, as a shell or a batch scheduler would.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace minidl::testing {

/// The path of build/mnist_mlp, or "" in a build without the apps.
#ifdef MINIDL_MNIST_MLP
constexpr const char* kMnistMlp = MINIDL_MNIST_MLP;
#else
constexpr const char* kMnistMlp = "";
#endif

/// The path of build/autoencoder, or "" in a build without the apps.
#ifdef MINIDL_AUTOENCODER
constexpr const char* kAutoencoder = MINIDL_AUTOENCODER;
#else
constexpr const char* kAutoencoder = "";
#endif

class AppProcess {
 public:
  AppProcess(const std::string& binary, std::vector<std::string> args) {
    args.insert(args.begin(), binary);
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
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
  }
  ~AppProcess() {
    if (pid_ > 0 && status_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }
  AppProcess(const AppProcess&) = delete;
  AppProcess& operator=(const AppProcess&) = delete;

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

/// The exit status of a process that exited; -1 for one a signal ended.
inline int exit_code(int wait_status) { return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1; }

}  // namespace minidl::testing
