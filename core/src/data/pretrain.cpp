// pretrain.cpp - the `data pretrain` pipeline: tokenize (parallel by document chunks), assign documents to
// shards (seeded permutation, balanced by tokens), create instances (parallel by (pass, document) units,
// each with its own seed), shuffle, split into length bins, gather rows and write HDF5 shards.
#include "data/pretrain.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "bertx/tokenizer.hpp"
#include "bertx/data/hdf5_shard.hpp"
#include "bertx/parallel.hpp"
#include "base/fs_util.hpp"

namespace bertx::data {

namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

MaskVocab mask_vocab(const Vocab& v) {
  MaskVocab m;
  m.cls_id = v.id("[CLS]");
  m.sep_id = v.id("[SEP]");
  m.mask_id = v.id("[MASK]");
  m.pad_id = v.find("[PAD]") >= 0 ? v.find("[PAD]") : 0;
  m.size = v.size();
  m.continuation.resize(static_cast<std::size_t>(v.size()));
  for (std::int32_t i = 0; i < v.size(); ++i)
    m.continuation[static_cast<std::size_t>(i)] = v.token(i).rfind("##", 0) == 0;
  return m;
}

void check_options(const PretrainOptions& o) {
  const auto& in = o.instances;
  if (in.seq_len < 8 || in.seq_len > 65535)
    throw Error("--seq-len " + std::to_string(in.seq_len) + ": expected 8..65535");
  if (in.mask.max_predictions < 1 || in.mask.max_predictions > in.seq_len)
    throw Error("--max-preds " + std::to_string(in.mask.max_predictions) + ": expected 1..seq-len");
  if (in.dupe_factor < 1) throw Error("--dupe-factor " + std::to_string(in.dupe_factor) + ": expected >= 1");
  if (!(in.short_seq_prob >= 0 && in.short_seq_prob <= 1))
    throw Error("--short-seq-prob: expected a probability in [0, 1]");
  if (!(in.mask.masked_lm_prob > 0 && in.mask.masked_lm_prob < 1))
    throw Error("--masked-lm-prob: expected a probability in (0, 1)");
  if (o.bin_size < 0 || (o.bin_size > 0 && o.bin_size < 8))
    throw Error("--bin-size " + std::to_string(o.bin_size) + ": expected 0 (no bins) or >= 8");
  if (o.gzip_level < 0 || o.gzip_level > 9) throw Error("--gzip-level: expected 0..9");
  if (o.out.empty()) throw Error("--out: an output folder is required");
}

// Documents -> shards: a seeded permutation of the documents cut into runs of about equal token counts.
std::vector<std::vector<std::uint32_t>> assign_shards(const Documents& docs, int shards, std::uint64_t seed) {
  std::vector<std::uint32_t> order(docs.num_docs());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  Rng rng(mix_seed({seed, 0xD0C5ULL}));
  rng.shuffle(order.begin(), order.end());
  const double total = static_cast<double>(docs.tokens.size());
  std::vector<std::vector<std::uint32_t>> out(static_cast<std::size_t>(shards));
  double cum = 0;
  for (std::uint32_t d : order) {
    auto k = static_cast<std::size_t>(std::min<double>(shards - 1, std::floor(cum / total * shards)));
    out[k].push_back(d);
    cum += static_cast<double>(docs.doc_tokens(d));
  }
  return out;
}

std::string shard_name(int shard, int bin) {
  char buf[48];
  if (bin < 0)
    std::snprintf(buf, sizeof buf, "shard-%05d.hdf5", shard);
  else
    std::snprintf(buf, sizeof buf, "shard-%05d-bin-%02d.hdf5", shard, bin);
  return buf;
}

}  // namespace

