// tf_bundle.cpp - the TensorFlow tensor-bundle reader (tf_bundle.hpp): SSTable blocks, block handles, restart
// arrays and trailers, hand-decoded BundleHeaderProto / BundleEntryProto, crc32c-checked tensor bytes.
#include "io/tf_bundle.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string_view>

#include "bertx/error.hpp"
#include "base/crc.hpp"

namespace fs = std::filesystem;

namespace bertx::tf {

namespace {

constexpr std::uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr std::size_t kFooterSize = 48, kTrailerSize = 5;
constexpr std::uint64_t kMaxIndexBytes = 1ull << 30;

// Reads protobuf / LevelDB varints and fixed-width integers from a bounded span; `what` names it in errors.
struct Cursor {
  std::string_view s;
  std::size_t pos = 0;
  const std::string& where;
  bool done() const { return pos >= s.size(); }
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(where + ": " + msg + " at byte " + std::to_string(pos) + " (corrupt or not a TensorFlow checkpoint)");
  }
  std::uint64_t varint(int max_bits = 64) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < max_bits; shift += 7) {
      if (pos >= s.size()) fail("truncated varint");
      const auto b = static_cast<unsigned char>(s[pos++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than " + std::to_string(max_bits) + " bits");
  }
  std::uint32_t fixed32() {
    if (pos > s.size() || s.size() - pos < 4) fail("truncated fixed32");
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[pos + i]);
    pos += 4;
    return v;
  }
  std::string_view bytes(std::uint64_t n) {
    if (n > s.size() - pos) fail("length " + std::to_string(n) + " past the end");
    std::string_view out = s.substr(pos, n);
    pos += n;
    return out;
  }
  // Skips a field of the given wire type (groups are refused).
  void skip(std::uint64_t wire) {
    if (wire == 0)
      varint();
    else if (wire == 1)
      bytes(8);
    else if (wire == 2)
      bytes(varint());
    else if (wire == 5)
      bytes(4);
    else
      fail("unsupported protobuf wire type " + std::to_string(wire));
  }
};

struct Handle {
  std::uint64_t offset = 0, size = 0;
};

Handle read_handle(Cursor& c) { return {c.varint(), c.varint()}; }

// The contents of the block at `h`, its trailer checked (no compression, crc32c of contents + type byte).
std::string_view block_at(std::string_view file, Handle h, const std::string& where) {
  if (h.offset > file.size() || h.size > file.size() - h.offset || kTrailerSize > file.size() - h.offset - h.size)
    throw Error(where + ": block handle (offset " + std::to_string(h.offset) + ", size " + std::to_string(h.size) +
                ") points past the end of the file (" + std::to_string(file.size()) + " bytes; truncated?)");
  const std::string_view trailer = file.substr(h.offset + h.size, kTrailerSize);
  if (trailer[0] != 0)
    throw Error(where + ": block at offset " + std::to_string(h.offset) + " has compression type " +
                std::to_string(static_cast<unsigned char>(trailer[0])) +
                ", expected 0 (TensorFlow writes bundle indexes uncompressed)");
  std::string scratch(trailer.substr(1));
  Cursor tc{scratch, 0, where};
  const std::uint32_t stored = tc.fixed32();
  if (mask_crc(crc32c(file.data() + h.offset, h.size + 1)) != stored)
    throw Error(where + ": block at offset " + std::to_string(h.offset) + " fails its crc32c check (corrupt file)");
  return file.substr(h.offset, h.size);
}

// Calls f(key, value) for each entry of a block, checking the restart array and the key prefix lengths.
template <class F>
void for_each_entry(std::string_view block, const std::string& where, F&& f) {
  if (block.size() < 4) throw Error(where + ": block of " + std::to_string(block.size()) + " bytes (too short)");
  Cursor tail{block, block.size() - 4, where};
  const std::uint64_t restarts = tail.fixed32();
  if (restarts == 0 || restarts > (block.size() - 4) / 4)
    throw Error(where + ": block has " + std::to_string(restarts) + " restart points, which do not fit its " +
                std::to_string(block.size()) + " bytes");
  const std::size_t limit = block.size() - 4 - 4 * restarts;
  Cursor rc{block, limit, where};
  for (std::uint64_t i = 0; i < restarts; ++i)
    if (rc.fixed32() > limit) throw Error(where + ": block restart point past its entries");
  Cursor c{block.substr(0, limit), 0, where};
  std::string key;
  while (!c.done()) {
    const std::uint64_t shared = c.varint(32), unshared = c.varint(32), value_len = c.varint(32);
    if (shared > key.size()) c.fail("key shares " + std::to_string(shared) + " bytes with a shorter previous key");
    key.resize(shared);
    key += c.bytes(unshared);
    f(key, c.bytes(value_len));
  }
}

DType dtype_of(std::uint64_t tf) {
  switch (tf) {
    case 1:
      return DType::Float;
    case 2:
      return DType::Double;
    case 3:
      return DType::Int32;
    case 4:
      return DType::UInt8;
    case 5:
      return DType::Int16;
    case 6:
      return DType::Int8;
    case 9:
      return DType::Int64;
    case 10:
      return DType::Bool;
    case 14:
      return DType::BFloat16;
    case 19:
      return DType::Half;
    default:
      return DType::Other;
  }
}

std::vector<std::int64_t> parse_shape(std::string_view s, const std::string& where) {
  std::vector<std::int64_t> dims;
  Cursor c{s, 0, where};
  while (!c.done()) {
    const std::uint64_t tag = c.varint();
    if (tag == (2 << 3 | 2)) {  // dim { size = 1; name = 2; }
      Cursor d{c.bytes(c.varint()), 0, where};
      std::int64_t size = 0;
      while (!d.done()) {
        const std::uint64_t t = d.varint();
        if (t == (1 << 3 | 0))
          size = static_cast<std::int64_t>(d.varint());
        else
          d.skip(t & 7);
      }
      if (size < 0) c.fail("negative dimension " + std::to_string(size));
      if (dims.size() >= 64) c.fail("more than 64 dimensions");
      dims.push_back(size);
    } else if (tag == (3 << 3 | 0)) {
      if (c.varint()) c.fail("tensor of unknown rank");
    } else {
      c.skip(tag & 7);
    }
  }
  return dims;
}

BundleEntry parse_entry(const std::string& name, std::string_view value, const std::string& where) {
  const std::string at = where + " entry '" + name + "'";
  BundleEntry e;
  e.name = name;
  Cursor c{value, 0, at};
  while (!c.done()) {
    const std::uint64_t tag = c.varint();
    switch (tag) {
      case 1 << 3 | 0:
        e.raw_dtype = static_cast<std::int64_t>(c.varint());
        break;
      case 2 << 3 | 2:
        e.shape = parse_shape(c.bytes(c.varint()), at);
        break;
      case 3 << 3 | 0:
        e.shard = static_cast<std::int64_t>(c.varint());
        break;
      case 4 << 3 | 0:
        e.offset = c.varint();
        break;
      case 5 << 3 | 0:
        e.size = c.varint();
        break;
      case 6 << 3 | 5:
        e.masked_crc = c.fixed32();
        e.has_crc = true;
        break;
      case 7 << 3 | 2:
        c.bytes(c.varint());
        e.sliced = true;
        break;
      default:
        c.skip(tag & 7);
    }
  }
  e.dtype = dtype_of(static_cast<std::uint64_t>(e.raw_dtype));
  if (e.dtype != DType::Other && !e.sliced) {
    std::uint64_t n = raw_dtype_size(e.dtype);
    for (std::int64_t d : e.shape) {
      if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d))
        throw Error(at + ": shape overflows 64 bits");
      n *= static_cast<std::uint64_t>(d);
    }
    if (n != e.size)
      throw Error(at + ": holds " + std::to_string(e.size) + " bytes but its shape and dtype need " +
                  std::to_string(n));
  }
  return e;
}

