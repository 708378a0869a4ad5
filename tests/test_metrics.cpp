// The training curves of --metrics (apps/common/metrics.h, apps/common/svg_chart.h): the CSV files
// hold the run's numbers and read back, the SVG is one well-formed <svg> whose lines sit where its
// own axes say the values are, a resumed run keeps the earlier epochs, and a short real run of the
// MNIST app writes all three files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "apps/common/metrics.h"
#include "apps/common/mnist_app.h"
#include "apps/common/models.h"

namespace minidl::metrics_test {

namespace {

namespace fs = std::filesystem;
using mnist_app::EpochMetrics;
using mnist_app::MetricsLog;

// A fresh folder under the system's temporary folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("minidl_metrics_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const char* name) const { return (path / name).string(); }
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::vector<EpochMetrics> kEpochs = {
    {1, 0.4123, 0.2051, 93.87, 12.5, 0.01},
    {2, 0.1577, 0.1102, 96.71, 11.25, 0.0075},
    {3, 0.0931, 0.0833, 97.42, 11.0, 0.0025},
};

MetricsLog write_run(const std::string& dir) {
  MetricsLog log(dir, "MLP <test> & co");
  for (const EpochMetrics& m : kEpochs) {
    log.add_step(m.epoch, 100, 6400, m.train_loss + 0.1);
    log.add_step(m.epoch, 157, 10000, m.train_loss);
    log.add_epoch(m);
  }
  return log;
}

// Checks that tags nest, and returns the names of the top-level elements.
std::vector<std::string> top_level_elements(const std::string& xml) {
  std::vector<std::string> stack, top;
  const std::regex tag("<(/?)([A-Za-z?!][^\\s/>]*)[^>]*?(/?)>");
  for (auto it = std::sregex_iterator(xml.begin(), xml.end(), tag); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[2];
    if (name[0] == '?' || name[0] == '!') continue;  // the XML declaration, comments
    if ((*it)[1] == "/") {
      EXPECT_FALSE(stack.empty()) << "</" << name << "> closes nothing";
      if (stack.empty()) return top;
      EXPECT_EQ(stack.back(), name) << "</" << name << "> closes <" << stack.back() << ">";
      stack.pop_back();
      continue;
    }
    if (stack.empty()) top.push_back(name);
    if ((*it)[3] != "/") stack.push_back(name);
  }
  EXPECT_TRUE(stack.empty()) << "<" << (stack.empty() ? "" : stack.back()) << "> is never closed";
  return top;
}

double attribute(const std::string& element, const std::string& name) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(element, m, std::regex(" " + name + "=\"([-0-9.]+)\""))) << name << " in " << element;
  return m.empty() ? NAN : std::stod(m[1]);
}

// One panel of the chart: its ticks as (value, pixel) pairs and its polylines' points by label.
struct PanelView {
  std::vector<std::pair<double, double>> xticks, yticks;
  std::map<std::string, std::vector<std::pair<double, double>>> series;
};

PanelView panel_view(const std::string& svg, const std::string& title) {
  PanelView v;
  const size_t start = svg.find("<g class=\"panel\" data-title=\"" + title + "\">");
  EXPECT_NE(start, std::string::npos) << title;
  if (start == std::string::npos) return v;
  const std::string g = svg.substr(start, svg.find("</g>", start) - start);
  const std::regex tick("<text class=\"([xy])tick\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(g.begin(), g.end(), tick); it != std::sregex_iterator(); ++it) {
    const std::string element = (*it)[0];
    if ((*it)[1] == "x") v.xticks.emplace_back(std::stod((*it)[2]), attribute(element, "x"));
    else v.yticks.emplace_back(std::stod((*it)[2]), attribute(element, "y"));
  }
  const std::regex line("<polyline class=\"series\" data-label=\"([^\"]*)\"[^>]*points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(g.begin(), g.end(), line); it != std::sregex_iterator(); ++it) {
    std::stringstream points((*it)[2].str());
    for (std::string p; points >> p;) {
      const size_t comma = p.find(',');
      v.series[(*it)[1]].emplace_back(std::stod(p.substr(0, comma)), std::stod(p.substr(comma + 1)));
    }
  }
  return v;
}

// The value at pixel `px` on an axis, read off its first and last ticks as a reader would.
double value_at(const std::vector<std::pair<double, double>>& ticks, double px) {
  const auto& [v0, p0] = ticks.front();
  const auto& [v1, p1] = ticks.back();
  return v0 + (px - p0) / (p1 - p0) * (v1 - v0);
}

