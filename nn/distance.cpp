#include "nn/distance.h"

#include <sstream>

#include "ops/distance.h"

namespace minidl::nn {

Tensor CosineSimilarityImpl::forward(const Tensor& x1, const Tensor& x2) {
  return cosine_similarity(x1, x2, options.dim(), options.eps());
}

std::string CosineSimilarityImpl::extra_repr() const {
  std::ostringstream os;
  os << "dim=" << options.dim() << ", eps=" << options.eps();
  return os.str();
}

Tensor PairwiseDistanceImpl::forward(const Tensor& x1, const Tensor& x2) {
  return pairwise_distance(x1, x2, options.p(), options.eps(), options.keepdim());
}

std::string PairwiseDistanceImpl::extra_repr() const {
  std::ostringstream os;
  os << "p=" << options.p() << ", eps=" << options.eps() << ", keepdim=" << (options.keepdim() ? "true" : "false");
  return os.str();
}

}  // namespace minidl::nn
