#pragma once
// One line per epoch that redraws itself on a terminal (images/s, loss, ETA), or plain log lines
// when the output is a file or a pipe.
#include <unistd.h>

#include <chrono>
#include <cstdio>

class ProgressBar {
 public:
  ProgressBar(int epoch, int64_t total) : epoch_(epoch), total_(total), tty_(isatty(fileno(stdout))) {}

  void update(int64_t done, double loss) {
    double seconds = elapsed();
    double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
    if (tty_) {
      constexpr int kWidth = 30;
      int filled = static_cast<int>(kWidth * done / std::max<int64_t>(total_, 1));
      std::printf("\rEpoch %d [%.*s%*s] %lld/%lld  %.0f img/s  loss %.4f  ETA %d:%02d ", epoch_, filled,
                  "==============================", kWidth - filled, "", static_cast<long long>(done),
                  static_cast<long long>(total_), rate, loss, static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
    } else {
      std::printf("Epoch %d [%lld/%lld (%.0f%%)]  %.0f img/s  loss %.6f\n", epoch_, static_cast<long long>(done),
                  static_cast<long long>(total_), 100.0 * done / std::max<int64_t>(total_, 1), rate, loss);
    }
    std::fflush(stdout);
  }

  void finish() {
    if (tty_) std::printf("\n");
  }
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  int epoch_;
  int64_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};
