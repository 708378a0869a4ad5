#pragma once
// Ctrl-C during training. The first SIGINT only sets a flag (about all a signal handler may safely
// do); the training loop sees it after the step in flight, writes a checkpoint where --save asks for
// one, says where it stopped, and the app exits with status 130 (128 + SIGINT, what a shell reports
// for a program Ctrl-C ended). The handler is installed with SA_RESETHAND, so a second SIGINT meets
// the default action and ends the process at once.
//
// A checkpoint written mid-epoch records the epochs completed and the optimizer steps taken, plus
// the batches of the interrupted epoch already trained (metadata kBatchesDoneKey): --resume skips
// those batches of the same data order, so the run continues where it stopped.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <string>

#include "core/safetensors.h"
#include "nn/module.h"
#include "optim/checkpoint.h"

namespace mnist_app {

/// The exit status of a run stopped by Ctrl-C.
constexpr int kInterruptedStatus = 130;
/// Checkpoint metadata: batches of the epoch after the completed ones that were already trained.
constexpr const char* kBatchesDoneKey = "mnist_app.batches_done";

namespace detail {
static_assert(std::atomic<bool>::is_always_lock_free, "a signal handler may only touch lock-free atomics");
inline std::atomic<bool> interrupt_requested{false};

inline void on_sigint(int) {
  interrupt_requested.store(true, std::memory_order_relaxed);
  static const char kMessage[] = "\ninterrupt: stopping after the current step (Ctrl-C again to quit at once)\n";
  const ssize_t written = write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  (void)written;  // nothing to do about a failed write inside a signal handler
}
}  // namespace detail

/// True once SIGINT arrived while an InterruptGuard was alive.
inline bool interrupted() { return detail::interrupt_requested.load(std::memory_order_relaxed); }

/// Catches SIGINT for its lifetime (a training run), then restores the handler there was before.
class InterruptGuard {
 public:
  InterruptGuard() {
    detail::interrupt_requested.store(false);
    struct sigaction action {};
    action.sa_handler = detail::on_sigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND | SA_RESTART;
    sigaction(SIGINT, &action, &previous_);
  }
  ~InterruptGuard() { sigaction(SIGINT, &previous_, nullptr); }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction previous_ {};
};

/// After a loop stopped on SIGINT in `epoch` (1-based) with `batches_done` of its batches trained:
/// writes the checkpoint `save` names (none when empty), says on stderr where the run stopped and how
/// to continue, and returns kInterruptedStatus.
inline int stop_after_interrupt(const std::string& save, const minidl::nn::Module& model,
                                const minidl::optim::Optimizer& optimizer, int epoch, int64_t batches_done,
                                int64_t batches_per_epoch) {
  std::fflush(stdout);
  std::string where = "interrupted in epoch " + std::to_string(epoch) + " after " + std::to_string(batches_done) +
                      " of its " + std::to_string(batches_per_epoch) + " batches";
  if (save.empty()) {
    std::fprintf(stderr, "%s; no checkpoint written (--save PATH keeps one)\n", where.c_str());
    return kInterruptedStatus;
  }
  minidl::optim::save_checkpoint(save, model, optimizer,
                                 {epoch - 1, (epoch - 1) * batches_per_epoch + batches_done},
                                 {{kBatchesDoneKey, std::to_string(batches_done)}});
  std::fprintf(stderr, "%s; checkpoint written to %s (continue with --resume %s)\n", where.c_str(), save.c_str(),
               save.c_str());
  return kInterruptedStatus;
}

/// The batches of the next epoch that the checkpoint `path` had already trained: 0 for one written
/// at the end of an epoch.
inline int64_t batches_done_in(const std::string& path) {
  const minidl::safetensors::Contents file = minidl::safetensors::load(path);
  auto it = file.metadata.find(kBatchesDoneKey);
  if (it == file.metadata.end()) return 0;
  int64_t done = -1;
  const std::string& text = it->second;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), done);
  MINIDL_CHECK(error == std::errc() && end == text.data() + text.size() && done >= 0, path, ": metadata \"",
               kBatchesDoneKey, "\" is \"", text, "\", expected a count of batches");
  return done;
}

}  // namespace mnist_app
