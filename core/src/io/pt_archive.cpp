// pt_archive.cpp - torch.save zip archives (pt_archive.hpp): the zip's central directory (zip64 too) and stored
// records with their crc32; data.pkl goes to the restricted pickle machine (pt_pickle.cpp).
#include "io/pt_archive.hpp"

#include <fstream>

#include "bertx/error.hpp"
#include "base/crc.hpp"
#include "io/pt_pickle.hpp"

namespace bertx::pt {

namespace {

constexpr std::uint64_t kMaxPickleBytes = 256ull << 20;

std::uint32_t crc32(const char* p, std::size_t n) {
  return ~crc_update<0xedb88320u>(~0u, reinterpret_cast<const unsigned char*>(p), n);
}

std::uint64_t le(const std::string& s, std::size_t pos, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[pos + i]);
  return v;
}

std::string read_at(std::ifstream& in, const std::string& path, std::uint64_t offset, std::uint64_t n) {
  std::string out(n, '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(out.data(), static_cast<std::streamsize>(n))) throw Error(path + ": read failed (truncated file?)");
  return out;
}

}  // namespace

Archive::Archive(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_, std::ios::binary | std::ios::ate);
  if (!in) throw Error(path_ + ": cannot open");
  file_size_ = static_cast<std::uint64_t>(in.tellg());
  const std::uint64_t tail_n = std::min<std::uint64_t>(file_size_, 22 + 65535);
  const std::string tail = read_at(in, path_, file_size_ - tail_n, tail_n);
  std::size_t eocd = std::string::npos;
  for (std::size_t i = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; i-- > 0;)
    if (le(tail, i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos)
    throw Error(path_ + ": not a zip archive (no end of central directory; a legacy torch.save file, or truncated)");
  std::uint64_t count = le(tail, eocd + 10, 2), cd_size = le(tail, eocd + 12, 4), cd_off = le(tail, eocd + 16, 4);
  if ((count == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) && eocd >= 20 &&
      le(tail, eocd - 20, 4) == 0x07064b50) {  // zip64 locator -> zip64 end of central directory
    const std::uint64_t z = le(tail, eocd - 20 + 8, 8);
    if (z > file_size_ || file_size_ - z < 56) throw Error(path_ + ": zip64 directory record past the end");
    const std::string r = read_at(in, path_, z, 56);
    if (le(r, 0, 4) != 0x06064b50) throw Error(path_ + ": bad zip64 end of central directory");
    count = le(r, 32, 8), cd_size = le(r, 40, 8), cd_off = le(r, 48, 8);
  }
  if (cd_off > file_size_ || cd_size > file_size_ - cd_off || count > cd_size / 46)
    throw Error(path_ + ": zip central directory (" + std::to_string(count) + " entries, " + std::to_string(cd_size) +
                " bytes at " + std::to_string(cd_off) + ") does not fit the file (truncated?)");
  const std::string cd = read_at(in, path_, cd_off, cd_size);
  std::size_t p = 0;
  for (std::uint64_t n = 0; n < count; ++n) {
    if (cd.size() - p < 46 || le(cd, p, 4) != 0x02014b50) throw Error(path_ + ": corrupt zip central directory");
    const std::uint64_t method = le(cd, p + 10, 2), name_n = le(cd, p + 28, 2), extra_n = le(cd, p + 30, 2),
                        comment_n = le(cd, p + 32, 2);
    Entry e;
    e.crc = static_cast<std::uint32_t>(le(cd, p + 16, 4));
    std::uint64_t csize = le(cd, p + 20, 4), usize = le(cd, p + 24, 4), local = le(cd, p + 42, 4);
    if (cd.size() - p - 46 < name_n + extra_n + comment_n) throw Error(path_ + ": corrupt zip central directory");
    const std::string name = cd.substr(p + 46, name_n);
    for (std::size_t x = p + 46 + name_n; x + 4 <= p + 46 + name_n + extra_n;) {  // zip64 extra field
      const std::uint64_t id = le(cd, x, 2), len = le(cd, x + 2, 2);
      if (x + 4 + len > p + 46 + name_n + extra_n) break;
      if (id == 1) {
        std::size_t y = x + 4;
        for (std::uint64_t* f : {&usize, &csize, &local})
          if (*f == 0xffffffffu && y + 8 <= x + 4 + len) *f = le(cd, y, 8), y += 8;
      }
      x += 4 + len;
    }
    p += 46 + name_n + extra_n + comment_n;
    if (method != 0 || csize != usize)
      throw Error(path_ + ": zip record '" + name + "' is compressed (method " + std::to_string(method) +
                  "); torch.save stores records uncompressed");
    if (local > file_size_ || file_size_ - local < 30) throw Error(path_ + ": zip record '" + name + "' past the end");
    const std::string lh = read_at(in, path_, local, 30);
    if (le(lh, 0, 4) != 0x04034b50) throw Error(path_ + ": zip record '" + name + "' has no local header");
    e.offset = local + 30 + le(lh, 26, 2) + le(lh, 28, 2);
    e.size = usize;
    if (e.offset > file_size_ || e.size > file_size_ - e.offset)
      throw Error(path_ + ": zip record '" + name + "' reaches past the end of the file (truncated?)");
    entries_.emplace_back(name, e);
    if (name.size() >= 9 && name.compare(name.size() - 9, 9, "/data.pkl") == 0 && prefix_.empty())
      prefix_ = name.substr(0, name.size() - 8);
  }
  if (prefix_.empty()) throw Error(path_ + ": zip archive without <name>/data.pkl (not a torch.save file)");
  const std::string pkl = read_entry(prefix_ + "data.pkl");
  StateDict sd = read_state_dict(pkl, path_ + " (data.pkl)");
  tensors_ = std::move(sd.tensors);
  skipped_ = sd.skipped;
  state_key_ = sd.key;
  if (tensors_.empty())
    throw Error(path_ + ": no tensors in its " + (state_key_.empty() ? "top-level dict" : "\"" + state_key_ + "\"") +
                " (expected a state dict)");
}

std::string Archive::read_entry(const std::string& name) const {
  for (const auto& [n, e] : entries_) {
    if (n != name) continue;
    if (name.size() > 9 && name.compare(name.size() - 9, 9, "/data.pkl") == 0 && e.size > kMaxPickleBytes)
      throw Error(path_ + ": " + name + " is " + std::to_string(e.size) + " bytes, more than bertx reads");
    std::ifstream in(path_, std::ios::binary);
    std::string out = read_at(in, path_, e.offset, e.size);
    if (crc32(out.data(), out.size()) != e.crc)
      throw Error(path_ + ": zip record '" + name + "' fails its crc32 check (corrupt file)");
    return out;
  }
  throw Error(path_ + ": no zip record '" + name + "'");
}

std::string Archive::storage_bytes(const TensorRecord& t) const {
  const std::string bytes = read_entry(prefix_ + "data/" + t.storage);
  const auto want = static_cast<unsigned __int128>(t.storage_numel) * raw_dtype_size(t.dtype);
  if (bytes.size() != want)
    throw Error(path_ + ": storage '" + t.storage + "' of tensor '" + t.name + "' holds " +
                std::to_string(bytes.size()) + " bytes, expected " +
                std::to_string(static_cast<unsigned long long>(want)));
  return bytes;
}

}  // namespace bertx::pt
