#pragma once
// Saving and loading a module's state_dict as a safetensors file, the format PyTorch reads with
// safetensors.torch.load_file: the same names ("layers.1.weight"), shapes and dtypes.
#include <string>

#include "core/safetensors.h"
#include "nn/module.h"

namespace minidl::nn {

/// The version of minidl's files, stored under "minidl.format" in every file's metadata.
inline constexpr const char* kFormatVersion = "1";

/// Writes module.state_dict() to `path` atomically (a failure leaves a previous file intact), with
/// `metadata` and minidl's own keys ("minidl.format"; keys starting with "minidl." are reserved).
///   nn::save(*model, "mlp.safetensors", {{"epochs", "10"}});
void save(const Module& module, const std::string& path, const safetensors::Metadata& metadata = {});

/// Loads a file of save(), or any safetensors file of the same names (one PyTorch wrote, say), into
/// the module's parameters and buffers on whatever device they are. Names, shapes and dtypes must
/// match exactly; otherwise the error names the file and the first missing, unexpected or
/// mismatched tensor, and the module is unchanged. Returns the file's metadata.
///   nn::load(*model, "mlp.safetensors");
safetensors::Metadata load(Module& module, const std::string& path);

/// Throws, naming `source` and the first missing, unexpected or mismatched name, unless `state`
/// has exactly the module's names with the same shapes and dtypes. Changes nothing.
void check_state_dict(const Module& module, const StateDict& state, const std::string& source);

/// Throws unless `metadata` (of the file `source`) is of a format version this build reads.
void check_format_version(const safetensors::Metadata& metadata, const std::string& source);

}  // namespace minidl::nn
