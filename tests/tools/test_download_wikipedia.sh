#!/usr/bin/env bash
# test_download_wikipedia.sh - tools/download_wikipedia against a local mirror (file:// URLs, no network):
# a good dump is kept and its SHA-256 recorded, a dump whose pinned SHA-256 or published sum differs is
# refused and removed. Usage: test_download_wikipedia.sh <repo root>
set -uo pipefail
tool="$1/tools/download_wikipedia"
dir=$(mktemp -d /tmp/bertx_dl_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; fails=$((fails + 1)); fi; }

mirror="$dir/mirror/enwiki/20240101"
mkdir -p "$mirror"
file=enwiki-20240101-pages-articles.xml.bz2
printf 'not really bzip2, but bytes to check\n' > "$mirror/$file"
echo "$(sha1sum "$mirror/$file" | cut -d' ' -f1)  $file" > "$mirror/enwiki-20240101-sha1sums.txt"
good=$(sha256sum "$mirror/$file" | cut -d' ' -f1)

out=$("$tool" --date 20240101 --mirror "file://$dir/mirror" --out "$dir/a" 2>&1); rc=$?
check "a dump matching the published sha1 is downloaded (exit $rc)" '[ $rc -eq 0 ] && cmp -s "$dir/a/$file" "$mirror/$file"'
check "its SHA-256 is recorded and printed" '[ "$(cut -d" " -f1 "$dir/a/$file.sha256")" = "$good" ] && grep -q "pin it elsewhere with --sha256 $good" <<<"$out"'

out=$("$tool" --date 20240101 --mirror "file://$dir/mirror" --out "$dir/b" --sha256 "$(printf '0%.0s' {1..64})" 2>&1); rc=$?
check "a pinned SHA-256 that differs is refused (exit $rc)" '[ $rc -eq 1 ] && grep -q "pinned sha256 mismatch" <<<"$out"'
check "and the refused file is removed" '[ ! -e "$dir/b/$file" ]'

out=$("$tool" --date 20240101 --mirror "file://$dir/mirror" --out "$dir/c" --sha256 "$good" 2>&1); rc=$?
check "the right pinned SHA-256 is accepted (exit $rc)" '[ $rc -eq 0 ]'

echo "0000000000000000000000000000000000000000  $file" > "$mirror/enwiki-20240101-sha1sums.txt"
out=$("$tool" --date 20240101 --mirror "file://$dir/mirror" --out "$dir/d" 2>&1); rc=$?
check "a dump whose published sha1 differs is refused (exit $rc)" '[ $rc -eq 1 ] && [ ! -e "$dir/d/$file" ] && grep -q "sha1 mismatch" <<<"$out"'
exit $((fails > 0))
