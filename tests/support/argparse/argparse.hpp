#pragma once
// A stand-in for the part of p-ranav/argparse that pytorch/examples' cpp/dcgan uses (its CMake
// fetches the real one from the network, which the port test does not assume): named options with
// help, a default and scan<'i', T>, parse_args, get<T>, and printing the usage.
#include <cstdint>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace argparse {

class Argument {
 public:
  Argument& help(std::string text) {
    help_ = std::move(text);
    return *this;
  }
  Argument& default_value(std::int64_t value) {
    value_ = value;
    return *this;
  }
  template <char Kind, class T>
  Argument& scan() {
    return *this;
  }

  const std::string& help_text() const { return help_; }

 private:
  friend class ArgumentParser;
  std::string help_;
  std::int64_t value_ = 0;
};

class ArgumentParser {
 public:
  explicit ArgumentParser(std::string name) : name_(std::move(name)) {}
  Argument& add_argument(const std::string& flag) { return arguments_[flag]; }
  void parse_args(int argc, const char* argv[]) {
    for (int i = 1; i < argc; ++i) {
      auto it = arguments_.find(argv[i]);
      if (it == arguments_.end()) throw std::runtime_error(std::string("Unknown argument: ") + argv[i]);
      if (i + 1 >= argc) throw std::runtime_error(std::string("Too few arguments for ") + argv[i]);
      std::size_t used = 0;
      const std::string text = argv[++i];
      it->second.value_ = std::stoll(text, &used);
      if (used != text.size()) throw std::runtime_error("Not an integer: " + text);
    }
  }
  template <class T>
  T get(const std::string& flag) const {
    return static_cast<T>(arguments_.at(flag).value_);
  }
  friend std::ostream& operator<<(std::ostream& os, const ArgumentParser& parser) {
    os << "Usage: " << parser.name_ << '\n';
    for (const auto& [flag, arg] : parser.arguments_) os << "  " << flag << "  " << arg.help_text() << '\n';
    return os;
  }

 private:
  std::string name_;
  std::map<std::string, Argument> arguments_;
};

}  // namespace argparse