PretrainStats run_pretrain(const PretrainOptions& o, const ProgressFn& progress) {
  check_options(o);
  const auto t_start = std::chrono::steady_clock::now();
  PretrainStats st;
  auto vocab = Vocab::load(o.vocab);
  const MaskVocab mv = mask_vocab(*vocab);  // throws "vocab <path>: no token '[MASK]'"
  Tokenizer tokenizer(vocab, TokenizerOptions{.do_lower_case = !o.cased});
  const int threads = resolve_threads(o.threads);
  prepare_output_dir(o.out, "shard-", ".hdf5");

  // 1. Read and tokenize.
  CorpusOptions co{o.inputs, o.format, threads};
  Documents docs = read_corpus(co, tokenizer, st.corpus, [&](std::int64_t done, std::int64_t total) {
    if (progress) progress("tokenize", done, total, "B");
  });
  st.documents = static_cast<std::int64_t>(docs.num_docs());
  st.sentences = static_cast<std::int64_t>(docs.num_sentences());
  st.tokens = static_cast<std::int64_t>(docs.tokens.size());
  st.read_seconds = seconds_since(t_start);

  int shards =
      o.shards > 0 ? o.shards : static_cast<int>(std::max<std::int64_t>(1, (st.tokens + (16 << 20) - 1) >> 24));
  shards = static_cast<int>(std::min<std::int64_t>(shards, st.documents));  // no empty shards
  const auto shard_docs = assign_shards(docs, shards, o.instances.seed);
  const std::int32_t S = o.instances.seq_len, P = o.instances.mask.max_predictions;
  const int n_bins = o.bin_size > 0 ? (S + o.bin_size - 1) / o.bin_size : 1;

  std::int64_t docs_done = 0;
  for (int k = 0; k < shards; ++k) {
    // 2. Instances of this shard's (pass, document, repeat) units, in unit order.
    auto t0 = std::chrono::steady_clock::now();
    struct Unit {
      std::uint32_t doc;
      std::int32_t pass, repeat;
    };
    std::vector<Unit> units;
    for (int pass = 0; pass < o.instances.dupe_factor; ++pass)
      for (std::uint32_t d : shard_docs[static_cast<std::size_t>(k)]) {
        const int reps = document_repeats(docs.doc_weight[d], o.instances.seed, pass, d);
        for (int r = 0; r < reps; ++r) units.push_back({d, pass, r});
      }
    // Groups of units, about 8 per thread (output never depends on the grouping: each unit has its own seed).
    const std::size_t per_group = std::max<std::size_t>(64, units.size() / (static_cast<std::size_t>(threads) * 8));
    const std::size_t groups = (units.size() + per_group - 1) / per_group;
    std::vector<Instances> parts(groups);
    parallel_for(groups, threads, [&](std::size_t g) {
      Instances& part = parts[g];
      part.init(S, P);
      const std::size_t u0 = g * per_group, u1 = std::min(units.size(), (g + 1) * per_group);
      std::uint64_t tokens = 0;
      for (std::size_t u = u0; u < u1; ++u) tokens += docs.doc_tokens(units[u].doc);
      const auto rows_guess = static_cast<std::size_t>(static_cast<double>(tokens) / (0.85 * (S - 3))) + (u1 - u0);
      part.reserve(rows_guess, static_cast<std::size_t>(static_cast<double>(tokens) * 1.1) + rows_guess * 3);
      for (std::size_t u = u0; u < u1; ++u) {
        Rng rng = unit_rng(o.instances.seed, units[u].pass, units[u].doc, units[u].repeat);
        create_instances_from_document(docs, units[u].doc, o.instances, mv, rng, part);
      }
    });
    // Rows in unit order as (part, row) references, then shuffled.
    struct Ref {
      std::uint32_t part, row;
    };
    std::vector<Ref> order;
    for (std::size_t g = 0; g < parts.size(); ++g)
      for (std::size_t r = 0; r < parts[g].size(); ++r)
        order.push_back({static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(r)});
    Rng shuffle_rng(mix_seed({o.instances.seed, 0x5F0FF1EULL, static_cast<std::uint64_t>(k)}));
    shuffle_rng.shuffle(order.begin(), order.end());
    st.create_seconds += seconds_since(t0);

    // 3. Length bins (stable: each keeps the shuffled order), gather rows, write.
    t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<Ref>> bins(static_cast<std::size_t>(n_bins));
    for (const Ref& ref : order) {
      const int b = o.bin_size > 0 ? (parts[ref.part].length[ref.row] - 1) / o.bin_size : 0;
      bins[static_cast<std::size_t>(b)].push_back(ref);
    }
    order = {};
    for (int b = 0; b < n_bins; ++b) {
      const auto& rows = bins[static_cast<std::size_t>(b)];
      if (rows.empty() && o.bin_size > 0) continue;
      const std::int32_t W = o.bin_size > 0 ? std::min(S, (b + 1) * o.bin_size) : S;
      const std::int32_t PW = o.instances.dynamic_masking ? 0 : P;
      // Summary counts, in parallel over blocks of rows.
      struct Counts {
        std::int64_t tokens = 0, random_next = 0, masked = 0, as_mask = 0, kept = 0;
      };
      const std::size_t blocks = (rows.size() + 4095) / 4096;
      std::vector<Counts> counts(blocks);
      parallel_for(blocks, threads, [&](std::size_t blk) {
        Counts& c = counts[blk];
        for (std::size_t r = blk * 4096; r < std::min(rows.size(), (blk + 1) * 4096); ++r) {
          const Instances& inst = parts[rows[r].part];
          const std::uint32_t i = rows[r].row;
          const std::int32_t* src = inst.row(i);
          c.tokens += inst.length[i];
          c.random_next += inst.random_next[i];
          const int nm = inst.n_masked[i];
          c.masked += nm;
          const std::int32_t* mp = inst.mpos.data() + static_cast<std::size_t>(i) * P;
          const std::int32_t* ml = inst.mids.data() + static_cast<std::size_t>(i) * P;
          for (int m = 0; m < nm; ++m) {
            c.as_mask += src[mp[m]] == mv.mask_id;
            c.kept += src[mp[m]] == ml[m];
          }
        }
      });
      for (const Counts& c : counts) {
        st.instance_tokens += c.tokens;
        st.random_next += c.random_next;
        st.masked += c.masked;
        st.masked_as_mask += c.as_mask;
        st.masked_kept += c.kept;
        st.masked_as_random += c.masked - c.as_mask - c.kept;
      }
      // Rows are produced chunk by chunk by the writer (no full copy of the shard in memory).
      ShardSource source;
      source.n = static_cast<std::int64_t>(rows.size());
      source.seq_len = W;
      source.max_predictions = PW;
      source.fill = [&](ShardField f, std::int64_t first, std::int64_t count, void* out) {
        for (std::int64_t r = 0; r < count; ++r) {
          const Ref ref = rows[static_cast<std::size_t>(first + r)];
          const Instances& inst = parts[ref.part];
          const int len = inst.length[ref.row], bs = inst.b_start[ref.row];
          const std::int32_t* mp = inst.mpos.data() + static_cast<std::size_t>(ref.row) * P;
          const std::int32_t* ml = inst.mids.data() + static_cast<std::size_t>(ref.row) * P;
          auto* i32 = static_cast<std::int32_t*>(out);
          auto* i8 = static_cast<std::int8_t*>(out);
          switch (f) {  // `out` arrives zeroed: only non-zero values are written
            case ShardField::InputIds:
              std::copy(inst.row(ref.row), inst.row(ref.row) + len, i32 + r * W);
              break;
            case ShardField::InputMask:
              std::fill(i8 + r * W, i8 + r * W + len, 1);
              break;
            case ShardField::SegmentIds:
              std::fill(i8 + r * W + bs, i8 + r * W + len, 1);
              break;
            case ShardField::MaskedLmPositions:
              std::copy(mp, mp + P, i32 + r * P);
              break;
            case ShardField::MaskedLmIds:
              std::copy(ml, ml + P, i32 + r * P);
              break;
            case ShardField::NextSentenceLabels:
              i8[r] = static_cast<std::int8_t>(inst.random_next[ref.row]);
              break;
          }
        }
      };
      const std::string name = shard_name(k, o.bin_size > 0 ? b : -1);
      write_shard((fs::path(o.out) / name).string(), source, ShardWriteOptions{o.gzip_level, threads});
      st.instances += source.n;
      st.files.push_back({name, source.n, W});
    }
    st.write_seconds += seconds_since(t0);
    docs_done += static_cast<std::int64_t>(shard_docs[static_cast<std::size_t>(k)].size());
    if (progress) progress("instances", docs_done, st.documents, "docs");
  }
  st.total_seconds = seconds_since(t_start);
  write_file_atomic((fs::path(o.out) / "stats.json").string(), pretrain_stats_json(o, st));
  return st;
}

