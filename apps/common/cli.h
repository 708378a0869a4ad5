#pragma once
// The apps' command lines as a batch job expects them: a usage error (an unknown flag, a bad value,
// or a path the run could not use) stops the app before any work with exit status 2, as Python's
// argparse does, and --help exits 0. CLI11's own statuses (105, 109, ...) mean nothing to a shell
// or a scheduler. The paths are checked here rather than when first used: a --save into a missing
// folder would otherwise fail after a whole epoch of training.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace mnist_app {

/// The exit status of a usage error.
constexpr int kUsageStatus = 2;

/// Parses the command line into `app`'s options; prints usage and exits 0 on --help, and exits with
/// kUsageStatus after the error and the usage on a usage error.
///   CLI::App app("my app");
///   app.add_option("--epochs", epochs);
///   mnist_app::parse_or_exit(app, argc, argv);
inline void parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    std::exit(app.exit(e));
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n\n%s", e.what(), app.help().c_str());
    std::exit(kUsageStatus);
  }
}

/// A flag that must be a whole number of at least `low`, said in those words when it is not (CLI11's
/// own range check prints the type's limits, such as 1.7976931348623157e308).
inline CLI::Validator at_least(int64_t low) {
  return CLI::Validator(
      [low](std::string& input) -> std::string {
        size_t used = 0;
        long long value = 0;
        try {
          value = std::stoll(input, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != input.size() || input.empty()) return "expected a whole number, got '" + input + "'";
        if (value < low) return "must be at least " + std::to_string(low) + ", got " + input;
        return "";
      },
      "INT>=" + std::to_string(low));
}

namespace detail {
inline bool is_missing(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::status(path, ec).type() == std::filesystem::file_type::not_found;
}

// Why no file can be made in `folder`, or "" when one can.
inline std::string cannot_make_files_in(const std::filesystem::path& folder) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(folder, ec);
  if (status.type() == std::filesystem::file_type::not_found)
    return "the folder " + folder.string() + " does not exist";
  if (ec) return folder.string() + ": " + ec.message();
  if (!std::filesystem::is_directory(status)) return folder.string() + " is not a folder";
  if (access(folder.c_str(), W_OK | X_OK) != 0)
    return "the folder " + folder.string() + " is not writable (" + std::strerror(errno) + ")";
  return "";
}
}  // namespace detail

/// The values of --precision (apps/common/precision.h says what each turns on).
inline constexpr const char* kPrecisions[] = {"fp32", "tf32", "bf16", "fp16"};

/// --precision fp32|tf32|bf16|fp16 on `app`, into `precision` (default fp32), for every app alike.
///   std::string precision = "fp32";
///   mnist_app::add_precision_option(app, precision);
inline CLI::Option* add_precision_option(CLI::App& app, std::string& precision) {
  const CLI::Validator one_of(
      [](std::string& input) -> std::string {
        for (const char* name : kPrecisions)
          if (input == name) return "";
        return "expected fp32, tf32, bf16 or fp16, got '" + input + "'";
      },
      "fp32|tf32|bf16|fp16");
  return app
      .add_option("--precision", precision,
                  "fp32: strict float32 (no TF32); tf32: TF32 for matmuls and convolutions; bf16: bfloat16 autocast "
                  "for forward and loss, plus TF32; fp16: float16 autocast plus a gradient scaler, plus TF32 "
                  "(master weights stay float32)")
      ->check(one_of)
      ->capture_default_str();
}

/// A file the run will write, such as --save's checkpoint. It is written beside itself and renamed
/// into place, so its folder must exist and take new files.
inline CLI::Validator writable_file() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        if (input.empty()) return "";  // not asked for
        const std::filesystem::path path(input);
        std::error_code ec;
        if (std::filesystem::is_directory(path, ec)) return "cannot write " + input + ": it is a folder";
        const std::string why = detail::cannot_make_files_in(path.has_parent_path() ? path.parent_path() : ".");
        return why.empty() ? "" : "cannot write " + input + ": " + why;
      },
      "FILE");
}

/// A file the run will read, such as --resume's checkpoint.
inline CLI::Validator readable_file() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        if (input.empty()) return "";  // not asked for
        if (access(input.c_str(), R_OK) != 0) return "cannot read " + input + " (" + std::strerror(errno) + ")";
        std::error_code ec;
        if (std::filesystem::is_directory(input, ec)) return "cannot read " + input + ": it is a folder";
        return "";
      },
      "FILE");
}

/// A folder the run will make if need be and write files into, such as --metrics'. The folder itself
/// is made when the run starts; here its nearest existing ancestor must be a folder that takes it.
inline CLI::Validator writable_folder() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        if (input.empty()) return "";  // not asked for
        std::filesystem::path existing(input);
        while (!existing.empty() && detail::is_missing(existing)) existing = existing.parent_path();
        const std::string why = detail::cannot_make_files_in(existing.empty() ? "." : existing);
        return why.empty() ? "" : "cannot write " + input + ": " + why;
      },
      "DIR");
}

}  // namespace mnist_app
