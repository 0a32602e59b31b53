// pt_archive.cpp - torch.save zip archives (pt_archive.hpp): the zip's central directory (zip64 too), stored
// records with their crc32, and a restricted pickle machine that keeps containers and tensor records only.
#include "io/pt_archive.hpp"

#include <array>
#include <cstring>
#include <fstream>
#include <limits>
#include <unordered_map>

#include "bertx/error.hpp"

namespace bertx::pt {

namespace {

constexpr std::uint64_t kMaxPickleBytes = 256ull << 20;
constexpr std::size_t kMaxDims = 64;

std::uint32_t crc32(const char* p, std::size_t n) {
  static const std::array<std::uint32_t, 256> t = [] {
    std::array<std::uint32_t, 256> a{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
      a[i] = c;
    }
    return a;
  }();
  std::uint32_t c = ~0u;
  for (std::size_t i = 0; i < n; ++i) c = t[(c ^ static_cast<unsigned char>(p[i])) & 0xff] ^ (c >> 8);
  return ~c;
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

bool dtype_of_storage(const std::string& global, DType& out) {
  static const std::pair<const char*, DType> table[] = {
      {"torch.FloatStorage", DType::Float},  {"torch.DoubleStorage", DType::Double},
      {"torch.HalfStorage", DType::Half},    {"torch.BFloat16Storage", DType::BFloat16},
      {"torch.LongStorage", DType::Int64},   {"torch.IntStorage", DType::Int32},
      {"torch.ShortStorage", DType::Int16},  {"torch.CharStorage", DType::Int8},
      {"torch.ByteStorage", DType::UInt8},   {"torch.BoolStorage", DType::Bool},
      {"torch.UntypedStorage", DType::UInt8}};
  for (const auto& [name, t] : table)
    if (global == name) return (out = t), true;
  return false;
}

// The pickle machine's values live in an arena and refer to each other by index: no ownership cycles, flat
// destruction, whatever the file says.
enum class K { None, Bool, Int, Float, Str, Bytes, Tuple, List, Dict, Global, Opaque, Storage, Tensor };
struct Obj {
  K k = K::None;
  std::int64_t i = 0;
  std::string s;           // Str, Bytes, Global ("module.name"), Storage key
  std::vector<int> items;  // Tuple/List elements; Dict key, value, key, value ...
  DType dtype = DType::Float;
  std::int64_t numel = 0;  // Storage
  TensorRecord tensor;     // Tensor
};

class Machine {
 public:
  Machine(const std::string& data, const std::string& where) : d_(data), where_(where) {}
  int run();
  std::vector<Obj> arena;

 private:
  [[noreturn]] void fail(const std::string& m) const {
    throw Error(where_ + ": " + m + " at byte " + std::to_string(pos_) + " (corrupt or not a torch.save pickle)");
  }
  std::uint64_t u(int n) {
    if (d_.size() - pos_ < static_cast<std::size_t>(n)) fail("truncated");
    const std::uint64_t v = le(d_, pos_, n);
    pos_ += n;
    return v;
  }
  std::string take(std::uint64_t n) {
    if (n > d_.size() - pos_) fail("length " + std::to_string(n) + " past the end");
    std::string s = d_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string line() {
    const auto e = d_.find('\n', pos_);
    if (e == std::string::npos) fail("unterminated line");
    std::string s = d_.substr(pos_, e - pos_);
    pos_ = e + 1;
    return s;
  }
  int make(Obj o) {
    arena.push_back(std::move(o));
    return static_cast<int>(arena.size() - 1);
  }
  int make(K k) { return make(Obj{k}); }
  void push(int v) { stack_.push_back(v); }
  int pop() {
    if (stack_.size() <= floor()) fail("pop from an empty stack");
    const int v = stack_.back();
    stack_.pop_back();
    return v;
  }
  int& top() {
    if (stack_.size() <= floor()) fail("empty stack");
    return stack_.back();
  }
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<int> pop_mark() {
    if (marks_.empty()) fail("no MARK");
    std::vector<int> out(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return out;
  }
  const Obj& at(int i) const { return arena[static_cast<std::size_t>(i)]; }
  std::int64_t int_of(int v, const char* what) const {
    if (at(v).k != K::Int && at(v).k != K::Bool) fail(std::string(what) + " is not an integer");
    return at(v).i;
  }
  std::vector<std::int64_t> ints_of(int v, const char* what) const {
    if (at(v).k != K::Tuple || at(v).items.size() > kMaxDims) fail(std::string(what) + " is not a tuple of integers");
    std::vector<std::int64_t> out;
    for (int x : at(v).items) out.push_back(int_of(x, what));
    return out;
  }
  int reduce(int callable, int args);
  void add_items(int target, const std::vector<int>& items, bool pairs);

  const std::string& d_;
  const std::string& where_;
  std::size_t pos_ = 0;
  std::vector<int> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, int> memo_;
};

int Machine::reduce(int callable, int args) {
  const std::string g = at(callable).k == K::Global ? at(callable).s : std::string();  // a copy: make() grows the arena
  const std::vector<int> a = at(args).k == K::Tuple ? at(args).items : std::vector<int>{};
  if (g == "collections.OrderedDict" && a.empty()) return make(K::Dict);
  if ((g == "torch._utils._rebuild_parameter" || g == "torch._utils._rebuild_parameter_with_state") && !a.empty())
    return a[0];
  if (g != "torch._utils._rebuild_tensor_v2" && g != "torch._utils._rebuild_tensor") return make(K::Opaque);
  if (a.size() < 4 || at(a[0]).k != K::Storage) fail(g + " without (storage, offset, size, stride)");
  Obj t{K::Tensor};
  t.tensor.storage = at(a[0]).s;
  t.tensor.dtype = at(a[0]).dtype;
  t.tensor.storage_numel = at(a[0]).numel;
  t.tensor.offset = int_of(a[1], "tensor storage offset");
  t.tensor.sizes = ints_of(a[2], "tensor size");
  t.tensor.strides = ints_of(a[3], "tensor stride");
  const auto& tr = t.tensor;
  if (tr.sizes.size() != tr.strides.size()) fail("tensor size and stride of different lengths");
  // The last element addressed must lie inside the storage (nothing is read outside it).
  __int128 last = tr.offset;
  bool empty = false;
  for (std::size_t i = 0; i < tr.sizes.size(); ++i) {
    if (tr.sizes[i] < 0 || tr.strides[i] < 0) fail("negative tensor size or stride");
    empty = empty || tr.sizes[i] == 0;
    last += static_cast<__int128>(tr.sizes[i] > 0 ? tr.sizes[i] - 1 : 0) * tr.strides[i];
  }
  if (tr.offset < 0 || (!empty && last >= tr.storage_numel))
    fail("tensor reaches element " + std::to_string(static_cast<long long>(last)) + " of a storage of " +
         std::to_string(tr.storage_numel));
  return make(std::move(t));
}

void Machine::add_items(int target, const std::vector<int>& items, bool pairs) {
  Obj& o = arena[static_cast<std::size_t>(target)];
  if (pairs && items.size() % 2) fail("SETITEMS with an odd number of values");
  if ((pairs && o.k != K::Dict) || (!pairs && o.k != K::List)) return;  // items of an opaque object: not kept
  o.items.insert(o.items.end(), items.begin(), items.end());
}

int Machine::run() {
  while (true) {
    if (pos_ >= d_.size()) fail("no STOP opcode");
    const auto op = static_cast<unsigned char>(d_[pos_++]);
    switch (op) {
      case 0x80:
        u(1);
        break;  // PROTO
      case 0x95:
        u(8);
        break;     // FRAME
      case '.': {  // STOP
        const int v = pop();
        return v;
      }
      case '(':
        marks_.push_back(stack_.size());
        break;
      case '0':
        pop();
        break;
      case '1':
        pop_mark();
        break;
      case '2':
        push(top());
        break;
      case 'N':
        push(make(K::None));
        break;
      case 0x88:
      case 0x89:
        push(make(Obj{K::Bool, op == 0x88 ? 1 : 0}));
        break;
      case 'J':
        push(make(Obj{K::Int, static_cast<std::int32_t>(u(4))}));
        break;
      case 'K':
        push(make(Obj{K::Int, static_cast<std::int64_t>(u(1))}));
        break;
      case 'M':
        push(make(Obj{K::Int, static_cast<std::int64_t>(u(2))}));
        break;
      case 0x8a: {  // LONG1
        const auto n = static_cast<int>(u(1));
        if (n > 8) {
          take(static_cast<std::uint64_t>(n));
          push(make(K::Opaque));
          break;
        }
        std::uint64_t v = n ? u(n) : 0;
        if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~0ull << (8 * n);  // sign-extend
        push(make(Obj{K::Int, static_cast<std::int64_t>(v)}));
        break;
      }
      case 0x8b:
        take(u(4));
        push(make(K::Opaque));
        break;  // LONG4
      case 'G': {
        const std::uint64_t be = u(8);
        std::uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = (v << 8) | ((be >> (8 * i)) & 0xff);
        double f;
        std::memcpy(&f, &v, 8);
        Obj o{K::Float};
        o.s = std::to_string(f);
        push(make(std::move(o)));
        break;
      }
      case 'X':
      case 0x8c:
      case 0x8d:
      case 'T':
      case 'U':
      case 'B':
      case 'C':
      case 0x8e: {  // (SHORT_)BINUNICODE(8), (SHORT_)BINSTRING, (SHORT_)BINBYTES(8)
        const int n = (op == 0x8c || op == 'U' || op == 'C') ? 1 : (op == 0x8d || op == 0x8e) ? 8 : 4;
        Obj o{(op == 'X' || op == 0x8c || op == 0x8d) ? K::Str : K::Bytes};
        o.s = take(u(n));
        push(make(std::move(o)));
        break;
      }
      case ')':
        push(make(K::Tuple));
        break;
      case ']':
        push(make(K::List));
        break;
      case '}':
        push(make(K::Dict));
        break;
      case 0x8f:
        push(make(K::Opaque));
        break;  // EMPTY_SET
      case 't':
      case 'l':
      case 'd':
      case 0x91: {  // TUPLE, LIST, DICT, FROZENSET
        Obj o{op == 't' ? K::Tuple : op == 'l' ? K::List : op == 'd' ? K::Dict : K::Opaque};
        o.items = pop_mark();
        if (op == 'd' && o.items.size() % 2) fail("DICT with an odd number of values");
        if (o.k == K::Opaque) o.items.clear();
        push(make(std::move(o)));
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        Obj o{K::Tuple};
        o.items.resize(op - 0x84);
        for (auto it = o.items.rbegin(); it != o.items.rend(); ++it) *it = pop();
        push(make(std::move(o)));
        break;
      }
      case 'a': {
        const int v = pop();
        add_items(top(), {v}, false);
        break;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        std::vector<int> items = pop_mark();
        add_items(top(), items, false);
        break;
      }
      case 's': {
        const int v = pop(), k = pop();
        add_items(top(), {k, v}, true);
        break;
      }
      case 'u': {
        std::vector<int> items = pop_mark();
        add_items(top(), items, true);
        break;
      }
      case 'c': {
        Obj o{K::Global};
        o.s = line();
        o.s += "." + line();
        push(make(std::move(o)));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const int name = pop(), module = pop();
        if (at(name).k != K::Str || at(module).k != K::Str) fail("STACK_GLOBAL of non-strings");
        Obj o{K::Global};
        o.s = at(module).s + "." + at(name).s;
        push(make(std::move(o)));
        break;
      }
      case 'R': {
        const int args = pop(), callable = pop();
        push(reduce(callable, args));
        break;
      }
      case 0x81:
        pop();
        pop();
        push(make(K::Opaque));
        break;  // NEWOBJ
      case 0x92:
        pop();
        pop();
        pop();
        push(make(K::Opaque));
        break;  // NEWOBJ_EX
      case 'b':
        pop();
        top();
        break;     // BUILD: state not applied
      case 'Q': {  // BINPERSID
        const int pid = pop();
        const Obj& t = at(pid);
        if (t.k != K::Tuple || t.items.size() != 5 || at(t.items[0]).s != "storage" || at(t.items[1]).k != K::Global ||
            at(t.items[2]).k != K::Str)
          fail("persistent id is not ('storage', type, key, location, numel)");
        Obj s{K::Storage};
        if (!dtype_of_storage(at(t.items[1]).s, s.dtype)) fail("unknown storage type " + at(t.items[1]).s);
        s.s = at(t.items[2]).s;
        s.numel = int_of(t.items[4], "storage size");
        if (s.numel < 0) fail("negative storage size");
        push(make(std::move(s)));
        break;
      }
      case 'q':
        memo_[u(1)] = top();
        break;
      case 'r':
        memo_[u(4)] = top();
        break;
      case 0x94:
        memo_[memo_.size()] = top();
        break;
      case 'h':
      case 'j': {
        const auto it = memo_.find(u(op == 'h' ? 1 : 4));
        if (it == memo_.end()) fail("memo entry read before it is written");
        push(it->second);
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex);
      }
    }
  }
}

}  // namespace

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float:
    case DType::Int32:
      return 4;
    case DType::Double:
    case DType::Int64:
      return 8;
    case DType::Half:
    case DType::BFloat16:
    case DType::Int16:
      return 2;
    default:
      return 1;
  }
}

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
  Machine m(pkl, path_ + " (data.pkl)");
  int root = m.run();
  auto find = [&](int dict, const char* key) {
    const Obj& d = m.arena[static_cast<std::size_t>(dict)];
    for (std::size_t i = 0; i + 1 < d.items.size(); i += 2)
      if (m.arena[static_cast<std::size_t>(d.items[i])].k == K::Str &&
          m.arena[static_cast<std::size_t>(d.items[i])].s == key)
        return d.items[i + 1];
    return -1;
  };
  if (m.arena[static_cast<std::size_t>(root)].k != K::Dict)
    throw Error(path_ + ": holds no dict (expected a state dict, or a dict with a \"model\" state dict)");
  for (const char* key : {"model", "state_dict", "model_state_dict"}) {
    const int sub = find(root, key);
    if (sub >= 0 && m.arena[static_cast<std::size_t>(sub)].k == K::Dict) {
      root = sub;
      state_key_ = key;
      break;
    }
  }
  const Obj& sd = m.arena[static_cast<std::size_t>(root)];
  for (std::size_t i = 0; i + 1 < sd.items.size(); i += 2) {
    const Obj& k = m.arena[static_cast<std::size_t>(sd.items[i])];
    const Obj& v = m.arena[static_cast<std::size_t>(sd.items[i + 1])];
    if (k.k != K::Str || v.k != K::Tensor) {
      ++skipped_;
      continue;
    }
    tensors_.push_back(v.tensor);
    tensors_.back().name = k.s;
  }
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
  const auto want = static_cast<unsigned __int128>(t.storage_numel) * dtype_size(t.dtype);
  if (bytes.size() != want)
    throw Error(path_ + ": storage '" + t.storage + "' of tensor '" + t.name + "' holds " +
                std::to_string(bytes.size()) + " bytes, expected " +
                std::to_string(static_cast<unsigned long long>(want)));
  return bytes;
}

}  // namespace bertx::pt
