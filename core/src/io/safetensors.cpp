// safetensors.cpp - see safetensors.hpp. POSIX file I/O (pread/write/fsync/rename), nlohmann::json header.
#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/ops/empty.h>
#include <nlohmann/json.hpp>

#include "bertx/error.hpp"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swapping");

namespace bertx {
namespace {

using json = nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we (no huge allocation from 8 bytes).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeInfo {
  const char* name;
  at::ScalarType type;
  std::uint64_t itemsize;
};

constexpr DtypeInfo kDtypes[] = {
    {"F64", at::kDouble, 8}, {"I64", at::kLong, 8}, {"F32", at::kFloat, 4},
    {"I32", at::kInt, 4},    {"F16", at::kHalf, 2}, {"BF16", at::kBFloat16, 2},
    {"I8", at::kChar, 1},    {"U8", at::kByte, 1},  {"BOOL", at::kBool, 1},
};

std::optional<DtypeInfo> dtype_by_name(std::string_view name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d;
  return std::nullopt;
}

std::optional<DtypeInfo> dtype_by_type(at::ScalarType type) {
  for (const auto& d : kDtypes)
    if (type == d.type) return d;
  return std::nullopt;
}

std::string supported_dtypes() {
  std::string s;
  for (const auto& d : kDtypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

// A name from an untrusted header, quoted and escaped so that the message stays one printable line.
std::string quote(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

// Keeps messages of third-party exceptions on one line.
std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

std::string errno_text() { return std::strerror(errno); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Closes now and reports failure (close can report a deferred write error).
  bool close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// Reads exactly len bytes at offset; false on a short read (file shrank) or an I/O error (errno set).
bool pread_all(int fd, void* buf, std::uint64_t len, std::uint64_t offset) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(len, 1u << 30));
    ssize_t n = ::pread(fd, p, chunk, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = 0;
      return false;
    }
    p += n;
    len -= static_cast<std::uint64_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

bool write_all(int fd, const void* buf, std::uint64_t len) {
  const auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(len, 1u << 30));
    ssize_t n = ::write(fd, p, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<std::uint64_t>(n);
  }
  return true;
}

struct Entry {
  std::string name;
  DtypeInfo dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;
};

// Reads a non-negative JSON integer; nullopt for anything else (negative, fractional, too large, non-number).
std::optional<std::uint64_t> as_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

}  // namespace

TensorMap load_safetensors(const std::string& path, MetadataMap* metadata) {
  auto fail = [&](const std::string& what) { return Error("safetensors file '" + path + "': " + what); };

  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok()) throw fail("cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw fail("cannot stat: " + errno_text());
  if (!S_ISREG(st.st_mode)) throw fail("not a regular file");
  const auto file_size = static_cast<std::uint64_t>(st.st_size);

  // --- header length and header ---
  if (file_size < 8)
    throw fail("truncated: " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");
  unsigned char len_bytes[8];
  if (!pread_all(fd.get(), len_bytes, 8, 0)) throw fail("cannot read the header length: truncated or I/O error");
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > file_size - 8)
    throw fail("header length " + std::to_string(header_len) + " exceeds the " + std::to_string(file_size - 8) +
               " bytes that follow it (truncated or not a safetensors file)");
  if (header_len > kMaxHeaderBytes)
    throw fail("header length " + std::to_string(header_len) + " exceeds the limit of " +
               std::to_string(kMaxHeaderBytes) + " bytes");
  std::string header_text(static_cast<std::size_t>(header_len), '\0');
  if (!pread_all(fd.get(), header_text.data(), header_len, 8))
    throw fail("cannot read the header: truncated or I/O error");

  json header;
  try {
    header = json::parse(header_text);
  } catch (const json::exception& e) {
    throw fail("header is not valid JSON: " + one_line(e.what()));
  }
  if (!header.is_object()) throw fail("header is not a JSON object");

  const std::uint64_t data_start = 8 + header_len;
  const std::uint64_t data_size = file_size - data_start;

  // --- validate every entry before allocating anything ---
  std::vector<Entry> entries;
  MetadataMap meta;
  for (const auto& [key, val] : header.items()) {
    if (key == "__metadata__") {
      if (!val.is_object()) throw fail("\"__metadata__\" is not a JSON object");
      for (const auto& [mk, mv] : val.items()) {
        if (!mv.is_string()) throw fail("\"__metadata__\" key " + quote(mk) + ": value is not a string");
        meta[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string tname = "tensor " + quote(key);
    if (!val.is_object()) throw fail(tname + ": entry is not a JSON object");

    Entry e;
    e.name = key;
    auto dt = val.find("dtype");
    if (dt == val.end() || !dt->is_string()) throw fail(tname + ": missing or non-string \"dtype\"");
    auto info = dtype_by_name(dt->get<std::string>());
    if (!info)
      throw fail(tname + ": unsupported dtype " + quote(dt->get<std::string>()) + " (supported: " + supported_dtypes() +
                 ")");
    e.dtype = *info;

    auto sh = val.find("shape");
    if (sh == val.end() || !sh->is_array()) throw fail(tname + ": missing or non-array \"shape\"");
    std::uint64_t numel = 1;
    for (const auto& d : *sh) {
      auto dim = as_u64(d);
      if (!dim)
        throw fail(tname + ": shape " + one_line(sh->dump()) + " has a dimension that is not a non-negative integer");
      if (*dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          __builtin_mul_overflow(numel, *dim, &numel))
        throw fail(tname + ": shape " + one_line(sh->dump()) + " overflows the element count");
      e.shape.push_back(static_cast<std::int64_t>(*dim));
    }
    std::uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, e.dtype.itemsize, &nbytes) ||
        nbytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw fail(tname + ": shape " + one_line(sh->dump()) + " overflows the byte count");

    auto off = val.find("data_offsets");
    if (off == val.end() || !off->is_array() || off->size() != 2)
      throw fail(tname + ": missing \"data_offsets\" or not an array [begin, end]");
    auto b = as_u64((*off)[0]);
    auto en = as_u64((*off)[1]);
    if (!b || !en) throw fail(tname + ": data_offsets " + one_line(off->dump()) + " are not non-negative integers");
    e.begin = *b;
    e.end = *en;
    const std::string offs = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.end < e.begin) throw fail(tname + ": " + offs + " end before begin");
    if (e.end > data_size)
      throw fail(tname + ": " + offs + " outside the data section of " + std::to_string(data_size) +
                 " bytes (truncated file?)");
    if (e.end - e.begin != nbytes)
      throw fail(tname + ": " + offs + " span " + std::to_string(e.end - e.begin) + " bytes but dtype " + e.dtype.name +
                 " shape " + one_line(sh->dump()) + " needs " + std::to_string(nbytes));
    entries.push_back(std::move(e));
  }

  // The tensors must tile the data section: no gap, no overlap, no trailing bytes.
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return std::pair(a->begin, a->end) < std::pair(b->begin, b->end); });
  std::uint64_t expected = 0;
  for (const Entry* e : by_offset) {
    if (e->begin != expected)
      throw fail("tensor " + quote(e->name) + ": data begins at byte " + std::to_string(e->begin) +
                 (e->begin < expected ? " inside the previous tensor" : " leaving a gap") + " (expected " +
                 std::to_string(expected) + ")");
    expected = e->end;
  }
  if (expected != data_size)
    throw fail("data section has " + std::to_string(data_size) + " bytes but the tensors cover " +
               std::to_string(expected));

  // --- read ---
  TensorMap out;
  for (const auto& e : entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype.type));
    const std::uint64_t n = e.end - e.begin;
    if (n > 0 && !pread_all(fd.get(), t.data_ptr(), n, data_start + e.begin))
      throw fail("tensor " + quote(e.name) +
                 ": cannot read its data: " + (errno ? errno_text() : std::string("file shrank")));
    if (e.dtype.type == at::kBool) {
      const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
      for (std::uint64_t i = 0; i < n; ++i)
        if (bytes[i] > 1)
          throw fail("tensor " + quote(e.name) + ": BOOL byte " + std::to_string(i) + " is neither 0 nor 1");
    }
    out.emplace(e.name, std::move(t));
  }
  if (metadata) *metadata = std::move(meta);
  return out;
}