std::string read_all(const std::string& path, std::uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(path + ": cannot open");
  const auto size = static_cast<std::uint64_t>(in.tellg());
  if (size > max_bytes)
    throw Error(path + ": " + std::to_string(size) + " bytes, more than a bundle index may have (" +
                std::to_string(max_bytes) + ")");
  std::string out(size, '\0');
  in.seekg(0);
  if (!in.read(out.data(), static_cast<std::streamsize>(size))) throw Error(path + ": read failed");
  return out;
}

}  // namespace

Bundle::Bundle(std::string prefix) : prefix_(std::move(prefix)), index_path_(prefix_ + ".index") {
  const std::string file = read_all(index_path_, kMaxIndexBytes);
  const std::string& where = index_path_;
  if (file.size() < kFooterSize)
    throw Error(where + ": " + std::to_string(file.size()) + " bytes, shorter than an SSTable footer (48; truncated?)");
  Cursor footer{std::string_view(file).substr(file.size() - kFooterSize), 0, where};
  read_handle(footer);  // metaindex: unused by bundles
  const Handle index = read_handle(footer);
  footer.pos = kFooterSize - 8;
  const std::uint64_t magic = footer.fixed32() | (static_cast<std::uint64_t>(footer.fixed32()) << 32);
  if (magic != kTableMagic)
    throw Error(where + ": no SSTable magic number at its end (not a TensorFlow V2 checkpoint index, or truncated)");
  bool header_seen = false;
  std::string last_key;
  bool first = true;
  for_each_entry(block_at(file, index, where), where, [&](const std::string&, std::string_view value) {
    Cursor hc{value, 0, where};
    const Handle h = read_handle(hc);
    for_each_entry(block_at(file, h, where), where, [&](const std::string& key, std::string_view v) {
      if (!first && key <= last_key) throw Error(where + ": key '" + key + "' out of order or repeated");
      first = false;
      last_key = key;
      if (key.empty()) {  // BundleHeaderProto
        header_seen = true;
        Cursor c{v, 0, where};
        while (!c.done()) {
          const std::uint64_t tag = c.varint();
          if (tag == (1 << 3 | 0))
            num_shards_ = static_cast<std::int64_t>(c.varint());
          else if (tag == (2 << 3 | 0)) {
            if (c.varint() != 0) throw Error(where + ": big-endian checkpoint (bertx reads little-endian ones)");
          } else
            c.skip(tag & 7);
        }
        if (num_shards_ < 1 || num_shards_ > 99999)
          throw Error(where + ": header says " + std::to_string(num_shards_) + " data shards, expected 1 to 99999");
        return;
      }
      entries_.push_back(parse_entry(key, v, where));
    });
  });
  if (!header_seen) throw Error(where + ": no bundle header (the entry with the empty key)");
  for (const auto& e : entries_)
    if (e.shard < 0 || e.shard >= num_shards_)
      throw Error(where + " entry '" + e.name + "': shard " + std::to_string(e.shard) + " but the header says " +
                  std::to_string(num_shards_) + " shards");
}

