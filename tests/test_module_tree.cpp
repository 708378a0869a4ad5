// The module tree as a user sees it: declaring a holder outside minidl::nn, walking descendants,
// counting parameters, zeroing gradients, and printing a model as PyTorch does.
#include <gtest/gtest.h>

#include <sstream>

#include "minidl.h"
#include "nn/nn.h"

// Outside minidl (as in every test file, a namespace of its own keeps the names apart).
namespace module_tree_test {

namespace user_code {

// A holder declared in the user's own namespace.
struct BlockImpl : minidl::nn::Module {
  BlockImpl() : conv(minidl::nn::Conv2dOptions(1, 4, 3).padding(1).bias(false)), pool(2) {
    register_module("conv", conv);
    register_module("pool", pool);
  }
  minidl::Tensor forward(const minidl::Tensor& x) override { return pool(minidl::relu(conv(x))); }
  minidl::nn::Conv2d conv;
  minidl::nn::MaxPool2d pool;
};
MINIDL_MODULE(Block);

struct Net : minidl::nn::Module {
  Net() : block(), head(minidl::nn::Flatten(), minidl::nn::Dropout(0.25), minidl::nn::Linear(4 * 3 * 3, 2)) {
    register_module("block", block);
    register_module("head", head);
  }
  minidl::Tensor forward(const minidl::Tensor& x) override { return head(block(x)); }
  Block block;
  minidl::nn::Sequential head;
};

}  // namespace user_code

using namespace minidl;

TEST(ModuleTree, HolderFromAnyNamespaceRuns) {
  user_code::Block block;
  EXPECT_EQ(block(randn({2, 1, 6, 6})).shape(), (Shape{2, 4, 3, 3}));
  EXPECT_EQ(block->name(), "Block");  // the class's own name, without "Impl"
}

TEST(ModuleTree, NamedModulesAndParameterCount) {
  user_code::Net net;
  std::vector<std::string> names;
  for (auto& [name, m] : net.named_modules()) names.push_back(name + ":" + m->name());
  EXPECT_EQ(names, (std::vector<std::string>{"block:Block", "block.conv:Conv2d", "block.pool:MaxPool2d",
                                             "head:Sequential", "head.0:Flatten", "head.1:Dropout", "head.2:Linear"}));
  EXPECT_EQ(net.num_parameters(), 4 * 1 * 3 * 3 + (36 * 2 + 2));
  EXPECT_EQ(net.name(), "Net");
}

TEST(ModuleTree, ZeroGradInPlaceOrToNone) {
  user_code::Net net;
  net.forward(randn({2, 1, 6, 6})).sum().backward();
  Tensor w = (*net.head)[2]->parameters()[0];
  const void* buffer = w.grad().raw_data();
  net.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(w.grad().raw_data(), buffer);  // the same memory, now zeros
  for (double v : w.grad().to(kFloat64).to_vector<double>()) EXPECT_EQ(v, 0.0);
  net.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(ModuleTree, PrintsTheTreeWithEachLayersOptions) {
  user_code::Net net;
  std::ostringstream os;
  os << net;
  EXPECT_EQ(os.str(),
            "Net(\n"
            "  (block): Block(\n"
            "    (conv): Conv2d(1, 4, kernel_size=[3, 3], stride=[1, 1], padding=[1, 1], bias=false)\n"
            "    (pool): MaxPool2d(kernel_size=[2, 2], stride=[2, 2], padding=[0, 0])\n"
            "  )\n"
            "  (head): Sequential(\n"
            "    (0): Flatten(start_dim=1, end_dim=-1)\n"
            "    (1): Dropout(p=0.25)\n"
            "    (2): Linear(in_features=36, out_features=2, bias=true)\n"
            "  )\n"
            ")");
}

TEST(ModuleTree, ModuleListAndDictRegisterTheirModules) {
  struct Model : nn::Module {
    Model() : blocks(nn::Linear(4, 4), nn::Linear(4, 4)) {
      blocks->push_back(nn::Linear(4, 2));
      heads->insert("a", nn::Linear(2, 1));
      heads->insert("b", nn::Linear(2, 3));
      register_module("blocks", blocks);
      register_module("heads", heads);
    }
    Tensor forward(const Tensor& x) override {
      Tensor h = x;
      for (const auto& block : *blocks) h = relu(block->forward(h));
      return (*heads)["b"]->forward(h);
    }
    nn::ModuleList blocks;
    nn::ModuleDict heads;
  };
  Model m;
  EXPECT_EQ(m.blocks->size(), 3u);
  EXPECT_EQ(m.forward(randn({5, 4})).shape(), (Shape{5, 3}));
  EXPECT_EQ(m.heads->keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(m.heads->contains("a"));
  EXPECT_EQ(m.num_parameters(), 2 * (16 + 4) + (8 + 2) + (2 + 1) + (6 + 3));
  std::vector<std::string> names;
  for (auto& [name, p] : m.named_parameters()) names.push_back(name);
  EXPECT_EQ(names.front(), "blocks.0.weight");
  EXPECT_EQ(names.back(), "heads.b.bias");
  try {
    (*m.heads)["c"];
    FAIL() << "a missing key must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[a, b]"), std::string::npos) << e.what();
  }
  EXPECT_THROW((*m.blocks)[3], Error);
}

}  // namespace module_tree_test
