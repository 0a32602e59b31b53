// reader.cpp - Hdf5PretrainingReader: the one translation unit of the reader that includes ATen. A producer
// thread walks the SamplePlan from the consumer's position, loads shards (a small LRU of whole files),
// assembles batches and queues up to `prefetch` of them; seek() restarts it from the new position.
#include "reader.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <list>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "bertx/error.hpp"
#include "bertx/tokenizer.hpp"
#include "bertx/data/hdf5_shard.hpp"
#include "bertx/data/masking.hpp"
#include "bertx/parallel.hpp"
#include "plan.hpp"

namespace bertx::hdf5_pretraining {

namespace fs = std::filesystem;

static const Fields<ReaderConfig>& reader_fields() {
  using R = ReaderConfig;
  static const Fields<ReaderConfig> f{
      field_required("dir", &R::dir, "folder of HDF5 shards in NVIDIA's layout (*.hdf5, *.h5, *.hdf)"),
      field("eval_dir", &R::eval_dir, "folder of held-out shards for evaluation (empty = none)"),
      field("seq_len", &R::seq_len,
            "longest sequence the shards may hold (0 = any; sizes the dry-run memory estimate)"),
      field("max_predictions", &R::max_predictions,
            "masked positions per sequence with dynamic masking (static shards keep their own)"),
      field("dynamic_masking", &R::dynamic_masking,
            "mask in the reader, seeded by (run seed, epoch, sample): new masks every epoch"),
      field("masked_lm_prob", &R::masked_lm_prob, "dynamic masking: fraction of tokens to predict"),
      field("whole_word_masking", &R::whole_word_masking, "dynamic masking: mask every piece of a word together"),
      field("vocab", &R::vocab, "vocab.txt ([MASK] id, vocab size, ## pieces); required by dynamic masking"),
      field("prefetch", &R::prefetch, "batches prepared ahead on the background thread"),
      field("threads", &R::threads, "threads assembling one batch"),
  };
  return f;
}

Schema reader_schema() { return reader_fields().schema(); }

ReaderConfig reader_config(const Options& o) {
  const ReaderConfig c = reader_fields().read(o);
  const std::string& w = o.where();
  if (c.seq_len < 0) throw Error(w + ": seq_len must be >= 0 (0 = any)");
  if (c.max_predictions < 1) throw Error(w + ": max_predictions must be >= 1");
  if (!(c.masked_lm_prob > 0 && c.masked_lm_prob < 1)) throw Error(w + ": masked_lm_prob must be in (0, 1)");
  if (c.prefetch < 1) throw Error(w + ": prefetch must be >= 1");
  if (c.threads < 1) throw Error(w + ": threads must be >= 1");
  if (c.dynamic_masking && c.vocab.empty())
    throw Error(w + ": dynamic_masking needs vocab (the [MASK] id and vocab size)");
  return c;
}

namespace {

std::vector<ShardFile> list_shards(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": no such folder of HDF5 shards");
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".hdf5" || ext == ".h5" || ext == ".hdf")) paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) throw Error(dir + ": no HDF5 shards (*.hdf5, *.h5, *.hdf) in this folder");
  std::vector<ShardFile> files;
  for (const auto& p : paths) {
    const data::ShardInfo info = data::inspect_shard(p);
    files.push_back({p, info.n, info.seq_len, info.max_predictions});
  }
  return files;
}

class Hdf5PretrainingReader final : public DatasetReader {
 public:
  explicit Hdf5PretrainingReader(ReaderConfig c) : cfg_(std::move(c)) {}
  ~Hdf5PretrainingReader() override { stop_producer(); }