TEST(Metrics, CsvFilesHoldTheRunsNumbers) {
  TempDir dir;
  write_run(dir.path.string());
  const auto epochs = mnist_app::read_csv(dir / "epochs.csv", mnist_app::kEpochsHeader);
  ASSERT_EQ(epochs.size(), kEpochs.size());
  for (size_t i = 0; i < kEpochs.size(); ++i) {
    const EpochMetrics& m = kEpochs[i];
    const std::vector<double> want = {static_cast<double>(m.epoch), m.train_loss, m.test_loss, m.test_accuracy, m.seconds, m.lr};
    for (size_t c = 0; c < want.size(); ++c) EXPECT_NEAR(epochs[i][c], want[c], 1e-12) << "row " << i << " column " << c;
  }
  // step and images_seen count across epochs: 157 steps and 10,000 images per epoch here.
  const auto steps = mnist_app::read_csv(dir / "steps.csv", mnist_app::kStepsHeader);
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[2][0], 2);
  EXPECT_EQ(steps[2][1], 257);
  EXPECT_EQ(steps[2][2], 16400);
  EXPECT_NEAR(steps[2][3], kEpochs[1].train_loss + 0.1, 1e-12);
  EXPECT_EQ(steps[5][1], 471);
  EXPECT_EQ(steps[5][2], 30000);
  EXPECT_NEAR(steps[5][3], kEpochs[2].train_loss, 1e-12);
  // Every file was replaced by a rename: no temporary file is left behind.
  for (const auto& entry : fs::directory_iterator(dir.path))
    EXPECT_TRUE(entry.path().filename().string().rfind(".", 0) != 0) << entry.path();
}

TEST(Metrics, EmptyAccuracyReadsBackAsNan) {
  TempDir dir;
  MetricsLog log(dir.path.string(), "autoencoder");
  log.add_epoch({1, 0.05, 0.04, NAN, 3.0, 1e-3});
  EXPECT_NE(read(dir / "epochs.csv").find("\n1,0.05,0.04,,3,0.001\n"), std::string::npos) << read(dir / "epochs.csv");
  EXPECT_TRUE(std::isnan(mnist_app::read_csv(dir / "epochs.csv", mnist_app::kEpochsHeader)[0][3]));
  EXPECT_NE(read(dir / "curves.svg").find("not measured"), std::string::npos);
}

TEST(Metrics, SvgIsOneWellFormedSvgElement) {
  TempDir dir;
  write_run(dir.path.string());
  const std::string svg = read(dir / "curves.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(top_level_elements(svg), std::vector<std::string>{"svg"});
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("MLP &lt;test&gt; &amp; co"), std::string::npos);  // the title, escaped
  EXPECT_EQ(svg.find("<test>"), std::string::npos);
  for (const char* text : {"Loss", "Test accuracy", "epoch", "accuracy (%)", "class=\"legend\""})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
}

TEST(Metrics, SvgLinesSitWhereTheAxesSayTheValuesAre) {
  TempDir dir;
  write_run(dir.path.string());
  const std::string svg = read(dir / "curves.svg");
  struct Expect {
    const char* panel;
    const char* label;
    double EpochMetrics::*field;
  };
  for (const Expect& e : {Expect{"Loss", "train", &EpochMetrics::train_loss}, Expect{"Loss", "test", &EpochMetrics::test_loss},
                          Expect{"Test accuracy", "test", &EpochMetrics::test_accuracy}}) {
    const PanelView v = panel_view(svg, e.panel);
    ASSERT_GE(v.xticks.size(), 2u) << e.panel;
    ASSERT_GE(v.yticks.size(), 2u) << e.panel;
    const auto& points = v.series.at(e.label);
    ASSERT_EQ(points.size(), kEpochs.size()) << e.panel << " " << e.label;
    const double y_range = v.yticks.back().first - v.yticks.front().first;
    for (size_t i = 0; i < kEpochs.size(); ++i) {
      EXPECT_NEAR(value_at(v.xticks, points[i].first), kEpochs[i].epoch, 1e-3) << e.panel << " " << e.label << " " << i;
      EXPECT_NEAR(value_at(v.yticks, points[i].second), kEpochs[i].*e.field, 1e-4 * y_range) << e.panel << " " << e.label;
    }
    // The axes cover the data: every value lies between the first and last tick.
    for (const EpochMetrics& m : kEpochs) {
      EXPECT_LE(v.yticks.front().first, m.*e.field);
      EXPECT_GE(v.yticks.back().first, m.*e.field);
    }
  }
  EXPECT_LE(panel_view(svg, "Test accuracy").yticks.back().first, 100);  // never past 100%
}

