#!/usr/bin/env python3
"""Each test file includes the helper header of every helper it names.

CI compiles the tests in batches of files (MINIDL_UNITY_TESTS), where a file also sees the includes
of the files before it in its batch: one that names `testing::expect_error` without including
tests/test_util.h compiles there, and fails in the default build, which compiles each file alone.
This check reads the sources instead of compiling them one by one (minutes on CI's 2 cores).

A helper is a function, type or constant at namespace scope of a header in tests/, or a macro
defined there. A file names one by a qualified name (`testing::NAME`, `minidl::testing::NAME`, in
a call or a using-declaration), for a macro by `NAME(`, and after `using namespace
minidl::testing;` by a call `NAME(` too, unless the file defines a function or lambda of that name
itself (several define their own `leaf`).

    python3 tests/check_test_includes.py [tests folder]   # exit 1 naming each file and helper
"""
import pathlib
import re
import sys

DEFINITIONS = [
    re.compile(r"^inline\s+(?:constexpr\s+)?[^;{=()]*?\b([A-Za-z_]\w*)\s*\(", re.M),  # functions
    re.compile(r"^inline\s+constexpr\s+[\w:<>]+\s+([A-Za-z_]\w*)\s*=", re.M),  # constants
    re.compile(r"^(?:struct|class)\s+([A-Za-z_]\w*)\b(?!;)", re.M),  # types (not declarations)
    re.compile(r"^#define\s+([A-Za-z_]\w*)", re.M),  # macros
]
QUALIFIED = re.compile(r"(?<![\w:])(?:minidl::)?testing::([A-Za-z_]\w*)")
MACRO_CALL = re.compile(r"\b(MINIDL_[A-Z0-9_]+)\s*\(")
INCLUDE = re.compile(r'^#include\s+"([^"]+)"', re.M)
USING_NAMESPACE = re.compile(r"\busing\s+namespace\s+(?:minidl::)?testing\s*;")


def calls(code, name):
    """Whether `code` calls a free function `name` (not a member, not a qualified name)."""
    return re.search(r"(?<![\w.>:])" + name + r"\s*\(", code) is not None


def defines(code, name):
    """Whether `code` defines a function (`Type name(`) or a lambda (`name = [`) called `name`."""
    function = r"^[ \t]*(?:(?:static|inline|constexpr)\s+)*(?!return\b)[A-Za-z_][\w:<>,*&]*[\s*&]+" + name + r"\s*\("
    return re.search(function, code, re.M) is not None or re.search(r"\b" + name + r"\s*=\s*\[", code) is not None


def code_of(path):
    """The file's text without its comments (a helper named in a comment is not a use)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def main():
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
    headers = {h.name: code_of(h) for h in sorted(folder.glob("*.h"))}
    defined_in = {}  # helper name -> the headers that define it
    for name, code in headers.items():
        for pattern in DEFINITIONS:
            for helper in pattern.findall(code):
                defined_in.setdefault(helper, set()).add(name)

    def reached(code, seen=None):
        """The tests/ headers `code` includes, directly or through other tests/ headers."""
        seen = set() if seen is None else seen
        for included in INCLUDE.findall(code):
            name = pathlib.PurePath(included).name
            if name in headers and name not in seen:
                seen.add(name)
                reached(headers[name], seen)
        return seen

    problems = []
    sources = sorted(folder.glob("*.cpp"))
    for source in sources:
        code = code_of(source)
        included = reached(code)
        named = set(QUALIFIED.findall(code)) | set(MACRO_CALL.findall(code))
        if USING_NAMESPACE.search(code):
            named |= {h for h in defined_in if calls(code, h) and not defines(code, h)}
        for helper in sorted(named):
            homes = defined_in.get(helper)
            if homes and not homes & included:
                problems.append(f"{source.name}: names {helper} but includes none of {', '.join(sorted(homes))}")
    for line in problems:
        print(line)
    print(f"check_test_includes: {len(sources)} test files, {len(defined_in)} helpers in {len(headers)} headers, "
          f"{len(problems)} missing includes")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