  void open(const DatasetContext& ctx) override {
    stop_producer();
    ctx_ = ctx;
    if (ctx.split != "train" && ctx.split != "eval")
      throw Error("[data] (hdf5_pretraining): no '" + ctx.split + "' split (pre-training shards have train and eval)");
    const bool train = ctx.split == "train";
    const std::string& dir = train ? cfg_.dir : cfg_.eval_dir;
    if (dir.empty()) throw Error("[data] (hdf5_pretraining): split 'eval' needs the option eval_dir");
    auto files = list_shards(dir);
    preds_ = 0;
    for (const auto& f : files) {
      if (cfg_.seq_len > 0 && f.seq_len > cfg_.seq_len)
        throw Error(
            fmt::format("{}: sequences of {} tokens, but [data] seq_len = {} (data prepared for another phase?)",
                        f.path, f.seq_len, cfg_.seq_len));
      if (!cfg_.dynamic_masking && f.max_predictions == 0)
        throw Error(f.path +
                    ": no masked_lm_positions/masked_lm_ids (written for dynamic masking): set dynamic_masking = true");
      preds_ = std::max<std::int64_t>(preds_, f.max_predictions);
    }
    if (cfg_.dynamic_masking) {
      preds_ = cfg_.max_predictions;
      auto v = Vocab::load(cfg_.vocab);
      mv_.cls_id = v->id("[CLS]");
      mv_.sep_id = v->id("[SEP]");
      mv_.mask_id = v->id("[MASK]");
      mv_.pad_id = v->find("[PAD]") >= 0 ? v->find("[PAD]") : 0;
      mv_.size = v->size();
      mv_.continuation.assign(static_cast<std::size_t>(v->size()), 0);
      for (std::int32_t i = 0; i < v->size(); ++i)
        mv_.continuation[static_cast<std::size_t>(i)] = v->token(i).rfind("##", 0) == 0;
    }
    plan_ = SamplePlan(std::move(files), ctx.batch_size, ctx.rank, ctx.world_size, ctx.seed, train);
    train_ = train;
    if (train && plan_.batches_per_epoch() == 0)
      throw Error(dir + ": " + std::to_string(plan_.total_samples()) + " samples give no full batch of " +
                  std::to_string(ctx.batch_size) + " per rank for " + std::to_string(ctx.world_size) + " rank(s)");
    cache_.clear();
    opened_ = true;
    start_producer(0, 0);
  }

