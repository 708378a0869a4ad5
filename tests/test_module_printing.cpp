// Printing a model through the handles a program holds it by: a std::shared_ptr to it (of its own
// type or of nn::Module) and a module holder print the module tree, as printing the module does,
// never an address.
#include <gtest/gtest.h>

#include <sstream>

#include "minidl.h"
#include "nn/nn.h"
#include "test_util.h"

// Outside minidl's namespaces (as in every test file, a namespace of its own keeps the names apart).
namespace module_printing_test {

// A model as a user writes one: the operator is found through its base.
struct TwoLayerNet : minidl::nn::Module {
  TwoLayerNet() : fc1(register_module("fc1", minidl::nn::Linear(4, 3))), fc2(register_module("fc2", minidl::nn::Linear(3, 2))) {}
  minidl::nn::Linear fc1, fc2;
};

using namespace minidl;

namespace {

template <class T>
std::string printed(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

const char* const kTree =
    "TwoLayerNet(\n"
    "  (fc1): Linear(in_features=4, out_features=3, bias=true)\n"
    "  (fc2): Linear(in_features=3, out_features=2, bias=true)\n"
    ")";

}  // namespace

TEST(ModulePrinting, SharedPtrPrintsTheTree) {
  auto net = std::make_shared<TwoLayerNet>();
  ASSERT_EQ(printed(*net), kTree);
  EXPECT_EQ(printed(net), kTree);
  EXPECT_EQ(printed(std::shared_ptr<nn::Module>(net)), kTree);
  EXPECT_EQ(printed(std::shared_ptr<const TwoLayerNet>(net)), kTree);
  std::ostringstream chained;
  chained << "model: " << net << '\n';
  EXPECT_EQ(chained.str(), std::string("model: ") + kTree + "\n");
  EXPECT_EQ(printed(net->named_modules()[0].second), "Linear(in_features=4, out_features=3, bias=true)");
}

TEST(ModulePrinting, HolderPrintsItsModule) {
  nn::Linear fc(4, 3);
  EXPECT_EQ(printed(fc), "Linear(in_features=4, out_features=3, bias=true)");
  EXPECT_EQ(printed(fc.ptr()), "Linear(in_features=4, out_features=3, bias=true)");
  nn::Sequential seq(nn::Linear(2, 2), nn::ReLU());
  EXPECT_EQ(printed(seq), printed(*seq));
}

TEST(ModulePrinting, NullPointerOrEmptyHolderIsAnError) {
  minidl::testing::expect_error([] { printed(std::shared_ptr<TwoLayerNet>()); }, {"printing a module", "null"});
  minidl::testing::expect_error([] { printed(nn::Linear(nullptr)); }, {"printing a module", "empty"});
}

TEST(ModulePrinting, OtherSharedPointersPrintAsBefore) {
  auto number = std::make_shared<int>(7);
  std::ostringstream expected;
  expected << static_cast<const void*>(number.get());
  EXPECT_EQ(printed(number), expected.str());  // std's operator: the address
}

}  // namespace module_printing_test
