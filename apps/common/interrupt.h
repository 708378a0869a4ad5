#pragma once
// Ctrl-C, or SIGTERM (what a batch scheduler sends before it kills a job), during training. The first
// of them only sets a flag (about all a signal handler may safely do); the training loop sees it
// after the step in flight, writes a checkpoint where --save asks for one, says where it stopped, and
// the app exits with 128 + the signal's number, what a shell reports for a program the signal ended:
// 130 for SIGINT, 143 for SIGTERM. The handler puts back the default action of both, so a second
// signal of either kind ends the process at once.
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

/// Checkpoint metadata: batches of the epoch after the completed ones that were already trained.
constexpr const char* kBatchesDoneKey = "mnist_app.batches_done";

namespace detail {
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");
inline std::atomic<int> stop_signal{0};  // the first SIGINT or SIGTERM; 0 before one came

inline void on_stop_signal(int sig) {
  // Only the first signal comes here: both are blocked while this runs, and left to their default.
  stop_signal.store(sig, std::memory_order_relaxed);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGINT, &default_action, nullptr);
  sigaction(SIGTERM, &default_action, nullptr);
  static const char kInterrupt[] = "\ninterrupt: stopping after the current step (Ctrl-C again to quit at once)\n";
  static const char kTerminate[] = "\nSIGTERM: stopping after the current step (a second signal quits at once)\n";
  const ssize_t written = sig == SIGTERM ? write(STDERR_FILENO, kTerminate, sizeof kTerminate - 1)
                                         : write(STDERR_FILENO, kInterrupt, sizeof kInterrupt - 1);
  (void)written;  // nothing to do about a failed write inside a signal handler
}
}  // namespace detail

/// True once SIGINT or SIGTERM arrived while an InterruptGuard was alive.
inline bool interrupted() { return detail::stop_signal.load(std::memory_order_relaxed) != 0; }

/// The exit status of a run the first signal stopped: 128 + its number (130 for SIGINT, 143 for
/// SIGTERM).
inline int interrupted_status() { return 128 + detail::stop_signal.load(std::memory_order_relaxed); }

/// Catches SIGINT and SIGTERM for its lifetime (a training run), then restores the handlers there
/// were before.
class InterruptGuard {
 public:
  InterruptGuard() {
    detail::stop_signal.store(0);
    struct sigaction action {};
    action.sa_handler = detail::on_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGINT);
    sigaddset(&action.sa_mask, SIGTERM);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction previous_int_ {}, previous_term_ {};
};

/// After a loop stopped on SIGINT or SIGTERM in `epoch` (1-based) with `batches_done` of its batches
/// trained: writes the checkpoint `save` names (none when empty), with `metadata` added, says on
/// stderr where the run stopped and how to continue, and returns interrupted_status().
inline int stop_after_interrupt(const std::string& save, const minidl::nn::Module& model,
                                const minidl::optim::Optimizer& optimizer, int epoch, int64_t batches_done,
                                int64_t batches_per_epoch, minidl::safetensors::Metadata metadata = {}) {
  std::fflush(stdout);
  const bool terminated = detail::stop_signal.load(std::memory_order_relaxed) == SIGTERM;
  const std::string where = std::string(terminated ? "terminated" : "interrupted") + " in epoch " +
                            std::to_string(epoch) + " after " + std::to_string(batches_done) + " of its " +
                            std::to_string(batches_per_epoch) + " batches";
  if (save.empty()) {
    std::fprintf(stderr, "%s; no checkpoint written (--save PATH keeps one)\n", where.c_str());
    return interrupted_status();
  }
  metadata[kBatchesDoneKey] = std::to_string(batches_done);
  minidl::optim::save_checkpoint(save, model, optimizer, {epoch - 1, (epoch - 1) * batches_per_epoch + batches_done},
                                 metadata);
  std::fprintf(stderr, "%s; checkpoint written to %s (continue with --resume %s)\n", where.c_str(), save.c_str(),
               save.c_str());
  return interrupted_status();
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