std::string Bundle::read(const BundleEntry& e) const {
  const std::string at = index_path_ + " entry '" + e.name + "'";
  if (e.sliced) throw Error(at + ": a partitioned (sliced) variable; bertx reads whole variables only");
  if (e.dtype == DType::Other)
    throw Error(at + ": TensorFlow dtype " + std::to_string(e.raw_dtype) + " is not a numeric tensor bertx reads");
  char shard[40];
  std::snprintf(shard, sizeof shard, ".data-%05lld-of-%05lld", static_cast<long long>(e.shard),
                static_cast<long long>(num_shards_));
  const std::string path = prefix_ + shard;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(path + ": cannot open the data shard of " + at);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  if (e.offset > size || e.size > size - e.offset)
    throw Error(path + ": " + std::to_string(size) + " bytes, but " + at + " needs bytes " + std::to_string(e.offset) +
                " to " + std::to_string(e.offset + e.size) + " (truncated shard?)");
  std::string out(e.size, '\0');
  in.seekg(static_cast<std::streamoff>(e.offset));
  if (!in.read(out.data(), static_cast<std::streamsize>(e.size))) throw Error(path + ": read failed for " + at);
  if (mask_crc(crc32c(out.data(), out.size())) != e.masked_crc)
    throw Error(path + ": the bytes of " + at + " fail their crc32c check (corrupt data shard)");
  return out;
}

std::string find_checkpoint_prefix(const std::string& dir) {
  std::error_code ec;
  if (std::ifstream ck(fs::path(dir) / "checkpoint"); ck) {
    std::string line;
    while (std::getline(ck, line)) {
      const auto q1 = line.find('"'), q2 = line.rfind('"');
      if (line.rfind("model_checkpoint_path:", 0) != 0 || q1 == std::string::npos || q2 <= q1) continue;
      fs::path p = line.substr(q1 + 1, q2 - q1 - 1);
      for (const fs::path& cand : {p.is_absolute() ? p : fs::path(dir) / p, fs::path(dir) / p.filename()})
        if (fs::is_regular_file(cand.string() + ".index", ec)) return cand.string();
    }
  }
  std::set<std::string> found;
  for (const auto& f : fs::directory_iterator(dir, ec))
    if (f.path().extension() == ".index" && f.is_regular_file(ec))
      found.insert((f.path().parent_path() / f.path().stem()).string());
  if (found.empty()) return "";
  if (found.size() > 1)
    throw Error(dir + ": " + std::to_string(found.size()) + " TensorFlow checkpoints (" + *found.begin() + ".index, " +
                *std::next(found.begin()) + ".index ...) and no `checkpoint` file naming one; pass the .index file");
  return *found.begin();
}

}  // namespace bertx::tf