void save_safetensors(const std::string& path, const TensorMap& tensors, const MetadataMap& metadata) {
  auto fail = [&](const std::string& what) { return Error("safetensors file '" + path + "': " + what); };

  // Plan the layout like the reference writer: larger items first (then by name) so every tensor's data
  // is aligned to its item size within the data section.
  struct Item {
    const std::string* name;
    const at::Tensor* tensor;
    DtypeInfo dtype;
    std::uint64_t nbytes;
  };
  std::vector<Item> items;
  for (const auto& [name, t] : tensors) {
    const std::string tname = "tensor " + quote(name);
    if (name == "__metadata__") throw fail(tname + ": the name is reserved for metadata");
    if (!t.defined()) throw fail(tname + ": undefined tensor");
    if (t.layout() != at::kStrided) throw fail(tname + ": only dense (strided) tensors can be saved");
    auto info = dtype_by_type(t.scalar_type());
    if (!info)
      throw fail(tname + ": unsupported dtype " + std::string(c10::toString(t.scalar_type())) +
                 " (supported: " + supported_dtypes() + ")");
    items.push_back({&name, &t, *info, static_cast<std::uint64_t>(t.numel()) * info->itemsize});
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.dtype.itemsize > b.dtype.itemsize; });

  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const auto& it : items) {
    header[*it.name] = {
        {"dtype", it.dtype.name}, {"shape", it.tensor->sizes().vec()}, {"data_offsets", {offset, offset + it.nbytes}}};
    offset += it.nbytes;
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const json::exception& e) {
    throw fail("a tensor name or metadata string is not valid UTF-8: " + one_line(e.what()));
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  unsigned char len_bytes[8];
  std::uint64_t header_len = header_text.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(header_len >> (8 * i));

  const std::string tmp = path + ".tmp";
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.ok()) throw fail("cannot create '" + tmp + "': " + errno_text());
  try {
    if (!write_all(fd.get(), len_bytes, 8) || !write_all(fd.get(), header_text.data(), header_text.size()))
      throw fail("cannot write '" + tmp + "': " + errno_text());
    for (const auto& it : items) {
      if (it.nbytes == 0) continue;
      at::Tensor c = it.tensor->cpu().resolve_neg().contiguous();
      if (!write_all(fd.get(), c.data_ptr(), it.nbytes))
        throw fail("tensor " + quote(*it.name) + ": cannot write '" + tmp + "': " + errno_text());
    }
    if (::fsync(fd.get()) != 0) throw fail("cannot fsync '" + tmp + "': " + errno_text());
    if (!fd.close()) throw fail("cannot close '" + tmp + "': " + errno_text());
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw fail("cannot rename '" + tmp + "' over it: " + errno_text());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // Make the rename itself durable.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd.ok() || ::fsync(dfd.get()) != 0) throw fail("cannot fsync folder '" + dir + "': " + errno_text());
}

}  // namespace bertx
