#pragma once
// The training curves of a run (--metrics DIR), rewritten after every epoch:
//   epochs.csv  epoch,train_loss,test_loss,test_accuracy,epoch_seconds,lr    one row per epoch
//   steps.csv   epoch,step,images_seen,train_loss                          one row per log interval
//   curves.svg  loss (train and test) and test accuracy against epochs     opens in any browser
// step and images_seen count from the start of the run, across epochs. Each file is replaced
// atomically (core/atomic_file.h), so a run cut short leaves complete files up to its last epoch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/common/svg_chart.h"
#include "core/atomic_file.h"
#include "core/error.h"

namespace mnist_app {

struct EpochMetrics {
  int epoch = 0;
  double train_loss = NAN, test_loss = NAN;
  double test_accuracy = NAN;  // percent; NaN (an empty field) for a model without one
  double seconds = NAN, lr = NAN;
};

struct StepMetrics {
  int epoch = 0;
  int64_t step = 0, images_seen = 0;
  double train_loss = NAN;
};

inline constexpr const char* kEpochsHeader = "epoch,train_loss,test_loss,test_accuracy,epoch_seconds,lr";
inline constexpr const char* kStepsHeader = "epoch,step,images_seen,train_loss";

/// A CSV field: enough digits to read the value back as written; NaN as an empty field.
inline std::string csv_number(double v) {
  if (std::isnan(v)) return "";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.10g", v);
  return buffer;
}

/// The rows of a CSV file of ours below `header`, split into numbers (an empty field is NaN).
/// Throws, naming the file and line, when the header or a row is not what this file writes.
inline std::vector<std::vector<double>> read_csv(const std::string& path, const std::string& header) {
  std::ifstream in(path);
  MINIDL_CHECK(in, "cannot read ", path);
  std::string line;
  MINIDL_CHECK(std::getline(in, line) && line == header, path, ": expected the header \"", header, "\", found \"",
               line, "\"");
  const size_t columns = static_cast<size_t>(std::count(header.begin(), header.end(), ',')) + 1;
  std::vector<std::vector<double>> rows;
  for (int number = 2; std::getline(in, line); ++number) {
    std::vector<double> row;
    std::stringstream fields(line + ",");  // the trailing comma makes an empty last field a field
    std::string field;
    while (std::getline(fields, field, ',')) {
      char* end = nullptr;
      row.push_back(field.empty() ? NAN : std::strtod(field.c_str(), &end));
      MINIDL_CHECK(field.empty() || *end == '\0', path, ":", number, ": \"", field, "\" is not a number");
    }
    MINIDL_CHECK(row.size() == columns, path, ":", number, ": expected ", columns, " fields, found ", row.size());
    rows.push_back(std::move(row));
  }
  return rows;
}

/// Collects a run's metrics and rewrites the files in `dir` after every epoch.
///   MetricsLog metrics("runs/cnn", "MNIST CNN");
///   metrics.add_step(epoch, step, seen, loss);   // at log points
///   metrics.add_epoch({epoch, train_loss, test_loss, accuracy, seconds, lr});
class MetricsLog {
 public:
  /// Creates `dir`. A run resumed at `first_epoch` > 1 keeps the rows of the earlier epochs found
  /// there, so that the curves cover the whole run.
  MetricsLog(std::string dir, std::string title, int first_epoch = 1) : dir_(std::move(dir)), title_(std::move(title)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    MINIDL_CHECK(!ec && std::filesystem::is_directory(dir_), "--metrics ", dir_, ": cannot create the folder (",
                 ec ? ec.message() : "a file of that name exists", ")");
    if (first_epoch > 1) keep_before(first_epoch);
  }

  /// The training loss at a log point: `step` and `images` counted within `epoch`.
  void add_step(int epoch, int64_t step, int64_t images, double loss) {
    if (epoch != current_epoch_) {
      current_epoch_ = epoch;
      step_base_ = steps_.empty() ? 0 : steps_.back().step;
      images_base_ = steps_.empty() ? 0 : steps_.back().images_seen;
    }
    steps_.push_back({epoch, step_base_ + step, images_base_ + images, loss});
  }

  /// Records the epoch and rewrites the three files.
  void add_epoch(const EpochMetrics& m) {
    epochs_.push_back(m);
    write();
  }

  const std::vector<EpochMetrics>& epochs() const { return epochs_; }
  const std::vector<StepMetrics>& steps() const { return steps_; }
  std::string path(const char* name) const { return (std::filesystem::path(dir_) / name).string(); }

 private:
  void write() const {
    std::string epochs = std::string(kEpochsHeader) + "\n";
    for (const EpochMetrics& m : epochs_) {
      epochs += std::to_string(m.epoch) + "," + csv_number(m.train_loss) + "," + csv_number(m.test_loss) + "," +
                csv_number(m.test_accuracy) + "," + csv_number(m.seconds) + "," + csv_number(m.lr) + "\n";
    }
    std::string steps = std::string(kStepsHeader) + "\n";
    for (const StepMetrics& s : steps_) {
      steps += std::to_string(s.epoch) + "," + std::to_string(s.step) + "," + std::to_string(s.images_seen) + "," +
               csv_number(s.train_loss) + "\n";
    }
    minidl::write_file_atomically(path("epochs.csv"), {epochs});
    minidl::write_file_atomically(path("steps.csv"), {steps});
    minidl::write_file_atomically(path("curves.svg"), {chart()});
  }

  std::string chart() const {
    svg::Series train{"train", "#1f77b4", {}, {}}, test{"test", "#d62728", {}, {}}, accuracy{"test", "#2ca02c", {}, {}};
    for (const EpochMetrics& m : epochs_) {
      train.x.push_back(m.epoch), train.y.push_back(m.train_loss);
      test.x.push_back(m.epoch), test.y.push_back(m.test_loss);
      accuracy.x.push_back(m.epoch), accuracy.y.push_back(m.test_accuracy);
    }
    svg::Panel loss{"Loss", "epoch", "loss", {train, test}};
    svg::Panel acc{"Test accuracy", "epoch", "accuracy (%)", {accuracy}};
    acc.y_floor = 0, acc.y_ceiling = 100;
    return svg::chart(title_, {loss, acc});
  }

  void keep_before(int first_epoch) {
    if (std::filesystem::exists(path("epochs.csv"))) {
      for (const auto& r : read_csv(path("epochs.csv"), kEpochsHeader))
        if (r[0] < first_epoch) epochs_.push_back({static_cast<int>(r[0]), r[1], r[2], r[3], r[4], r[5]});
    }
    if (std::filesystem::exists(path("steps.csv"))) {
      for (const auto& r : read_csv(path("steps.csv"), kStepsHeader))
        if (r[0] < first_epoch)
          steps_.push_back({static_cast<int>(r[0]), static_cast<int64_t>(r[1]), static_cast<int64_t>(r[2]), r[3]});
    }
  }

  std::string dir_, title_;
  std::vector<EpochMetrics> epochs_;
  std::vector<StepMetrics> steps_;
  int current_epoch_ = 0;
  int64_t step_base_ = 0, images_base_ = 0;
};

}  // namespace mnist_app
