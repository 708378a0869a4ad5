// The protocol of apps/bench (../shared/BENCHMARK.md) for the CPU, in libtorch's C++ API, so that
// both frameworks are measured on the same work and print lines a script parses the same way:
// the MNIST training set as one float tensor in memory, each step gathering its batch with
// index_select from a seeded shuffled permutation (the same permutation apps/bench draws), 50
// uncounted warm-up steps, then one timed full epoch (last partial batch included) with forward,
// loss, backward and the SGD step inside. --epochs E then trains E epochs from a fresh seeded
// initialization and reports test accuracy.
//
//   libtorch_bench --model cnn --batch-size 64 --threads 2 [--epochs 1] [--data DIR]
//
// --limit N trains on the first N images only: for trying the program out, never for a figure.
#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string model = "mlp", data;
  int64_t batch = 64, limit = 0;
  int threads = 0, epochs = 0, warmup = 50;
  uint64_t seed = 1;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: libtorch_bench [--model mlp|cnn] [--batch-size B] [--threads T] [--epochs E]\n"
               "                      [--warmup N] [--seed S] [--data DIR] [--limit N]\n"
               "  --threads T   torch::set_num_threads(T) (default: libtorch's own choice)\n"
               "  --epochs E    also train E epochs from a fresh seeded init and report test accuracy\n"
               "  --data DIR    folder holding mnist/ (default: $MINIDL_DATA, else <repo>/datasets)\n"
               "  --limit N     train on the first N images only (trying things out; not a figure)\n");
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "-h" || flag == "--help") usage(0);
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "libtorch_bench: %s needs a value\n", flag.c_str());
      usage(2);
    }
    auto number = [&](int64_t lo, int64_t hi) {
      char* end = nullptr;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < lo || v > hi) {
        std::fprintf(stderr, "libtorch_bench: %s expects an integer in [%lld, %lld], got '%s'\n", flag.c_str(),
                     static_cast<long long>(lo), static_cast<long long>(hi), value.c_str());
        std::exit(2);
      }
      return static_cast<int64_t>(v);
    };
    if (flag == "--model") {
      if (value != "mlp" && value != "cnn") {
        std::fprintf(stderr, "libtorch_bench: --model expects mlp or cnn, got '%s'\n", value.c_str());
        std::exit(2);
      }
      o.model = value;
    } else if (flag == "--batch-size") o.batch = number(1, 60000);
    else if (flag == "--threads") o.threads = static_cast<int>(number(0, 4096));
    else if (flag == "--epochs") o.epochs = static_cast<int>(number(0, 1000));
    else if (flag == "--warmup") o.warmup = static_cast<int>(number(0, 100000));
    else if (flag == "--seed") o.seed = static_cast<uint64_t>(number(0, INT64_MAX));
    else if (flag == "--limit") o.limit = number(1, 60000);
    else if (flag == "--data") o.data = value;
    else {
      std::fprintf(stderr, "libtorch_bench: unknown flag '%s'\n", flag.c_str());
      usage(2);
    }
  }
  return o;
}

// ---- MNIST, read as minidl's data/idx.cpp reads it: raw or .gz, in <root>/mnist or <root> ----

std::string data_root(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("MINIDL_DATA"); env && *env) return env;
  return std::string(MINIDL_SOURCE_DIR) + "/datasets";
}

bool is_file(const std::string& path) { return std::ifstream(path).good(); }

std::string find_idx(const std::string& root, const std::string& split, const std::string& kind) {
  const std::string idx = kind == "images" ? "idx3-ubyte" : "idx1-ubyte";
  const std::string dash = split + "-" + kind + "-" + idx, dot = split + "-" + kind + "." + idx;
  std::string tried;
  for (const std::string& folder : {root + "/mnist", root}) {
    for (const std::string& name : {dash, dot, dash + ".gz", dot + ".gz"}) {
      if (is_file(folder + "/" + name)) return folder + "/" + name;
      tried += (tried.empty() ? "" : ", ") + folder + "/" + name;
    }
  }
  throw std::runtime_error("MNIST " + split + " " + kind + " not found (tried " + tried +
                           "); fetch them with scripts/get_data.sh --dir " + root);
}