  std::optional<Batch> next_batch() override {
    if (!opened_) throw Error("hdf5_pretraining: next_batch() before open()");
    if (failed_) std::rethrow_exception(failed_);  // the producer stopped on this error
    if (done_) return std::nullopt;
    Item item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty(); });
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    cv_.notify_all();
    if (item.error) {
      failed_ = item.error;
      std::rethrow_exception(item.error);
    }
    if (item.end) {
      done_ = true;
      return std::nullopt;
    }
    epoch_ = item.epoch;
    batch_ = item.index + 1;
    sample_ = batch_ * ctx_.batch_size;
    shard_ = item.last_file;
    if (train_ && batch_ == plan_batches_) epoch_ += 1, batch_ = 0, sample_ = 0;
    return std::move(item.batch);
  }

  std::int64_t epoch() const override { return epoch_; }

  ReaderPosition position() const override {
    return {{"epoch", epoch_}, {"batch", batch_}, {"sample", sample_}, {"shard", shard_}};
  }

  void seek(const ReaderPosition& p) override {
    if (!opened_) throw Error("hdf5_pretraining: seek() before open()");
    auto get = [&](const char* k) {
      auto it = p.find(k);
      if (it == p.end())
        throw Error(std::string("hdf5_pretraining: position has no '") + k + "' (expected epoch and batch)");
      return it->second;
    };
    const std::int64_t e = get("epoch"), b = get("batch");
    if (e < 0 || b < 0 || b > plan_batches_ || (!train_ && e != 0))
      throw Error("hdf5_pretraining: position epoch " + std::to_string(e) + " batch " + std::to_string(b) +
                  " is outside this data (" + std::to_string(plan_batches_) + " batches per epoch)");
    stop_producer();
    start_producer(e, b);
  }

  std::int64_t samples_per_epoch() const override { return opened_ ? plan_samples_ : -1; }

 private:
  struct Item {
    std::int64_t epoch = 0, index = 0, last_file = 0;
    bool end = false;
    std::exception_ptr error;
    Batch batch;
  };

  void start_producer(std::int64_t epoch, std::int64_t index) {
    epoch_ = epoch, batch_ = index, sample_ = index * ctx_.batch_size, shard_ = 0;
    done_ = false;
    failed_ = nullptr;
    stop_ = false;
    queue_.clear();
    plan_batches_ = plan_.batches_per_epoch();
    plan_samples_ = plan_.samples_per_epoch();
    thread_ = std::thread([this, epoch, index] { produce(epoch, index); });
  }

  void stop_producer() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    queue_.clear();
  }

  bool push(Item item) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return stop_ || static_cast<std::int64_t>(queue_.size()) < cfg_.prefetch; });
    if (stop_) return false;
    queue_.push_back(std::move(item));
    lock.unlock();
    cv_.notify_all();
    return true;
  }

  void produce(std::int64_t epoch, std::int64_t index) {
    try {
      while (true) {
        if (index >= plan_batches_) {
          if (!train_) {
            Item end;
            end.end = true;
            push(std::move(end));
            return;
          }
          ++epoch, index = 0;
        }
        Item item;
        item.epoch = epoch;
        item.index = index;
        item.batch = build(epoch, index, item.last_file);
        if (!push(std::move(item))) return;
        ++index;
      }
    } catch (...) {
      Item err;
      err.error = std::current_exception();
      push(std::move(err));
    }
  }

  // The shard holding file f, loaded whole; a few stay cached (one per length bin, plus one).
  std::shared_ptr<const data::ShardArrays> shard(std::int32_t f) {
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if (it->first == f) {
        cache_.splice(cache_.begin(), cache_, it);
        return cache_.front().second;
      }
    auto a =
        std::make_shared<const data::ShardArrays>(data::read_shard(plan_.files()[static_cast<std::size_t>(f)].path));
    cache_.emplace_front(f, a);
    std::size_t bins = 1;
    for (std::size_t i = 1; i < plan_.files().size(); ++i) bins += plan_.files()[i].seq_len != plan_.files()[0].seq_len;
    while (cache_.size() > bins + 1) cache_.pop_back();
    return a;
  }

  Batch build(std::int64_t epoch, std::int64_t index, std::int64_t& last_file) {
    PlannedBatch pb = plan_.batch(epoch, index);
    const auto B = static_cast<std::int64_t>(pb.samples.size());
    const std::int64_t W = pb.seq_len, P = preds_;
    std::vector<std::shared_ptr<const data::ShardArrays>> src(pb.samples.size());
    for (std::size_t s = 0; s < pb.samples.size(); ++s) src[s] = shard(pb.samples[s].file);
    last_file = pb.samples.empty() ? 0 : pb.samples.back().file;

    const auto opts = at::TensorOptions().dtype(at::kLong);
    at::Tensor ids = at::empty({B, W}, opts), types = at::empty({B, W}, opts), mask = at::empty({B, W}, opts);
    at::Tensor pos = at::zeros({B, P}, opts), mids = at::zeros({B, P}, opts), labels = at::empty({B, P}, opts);
    at::Tensor nsp = at::empty({B}, opts);
    std::int64_t *pi = ids.data_ptr<std::int64_t>(), *pt = types.data_ptr<std::int64_t>(),
                 *pm = mask.data_ptr<std::int64_t>();
    std::int64_t *pp = pos.data_ptr<std::int64_t>(), *pd = mids.data_ptr<std::int64_t>(),
                 *pl = labels.data_ptr<std::int64_t>();
    std::int64_t* pn = nsp.data_ptr<std::int64_t>();
    const data::MaskOptions mo{static_cast<std::int32_t>(P), cfg_.masked_lm_prob, cfg_.whole_word_masking};

    parallel_for(pb.samples.size(), static_cast<int>(cfg_.threads), [&](std::size_t s) {
      const data::ShardArrays& a = *src[s];
      const std::int64_t row = pb.samples[s].row, FP = a.max_predictions;
      const std::int32_t* in_ids = a.input_ids.data() + row * W;
      const std::int8_t* in_mask = a.input_mask.data() + row * W;
      const std::int8_t* in_seg = a.segment_ids.data() + row * W;
      const std::int32_t* in_pos = a.masked_lm_positions.data() + row * FP;
      const std::int32_t* in_mid = a.masked_lm_ids.data() + row * FP;
      const std::size_t o = s * static_cast<std::size_t>(W), op = s * static_cast<std::size_t>(P);
      int len = 0;
      for (std::int64_t t = 0; t < W; ++t) {
        pt[o + t] = in_seg[t];
        pm[o + t] = in_mask[t];
        len += in_mask[t] != 0;
      }
      pn[s] = a.next_sentence_labels[static_cast<std::size_t>(row)];
      if (cfg_.dynamic_masking) {
        std::vector<std::int32_t> tok(in_ids, in_ids + W), mp(static_cast<std::size_t>(P)),
            ml(static_cast<std::size_t>(P));
        for (std::int64_t m = 0; m < FP; ++m)  // static shards: restore the original tokens first
          if (in_pos[m] > 0 && in_pos[m] < W) tok[static_cast<std::size_t>(in_pos[m])] = in_mid[m];
        Rng rng(mix_seed({ctx_.seed, static_cast<std::uint64_t>(epoch), 0x5A3B1EULL,
                          static_cast<std::uint64_t>(pb.samples[s].file), static_cast<std::uint64_t>(row)}));
        const int n = data::mask_tokens(tok.data(), len, mv_, mo, rng, mp.data(), ml.data());
        for (std::int64_t t = 0; t < W; ++t) pi[o + t] = tok[static_cast<std::size_t>(t)];
        for (int m = 0; m < n; ++m)
          pp[op + m] = mp[static_cast<std::size_t>(m)], pd[op + m] = ml[static_cast<std::size_t>(m)];
      } else {
        for (std::int64_t t = 0; t < W; ++t) pi[o + t] = in_ids[t];
        for (std::int64_t m = 0; m < std::min(FP, P); ++m) {
          if (in_pos[m] < 0 || in_pos[m] >= W)  // an offset from the file: checked before it indexes anything
            throw Error(fmt::format(
                "{}: row {}: masked_lm_positions holds {}, outside the sequence [0, {}) (corrupt or foreign shard)",
                plan_.files()[pb.samples[s].file].path, row, in_pos[m], W));
          pp[op + m] = in_pos[m], pd[op + m] = in_mid[m];
        }
      }
      // NVIDIA pads positions with 0; position 0 is [CLS] and never masked: -100 there is "no label".
      for (std::int64_t m = 0; m < P; ++m) pl[op + m] = pp[op + m] > 0 ? pd[op + m] : -100;
    });
    Batch b;
    b.tensors["input_ids"] = ids;
    b.tensors["token_type_ids"] = types;
    b.tensors["attention_mask"] = mask;
    b.tensors["masked_lm_positions"] = pos;
    b.tensors["masked_lm_ids"] = mids;
    b.tensors["masked_lm_labels"] = labels;
    b.tensors["next_sentence_labels"] = nsp;
    return b;
  }

  ReaderConfig cfg_;
  DatasetContext ctx_;
  SamplePlan plan_;  // used by the producer thread only (after open)
  data::MaskVocab mv_;
  std::int64_t preds_ = 0;
  bool opened_ = false, train_ = true, done_ = false;
  std::exception_ptr failed_;  // set once the producer failed: every later next_batch() rethrows it
  std::int64_t plan_batches_ = 0, plan_samples_ = 0;
  std::int64_t epoch_ = 0, batch_ = 0, sample_ = 0, shard_ = 0;                         // consumer position
  std::list<std::pair<std::int32_t, std::shared_ptr<const data::ShardArrays>>> cache_;  // producer only
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
};

}  // namespace

std::shared_ptr<DatasetReader> make_reader(const ReaderConfig& config) {
  return std::make_shared<Hdf5PretrainingReader>(config);
}

}  // namespace bertx::hdf5_pretraining
