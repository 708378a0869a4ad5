#include "data/datasets.h"

#include "data/mnist.h"
#include "ops/slice.h"

namespace minidl::data::datasets {

MNIST::MNIST(const std::filesystem::path& root, Mode mode) : train_(mode == Mode::kTrain) {
  data::MNIST loaded = data::MNIST::unnormalized(root, train_);
  images_ = loaded.images();
  targets_ = loaded.targets();
}

Example<> MNIST::get(size_t index) {
  const auto i = static_cast<int64_t>(index);
  MINIDL_CHECK(i < images_.size(0), "MNIST: index ", index, " is out of range for ", images_.size(0), " examples");
  return {narrow(images_, 0, i, 1).squeeze(0), narrow(targets_, 0, i, 1).squeeze(0)};
}

std::optional<size_t> MNIST::size() const { return static_cast<size_t>(images_.size(0)); }

}  // namespace minidl::data::datasets
