// pytorch/examples' C++ programs, ported by scripts/port_examples.sh (docs/porting.md), build
// against the installed package and run: regression reaches its loss, autograd prints libtorch's
// gradients, mnist learns. Runs when a checkout is given in MINIDL_PYTORCH_EXAMPLES (their sources
// are not part of minidl); skips otherwise.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

namespace minidl::ported_examples_test {

namespace {

std::string run(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return "popen failed";
  std::array<char, 4096> buf;
  while (fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  *status = pclose(pipe);
  return out;
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(PortedExamples, BuildAndRunAsTheirReadmesShow) {
  const char* examples = std::getenv("MINIDL_PYTORCH_EXAMPLES");
  if (!examples || !std::filesystem::exists(std::filesystem::path(examples) / "cpp/mnist/mnist.cpp")) {
    GTEST_SKIP() << "set MINIDL_PYTORCH_EXAMPLES to a checkout of pytorch/examples to run this test";
  }
  const std::filesystem::path work = std::filesystem::temp_directory_path() / "minidl_ported_examples";
  std::filesystem::remove_all(work);
  int status = 0;
  const std::string out = run(std::string("RUN='regression autograd mnist' MNIST_EPOCHS=1 BUILD_DIR=") +
                                  MINIDL_BUILD_DIR + " " + MINIDL_SOURCE_DIR + "/scripts/port_examples.sh " +
                                  examples + " " + work.string(),
                              &status);
  ASSERT_EQ(status, 0) << out;
  for (const char* name : {"mnist", "regression", "autograd", "dcgan"}) {
    EXPECT_NE(out.find(std::string("port_examples: ") + name + " builds"), std::string::npos) << out;
  }

  // regression stops once its loss is below 1e-3.
  std::smatch m;
  const std::string regression = read(work / "regression.log");
  ASSERT_TRUE(std::regex_search(regression, m, std::regex(R"(Loss: ([0-9.e-]+) after ([0-9]+) batches)"))) << regression;
  EXPECT_LT(std::stod(m[1]), 1e-3);

  // autograd: the node names and the gradients that do not depend on random draws, as libtorch prints them.
  const std::string autograd = read(work / "autograd.log");
  for (const char* expected : {"AddBackward1", "MulBackward1", "MeanBackward0", "SumBackward0", "4.5000", "5.5000"}) {
    EXPECT_NE(autograd.find(expected), std::string::npos) << "'" << expected << "' not in:\n" << autograd;
  }

  // mnist: one epoch reaches the README's first-epoch accuracy (0.940).
  const std::string mnist = read(work / "mnist.log");
  ASSERT_TRUE(std::regex_search(mnist, m, std::regex(R"(Accuracy: ([0-9.]+))"))) << mnist;
  EXPECT_GE(std::stod(m[1]), 0.93);
  std::filesystem::remove_all(work);
}

}  // namespace minidl::ported_examples_test
