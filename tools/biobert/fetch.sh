# fetch.sh - sourced by tools/biobert/download_*: resumable download + SHA-256 check (bash, curl, sha256sum).
#   fetch URL OUT SHA256   downloads URL into OUT.part (resuming a partial one: curl -C -), checks its SHA-256
#                          and renames it to OUT. An OUT already present is checked again and kept if it matches.
# A mismatch keeps the file as OUT.bad and fails with both checksums. There is no way to skip the check: a
# dataset whose checksum bertx cannot pin must be given one (--sha256) by the user.

fetch_die() { echo "$(basename "$0"): error: $*" >&2; exit 1; }

fetch() {
  local url=$1 out=$2 want=$3 got
  [[ $want =~ ^[0-9a-f]{64}$ ]] || fetch_die "no valid SHA-256 for $url (got '${want}'); pass --sha256 HEX (64 hex digits) from a source you trust"
  mkdir -p "$(dirname "$out")"
  if [[ -f $out ]]; then
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [[ $got == "$want" ]] && { echo "$out: present, SHA-256 ok"; return 0; }
    fetch_die "$out exists but its SHA-256 is $got, expected $want (remove it to download again)"
  fi
  echo "downloading $url -> $out"
  curl --fail --location --retry 5 --retry-delay 5 --continue-at - --output "$out.part" "$url" ||
    fetch_die "download of $url failed (rerun to resume from $out.part)"
  got=$(sha256sum "$out.part" | cut -d' ' -f1)
  if [[ $got != "$want" ]]; then
    mv -f "$out.part" "$out.bad"
    fetch_die "SHA-256 mismatch for $url: expected $want, got $got (kept as $out.bad; remove it to download again)"
  fi
  mv -f "$out.part" "$out"
  echo "$out: SHA-256 ok"
}