// The payload of an IDX file of unsigned bytes and its shape. gzread reads plain files unchanged.
std::vector<uint8_t> read_idx(const std::string& path, int ndim, std::vector<int64_t>& shape) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path + ": cannot open");
  auto read = [&](void* dst, unsigned n) {
    if (gzread(f, dst, n) != static_cast<int>(n)) {
      gzclose(f);
      throw std::runtime_error(path + ": truncated IDX file");
    }
  };
  auto be32 = [](const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  };
  uint8_t head[4];
  read(head, 4);
  if (be32(head) != (0x800u | static_cast<uint32_t>(ndim))) {
    gzclose(f);
    throw std::runtime_error(path + ": not an IDX file of unsigned bytes with " + std::to_string(ndim) + " dimensions");
  }
  shape.clear();
  size_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    read(head, 4);
    shape.push_back(be32(head));
    count *= be32(head);
  }
  std::vector<uint8_t> bytes(count);
  read(bytes.data(), static_cast<unsigned>(count));
  gzclose(f);
  return bytes;
}

struct Split {
  torch::Tensor images, targets;  // [N, 1, 28, 28] float32 normalized; [N] int64
};

Split load_mnist(const std::string& root, bool train) {
  const std::string split = train ? "train" : "t10k";
  std::vector<int64_t> ishape, lshape;
  std::vector<uint8_t> pixels = read_idx(find_idx(root, split, "images"), 3, ishape);
  std::vector<uint8_t> labels = read_idx(find_idx(root, split, "labels"), 1, lshape);
  if (ishape[0] != lshape[0]) throw std::runtime_error("MNIST " + split + ": image and label counts differ");
  torch::Tensor images = torch::from_blob(pixels.data(), {ishape[0], 1, ishape[1], ishape[2]}, torch::kUInt8)
                             .to(torch::kFloat32)
                             .div_(255)
                             .sub_(0.1307)
                             .div_(0.3081);
  torch::Tensor targets = torch::from_blob(labels.data(), {lshape[0]}, torch::kUInt8).to(torch::kInt64);
  return {images, targets};
}

// ---- The two models of BENCHMARK.md, with libtorch's default (PyTorch's) initialization ----

torch::nn::Sequential make_mlp() {
  return torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 512), torch::nn::ReLU(),
                               torch::nn::Linear(512, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
}

struct CnnImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 32, 3)}, conv2{torch::nn::Conv2dOptions(32, 64, 3)};
  torch::nn::Dropout dropout1{0.25}, dropout2{0.5};
  torch::nn::Linear fc1{9216, 128}, fc2{128, 10};

  CnnImpl() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("dropout1", dropout1);
    register_module("dropout2", dropout2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv1(x));
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);
    x = torch::relu(fc1(torch::flatten(dropout1(x), 1)));
    return fc2(dropout2(x));
  }
};
TORCH_MODULE(Cnn);

// One model of either kind behind one forward.
struct Net {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

Net make_net(const std::string& name, uint64_t seed) {
  torch::manual_seed(seed);
  if (name == "mlp") {
    auto m = make_mlp();
    return {m.ptr(), [m](const torch::Tensor& x) mutable { return m->forward(x); }};
  }
  Cnn m;
  return {m.ptr(), [m](const torch::Tensor& x) mutable { return m->forward(x); }};
}

struct Trainer {
  Net net;
  torch::optim::SGD optimizer;
  torch::Tensor images, targets, order;
  int64_t batch;

  Trainer(Net n, torch::Tensor images_, torch::Tensor targets_, int64_t batch_)
      : net(std::move(n)),
        optimizer(net.module->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9)),
        images(std::move(images_)),
        targets(std::move(targets_)),
        batch(batch_) {}

  int64_t steps() const { return (images.size(0) + batch - 1) / batch; }

