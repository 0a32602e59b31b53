// pt_pickle.cpp - the restricted pickle machine of pt_archive (pt_pickle.hpp): protocol 2-5 opcodes, values in an
// arena, torch._utils._rebuild_tensor_v2 / _rebuild_parameter as tensor records, every other class opaque.
#include "io/pt_pickle.hpp"

#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "bertx/error.hpp"

namespace bertx::pt {

namespace {

constexpr std::size_t kMaxDims = 64;

std::uint64_t le(const std::string& s, std::size_t pos, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[pos + i]);
  return v;
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

StateDict read_state_dict(const std::string& pkl, const std::string& where) {
  Machine m(pkl, where);
  StateDict out;
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
    throw Error(where + ": holds no dict (expected a state dict, or a dict with a \"model\" state dict)");
  for (const char* key : {"model", "state_dict", "model_state_dict"}) {
    const int sub = find(root, key);
    if (sub >= 0 && m.arena[static_cast<std::size_t>(sub)].k == K::Dict) {
      root = sub;
      out.key = key;
      break;
    }
  }
  const Obj& sd = m.arena[static_cast<std::size_t>(root)];
  for (std::size_t i = 0; i + 1 < sd.items.size(); i += 2) {
    const Obj& k = m.arena[static_cast<std::size_t>(sd.items[i])];
    const Obj& v = m.arena[static_cast<std::size_t>(sd.items[i + 1])];
    if (k.k != K::Str || v.k != K::Tensor) {
      ++out.skipped;
      continue;
    }
    out.tensors.push_back(v.tensor);
    out.tensors.back().name = k.s;
  }
  return out;
}

}  // namespace bertx::pt
