// The loader's epoch: an order of indices, a worker thread that turns slices of it into batches,
// and a bounded queue between the worker and the training loop.
#include "data/dataloader.h"

#include "core/cuda.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "core/autograd.h"
#include "data/sampler.h"
#include "core/random.h"
#include "ops/copy.h"

namespace minidl::data {

namespace {

// The worker running on this thread, for worker_info(); null on every other thread.
thread_local const WorkerInfo* current_worker = nullptr;

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  if (shuffle) return shuffled_indices(n, seed, epoch);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  return order;
}

// Rows `index[0..n)` of a contiguous CPU tensor, one memcpy each. Serial on purpose: it runs on the
// worker thread, and an OpenMP team there would compete with the training loop's.
Tensor gather_rows(const Tensor& src, const int64_t* index, int64_t n) {
  Shape shape = src.shape();
  shape[0] = n;
  Tensor out = Tensor::empty(shape, src.dtype(), src.device());
  const size_t row_bytes = src.size(0) > 0 ? src.nbytes() / static_cast<size_t>(src.size(0)) : 0;
  const char* s = static_cast<const char*>(src.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * row_bytes, s + index[i] * row_bytes, row_bytes);
  return out;
}

Tensor gather(const Tensor& src, const int64_t* index, int64_t n) {
  if (src.device().is_cpu() && src.is_contiguous()) return gather_rows(src, index, n);
  Tensor idx = Tensor::from_buffer(index, {n}).to(src.device());
  return index_select(src, idx);
}

// Stacks the `field` tensors of examples into [n, ...] on the CPU; all must share shape and dtype.
Tensor stack(const std::vector<Example<>>& examples, Tensor Example<>::*field, const char* what,
             const std::vector<int64_t>& ids) {
  const Tensor& first = examples[0].*field;
  for (size_t k = 0; k < examples.size(); ++k) {
    const Tensor& t = examples[k].*field;
    MINIDL_CHECK(t.defined(), "DataLoader: example ", ids[k], " has an undefined ", what, " tensor");
    MINIDL_CHECK(t.shape() == first.shape() && t.dtype() == first.dtype(), "DataLoader: cannot stack a batch: example ",
                 ids[k], " has ", what, " of shape ", t.shape(), " and dtype ", t.dtype(), ", but example ", ids[0],
                 " has shape ", first.shape(), " and dtype ", first.dtype());
  }
  Shape shape = first.shape();
  shape.insert(shape.begin(), static_cast<int64_t>(examples.size()));
  Tensor out = Tensor::empty(shape, first.dtype());
  char* dst = static_cast<char*>(out.raw_data());
  for (const Example<>& e : examples) {
    Tensor c = (e.*field).contiguous();
    copy_bytes(dst, Device::cpu(), c.raw_data(), c.device(), c.nbytes());
    dst += c.nbytes();
  }
  return out;
}

}  // namespace

std::optional<WorkerInfo> worker_info() {
  if (!current_worker) return std::nullopt;
  return *current_worker;
}

namespace detail {

WorkerScope::WorkerScope(const WorkerInfo& info)
    : info_(info), previous_(current_worker), generator_(info.seed), guard_(generator_) {
  current_worker = &info_;
}

WorkerScope::~WorkerScope() { current_worker = previous_; }

}  // namespace detail