  // apps/bench's permutation: std::shuffle with the same engine and seed, so both frameworks see
  // the batches in the same order.
  void shuffle(uint64_t seed, int64_t epoch) {
    std::vector<int64_t> idx(static_cast<size_t>(images.size(0)));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    std::shuffle(idx.begin(), idx.end(), std::mt19937_64(seed * 1000003 + static_cast<uint64_t>(epoch)));
    order = torch::from_blob(idx.data(), {static_cast<int64_t>(idx.size())}, torch::kInt64).clone();
  }

  torch::Tensor step(int64_t s) {
    const int64_t begin = s * batch, n = std::min(batch, images.size(0) - begin);
    torch::Tensor index = order.narrow(0, begin, n);
    // Gradients set to None rather than zeroed (PyTorch 2's default): backward then writes them
    // directly instead of adding into a cleared buffer. libtorch 1.13's zero_grad() zeroes.
    for (auto& p : net.module->parameters()) p.mutable_grad() = torch::Tensor();
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(net.forward(images.index_select(0, index)), targets.index_select(0, index));
    loss.backward();
    optimizer.step();
    return loss;
  }
};

double accuracy(Net& net, const Split& test) {
  torch::NoGradGuard no_grad;
  net.module->eval();
  int64_t correct = 0;
  const int64_t n = test.images.size(0);
  for (int64_t begin = 0; begin < n; begin += 1000) {
    const int64_t len = std::min<int64_t>(1000, n - begin);
    torch::Tensor logits = net.forward(test.images.narrow(0, begin, len));
    correct += logits.argmax(1).eq(test.targets.narrow(0, begin, len)).sum().item<int64_t>();
  }
  net.module->train();
  return 100.0 * static_cast<double>(correct) / static_cast<double>(n);
}

// Peak resident set size of this process, from /proc (as apps/bench reports it).
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  for (double kb; status >> key;) {
    if (key == "VmHWM:" && status >> kb) return kb / 1024;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) torch::set_num_threads(o.threads);
  const std::string root = data_root(o.data);
  Split train = load_mnist(root, true);
  if (o.limit > 0 && o.limit < train.images.size(0)) {
    train.images = train.images.narrow(0, 0, o.limit).clone();
    train.targets = train.targets.narrow(0, 0, o.limit).clone();
  }
  const int64_t n = train.images.size(0);

  // Throughput: warm-up steps, then one timed epoch. item() makes sure the last step has finished.
  {
    Trainer t(make_net(o.model, o.seed), train.images, train.targets, o.batch);
    t.shuffle(o.seed, 0);
    for (int s = 0; s < o.warmup; ++s) t.step(s % t.steps());
    t.step(0).item<float>();
    t.shuffle(o.seed, 1);
    const auto start = std::chrono::steady_clock::now();
    torch::Tensor loss;
    for (int64_t s = 0; s < t.steps(); ++s) loss = t.step(s);
    loss.item<float>();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("model %s  device cpu  batch %lld  threads %d  %.0f img/s  epoch %.2f s  peak RSS %.0f MB  "
                "framework libtorch%s\n",
                o.model.c_str(), static_cast<long long>(o.batch), torch::get_num_threads(),
                static_cast<double>(n) / seconds, seconds, peak_rss_mb(),
                o.limit > 0 ? "  limited (not a figure)" : "");
    std::fflush(stdout);
  }

  if (o.epochs > 0) {
    const Split test = load_mnist(root, false);
    Trainer fresh(make_net(o.model, o.seed), train.images, train.targets, o.batch);
    for (int e = 1; e <= o.epochs; ++e) {
      fresh.shuffle(o.seed, e);
      for (int64_t s = 0; s < fresh.steps(); ++s) fresh.step(s);
      std::printf("epoch %d  test accuracy %.2f%%\n", e, accuracy(fresh.net, test));
      std::fflush(stdout);
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "libtorch_bench: error: %s\n", e.what());
  return 1;
}
