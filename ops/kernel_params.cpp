#include "ops/kernel_params.h"

#include <cctype>
#include <sstream>

namespace minidl::rtc {

namespace {

// The C++20 keywords and alternative tokens: none can name a parameter or a kernel.
constexpr std::string_view kKeywords[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
    "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
    "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
    "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
    "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
    "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    // Names the generated source defines for the body, and CUDA's built-in variables.
    "int64_t", "threadIdx", "blockIdx", "blockDim", "gridDim"};

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split_words(const std::string& entry) {
  std::istringstream in(entry);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

constexpr const char* kTypesHelp = "float, double, int64_t (or long long), int32_t, int8_t, uint8_t or bool";

bool parse_type(const std::string& type, DType& dtype) {
  if (type == "float") dtype = kFloat32;
  else if (type == "double") dtype = kFloat64;
  else if (type == "int64_t" || type == "long long" || type == "long long int") dtype = kInt64;
  else if (type == "int32_t") dtype = kInt32;
  else if (type == "int8_t") dtype = kInt8;
  else if (type == "uint8_t") dtype = kUInt8;
  else if (type == "bool") dtype = kBool;
  else return false;
  return true;
}

}  // namespace

const char* c_type_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Int64: return "long long";
    case DType::Int32: return "int";
    case DType::Int8: return "signed char";
    case DType::UInt8: return "unsigned char";
    case DType::Bool: return "bool";
    // A user's kernel declares none of these (parse_type refuses them): NVRTC programs would need
    // cuda_bf16.h / cuda_fp16.h, which the runtime compiler is not given.
    case DType::BFloat16:
    case DType::Float16: break;
  }
  return "?";
}

bool is_identifier(std::string_view text) {
  if (text.empty() || !is_ident_start(text[0])) return false;
  for (char c : text)
    if (!is_ident_char(c)) return false;
  for (std::string_view k : kKeywords)
    if (text == k) return false;
  return true;
}

bool is_reserved_name(std::string_view name) { return name == "i" || name == "n" || name.starts_with("minidl_"); }

std::vector<KernelParam> parse_kernel_params(const std::string& list, const char* what, const std::string& owner) {
  std::vector<KernelParam> params;
  if (trim(list).empty()) return params;
  auto fail = [&](const std::string& why) { MINIDL_FAIL(owner, ": bad ", what, " \"", list, "\": ", why); };
  size_t start = 0;
  for (size_t position = 1;; ++position) {
    const size_t comma = list.find(',', start);
    const std::string entry = trim(std::string_view(list).substr(start, comma == std::string::npos ? std::string::npos
                                                                                                    : comma - start));
    if (entry.empty()) fail("entry " + std::to_string(position) + " is empty (expected \"type name\")");
    std::vector<std::string> words = split_words(entry);
    KernelParam p;
    if (words.size() == 1) {
      if (parse_type(entry, p.dtype) || entry == "long")
        fail("\"" + entry + "\" has a type but no name (expected \"type name\")");
      fail("\"" + entry + "\" has a name but no type (expected \"type name\", the type one of " + kTypesHelp + ")");
    }
    p.name = words.back();
    words.pop_back();
    std::string type = words[0];
    for (size_t w = 1; w < words.size(); ++w) type += " " + words[w];
    if (type.find_first_of("*&[") != std::string::npos || p.name.find_first_of("*&[]") != std::string::npos) {
      fail("\"" + entry + "\" is not a per-element value: parameters are values of " + kTypesHelp +
           ", not pointers, references or arrays");
    }
    if (!parse_type(type, p.dtype)) {
      fail("unknown type \"" + type + "\" for " + p.name + " (expected " + kTypesHelp + ")");
    }
    if (!is_identifier(p.name)) fail("\"" + p.name + "\" is not a valid name (a C identifier that is no keyword)");
    if (is_reserved_name(p.name)) {
      fail("the name \"" + p.name + "\" is reserved (i is the element's index, n the element count, and names "
           "starting with minidl_ belong to the generated code)");
    }
    for (const KernelParam& q : params)
      if (q.name == p.name) fail("the name \"" + p.name + "\" is declared twice");
    params.push_back(p);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return params;
}

std::set<std::string> identifiers_in(std::string_view code) {
  std::set<std::string> names;
  for (size_t k = 0; k < code.size();) {
    if (is_ident_start(code[k])) {
      size_t e = k;
      while (e < code.size() && is_ident_char(code[e])) ++e;
      names.emplace(code.substr(k, e - k));
      k = e;
    } else if (std::isdigit(static_cast<unsigned char>(code[k]))) {
      while (k < code.size() && (is_ident_char(code[k]) || code[k] == '.')) ++k;  // 1e5f, 0x1F: no names
    } else {
      ++k;
    }
  }
  return names;
}

}  // namespace minidl::rtc