class DataLoader::Epoch {
 public:
  Epoch(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options, std::vector<int64_t> order,
        int64_t batches, uint64_t base_seed)
      : dataset_(std::move(dataset)),
        options_(options),
        order_(std::move(order)),
        batches_(batches),
        info_{/*id=*/0, /*num_workers=*/1, /*seed=*/base_seed + 0},
        generator_(info_.seed) {
    worker_ = std::thread([this] { run(); });
  }
  ~Epoch() { stop(); }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    std::call_once(joined_, [this] {
      if (worker_.joinable()) worker_.join();
    });
  }

  // The next batch; null at the end of the epoch or after stop(). Rethrows the worker's exception.
  std::shared_ptr<Batch> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return finished_ || stopping_ || !queue_.empty(); });
    if (finished_ || queue_.empty()) return nullptr;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    if (item.error || !item.batch) finished_ = true;
    lock.unlock();
    changed_.notify_all();
    if (item.error) std::rethrow_exception(item.error);
    return item.batch;
  }

 private:
  // A batch, the end of the epoch (no batch, no error) or the worker's exception.
  struct Item {
    std::shared_ptr<Batch> batch;
    std::exception_ptr error;
  };

  void run() {
    // The tape is per thread and nothing here is differentiated; keep the worker's tape empty.
    NoGradGuard no_grad;
    // Every draw of get() and the gather goes to the worker's generator, never the training thread's.
    GeneratorGuard own_generator(generator_);
    current_worker = &info_;
    try {
      for (int64_t b = 0; b < batches_; ++b) {
        if (!push(Item{std::make_shared<Batch>(make_batch(b)), nullptr})) return;
      }
      push(Item{});
    } catch (...) {
      push(Item{nullptr, std::current_exception()});
    }
  }

  // Waits for room in the queue; false when the epoch was stopped meanwhile.
  bool push(Item item) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return stopping_ || static_cast<int64_t>(queue_.size()) < options_.prefetch(); });
    if (stopping_) return false;
    queue_.push_back(std::move(item));
    lock.unlock();
    changed_.notify_all();
    return true;
  }

  Batch make_batch(int64_t b) {
    const int64_t start = b * options_.batch_size();
    const int64_t n = std::min<int64_t>(options_.batch_size(), static_cast<int64_t>(order_.size()) - start);
    const int64_t* index = order_.data() + start;
    Batch batch;
    if (auto* tensors = dynamic_cast<const TensorDataset*>(dataset_.get())) {
      batch.data = gather(tensors->data(), index, n);
      batch.target = gather(tensors->targets(), index, n);
    } else {
      std::vector<Example<>> examples;
      examples.reserve(static_cast<size_t>(n));
      std::vector<int64_t> ids(index, index + n);
      for (int64_t id : ids) examples.push_back(dataset_->get(id));
      batch.data = stack(examples, &Example<>::data, "data", ids);
      batch.target = stack(examples, &Example<>::target, "target", ids);
    }
    const Device device = options_.device();
    if (device.is_cuda() && batch.data.device().is_cpu()) {
      // Through pinned memory on the copy stream: the upload overlaps the model's work, and the
      // compute stream waits for it with an event instead of the host waiting.
      batch.data = cuda::to_device_pinned(batch.data, device);
      batch.target = cuda::to_device_pinned(batch.target, device);
    } else {
      batch.data = batch.data.to(device);
      batch.target = batch.target.to(device);
    }
    return batch;
  }

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::vector<int64_t> order_;
  int64_t batches_;
  WorkerInfo info_;
  Generator generator_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  bool finished_ = false;
  std::once_flag joined_;
  std::thread worker_;  // last: started once everything it reads exists
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  MINIDL_CHECK(dataset_ != nullptr, "DataLoader: the data set is null");
  MINIDL_CHECK(options_.batch_size() > 0, "DataLoader: batch_size must be positive, got ", options_.batch_size());
  MINIDL_CHECK(options_.prefetch() > 0, "DataLoader: prefetch must be at least 1, got ", options_.prefetch());
  MINIDL_CHECK(dataset_->size() >= 0, "DataLoader: the data set reports a negative size ", dataset_->size());
  MINIDL_CHECK(!(options_.sampler() && options_.shuffle()), "DataLoader: shuffle and sampler cannot both be given "
               "(the sampler decides the order; DistributedSampler shuffles by itself)");
  if (options_.seed()) {
    seed_ = *options_.seed();
  } else {
    Generator& gen = default_generator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    seed_ = gen.engine()();
  }
}

DataLoader::~DataLoader() {
  if (auto epoch = running_.lock()) epoch->stop();
}

int64_t DataLoader::size() const {
  const int64_t n = options_.sampler() ? options_.sampler()->size() : dataset_->size(), b = options_.batch_size();
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

DataLoader::Iterator DataLoader::begin() {
  std::vector<int64_t> order;
  if (const auto& sampler = options_.sampler()) {
    order = sampler->indices(epoch_);
    MINIDL_CHECK(static_cast<int64_t>(order.size()) == sampler->size(), "DataLoader: the sampler gave ", order.size(),
                 " indices for epoch ", epoch_, " but says its epochs have ", sampler->size());
    for (int64_t i : order)
      MINIDL_CHECK(i >= 0 && i < dataset_->size(), "DataLoader: the sampler gave index ", i,
                   ", outside the data set's 0..", dataset_->size() - 1);
  } else {
    order = epoch_order(dataset_->size(), options_.shuffle(), seed_, epoch_);
  }
  // The worker's seed is drawn here, on the training thread, as PyTorch's loader iterator draws its
  // base_seed: one draw per epoch at a point the training loop decides, never racing the loop's own.
  uint64_t base_seed;
  {
    Generator& gen = default_generator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    base_seed = gen.engine()();
  }
  auto epoch = std::make_shared<Epoch>(dataset_, options_, std::move(order), size(), base_seed);
  ++epoch_;
  running_ = epoch;
  return Iterator(std::move(epoch));
}

DataLoader::Iterator::Iterator(std::shared_ptr<Epoch> epoch) : epoch_(std::move(epoch)) { ++*this; }

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  try {
    batch_ = epoch_ ? epoch_->next() : nullptr;
  } catch (...) {
    batch_.reset();
    epoch_.reset();
    throw;
  }
  // Releasing the epoch at its end joins the worker, which has nothing left to do.
  if (!batch_) epoch_.reset();
  return *this;
}

}  // namespace minidl::data