std::string pretrain_stats_json(const PretrainOptions& o, const PretrainStats& st) {
  using nlohmann::json;
  const double m = st.masked ? static_cast<double>(st.masked) : 1.0;
  json inputs = json::array();
  for (const auto& in : o.inputs) inputs.push_back({{"path", in.path}, {"weight", in.weight}});
  json files = json::array();
  for (const auto& f : st.files)
    files.push_back({{"file", f.name}, {"instances", f.instances}, {"seq_len", f.seq_len}});
  json j = {
      {"inputs", inputs},
      {"vocab", o.vocab},
      {"options",
       {{"seq_len", o.instances.seq_len},
        {"max_predictions", o.instances.mask.max_predictions},
        {"dupe_factor", o.instances.dupe_factor},
        {"short_seq_prob", o.instances.short_seq_prob},
        {"masked_lm_prob", o.instances.mask.masked_lm_prob},
        {"whole_word_masking", o.instances.mask.whole_word},
        {"dynamic_masking", o.instances.dynamic_masking},
        {"bin_size", o.bin_size},
        {"cased", o.cased},
        {"seed", o.instances.seed}}},
      {"documents", st.documents},
      {"sentences", st.sentences},
      {"tokens", st.tokens},
      {"instances", st.instances},
      {"instance_tokens", st.instance_tokens},
      {"masked_tokens", st.masked},
      {"masked_ratio", st.masked_ratio()},
      {"mask_split",
       {{"mask", st.masked_as_mask / m}, {"random", st.masked_as_random / m}, {"kept", st.masked_kept / m}}},
      {"nsp_random_next", st.random_next},
      {"nsp_random_share", st.random_next_share()},
      {"skipped",
       {{"non_utf8_lines", st.corpus.non_utf8_lines},
        {"empty_documents", st.corpus.empty_documents},
        {"examples", st.corpus.examples}}},
      {"input_files", st.corpus.files},
      {"input_lines", st.corpus.lines},
      {"input_bytes", st.corpus.bytes},
      {"files", files},
      {"seconds",
       {{"tokenize", st.read_seconds},
        {"instances", st.create_seconds},
        {"write", st.write_seconds},
        {"total", st.total_seconds}}},
      {"instances_per_second", st.total_seconds > 0 ? st.instances / st.total_seconds : 0.0},
  };
  return j.dump(2) + "\n";
}

}  // namespace bertx::data