TEST(Metrics, NiceAxesUseRoundSteps) {
  const svg::Axis a = svg::nice_axis(0.0833, 0.4123);
  EXPECT_LE(a.lo, 0.0833);
  EXPECT_GE(a.hi, 0.4123);
  EXPECT_DOUBLE_EQ(a.step, 0.1);
  const svg::Axis one_epoch = svg::nice_axis(1, 1, 6, /*integer=*/true);
  EXPECT_LT(one_epoch.lo, 1);
  EXPECT_GT(one_epoch.hi, 1);
  EXPECT_EQ(one_epoch.step, 1);
  EXPECT_EQ(svg::nice_axis(1, 30, 6, true).step, 5);
}

TEST(Metrics, ResumedRunKeepsTheEarlierEpochs) {
  TempDir dir;
  write_run(dir.path.string());
  MetricsLog resumed(dir.path.string(), "MLP", /*first_epoch=*/3);
  ASSERT_EQ(resumed.epochs().size(), 2u);
  ASSERT_EQ(resumed.steps().size(), 4u);
  resumed.add_step(3, 157, 10000, 0.5);
  EXPECT_EQ(resumed.steps().back().step, 471);
  EXPECT_EQ(resumed.steps().back().images_seen, 30000);
  resumed.add_epoch({3, 0.5, 0.4, 90, 1, 0.01});
  const auto epochs = mnist_app::read_csv(dir / "epochs.csv", mnist_app::kEpochsHeader);
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_DOUBLE_EQ(epochs[1][1], kEpochs[1].train_loss);
  EXPECT_DOUBLE_EQ(epochs[2][1], 0.5);
}

TEST(Metrics, BadFilesAndFoldersGiveClearErrors) {
  TempDir dir;
  fs::create_directories(dir.path);
  std::ofstream(dir / "epochs.csv") << "epoch,loss\n1,2\n";
  try {
    mnist_app::read_csv(dir / "epochs.csv", mnist_app::kEpochsHeader);
    FAIL() << "a foreign header was accepted";
  } catch (const minidl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected the header \"epoch,train_loss"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("found \"epoch,loss\""), std::string::npos) << e.what();
  }
  std::ofstream(dir / "steps.csv") << mnist_app::kStepsHeader << "\n1,2,64,0.5\n1,x,128,0.4\n";
  try {
    mnist_app::read_csv(dir / "steps.csv", mnist_app::kStepsHeader);
    FAIL() << "a non-number was accepted";
  } catch (const minidl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("steps.csv:3: \"x\" is not a number"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "file") << "not a folder";
  try {
    MetricsLog log(dir / "file", "x");
    FAIL() << "a file was taken for the metrics folder";
  } catch (const minidl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--metrics"), std::string::npos) << e.what();
  }
}

TEST(Metrics, ShortMnistRunWritesTheCurves) {
  TempDir dir;
  mnist_app::Flags f;
  f.epochs = 2, f.limit = 128, f.batch_size = 32, f.log_interval = 2, f.device = "cpu", f.title = "MLP";
  f.metrics = dir.path.string();
  try {
    mnist_app::load(f, false);
  } catch (const minidl::Error& e) {
    GTEST_SKIP() << "MNIST not found; fetch it with scripts/get_data.sh (" << e.what() << ")";
  }
  minidl::manual_seed(1);
  ASSERT_EQ(mnist_app::run(std::make_shared<mnist_app::Mlp>(), f), 0);
  const auto epochs = mnist_app::read_csv(dir / "epochs.csv", mnist_app::kEpochsHeader);
  ASSERT_EQ(epochs.size(), 2u);
  for (const auto& row : epochs) {
    EXPECT_GT(row[1], 0);  // a mean training loss was measured
    EXPECT_GT(row[2], 0);
    EXPECT_GE(row[3], 0);
    EXPECT_LE(row[3], 100);
    EXPECT_GT(row[4], 0);
    EXPECT_DOUBLE_EQ(row[5], 0.01);
  }
  // 128 images in batches of 32 is 4 steps an epoch, logged every 2.
  const auto steps = mnist_app::read_csv(dir / "steps.csv", mnist_app::kStepsHeader);
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[3][1], 8);
  EXPECT_EQ(steps[3][2], 256);
  EXPECT_EQ(top_level_elements(read(dir / "curves.svg")), std::vector<std::string>{"svg"});
}

}  // namespace

}  // namespace minidl::metrics_test
