// cmd_data.cpp - `bertx data wikipedia|pretrain` (corpus preparation) and `bertx bench data` (instances/s of
// the pretrain pipeline). The work is in core/src/data; this file maps flags to option structs and prints
// the summary.
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "bertx/error.hpp"
#include "commands.hpp"
#include "data/pretrain.hpp"
#include "data/progress.hpp"
#include "data/wiki_dump.hpp"

namespace bertx::cli {

namespace {

namespace fs = std::filesystem;
using data::PretrainOptions;

struct PretrainArgs {
  std::vector<std::string> inputs;
  std::vector<double> weights;
  std::string format = "auto";
  PretrainOptions o;
};

// Flags shared by `data pretrain` and `bench data`.
void add_pretrain_flags(CLI::App* cmd, PretrainArgs& a, bool need_out) {
  auto& o = a.o;
  cmd->add_option("--input", a.inputs, "corpus file or folder (repeat to mix corpora)")->required();
  cmd->add_option("--weights", a.weights, "one weight per --input: relative use of its documents (default 1)");
  cmd->add_option("--vocab", o.vocab, "vocab.txt")->required();
  cmd->add_flag("--cased", o.cased, "keep case (cased vocab); default lower-cases");
  cmd->add_option("--format", a.format, "document boundaries: line (one per line), blank (blank lines), auto")
      ->check(CLI::IsMember({"auto", "line", "blank"}))
      ->capture_default_str();
  cmd->add_option("--seq-len", o.instances.seq_len, "max tokens per instance")->capture_default_str();
  cmd->add_option("--max-preds", o.instances.mask.max_predictions, "max masked positions per instance")
      ->capture_default_str();
  cmd->add_option("--dupe-factor", o.instances.dupe_factor, "passes over the corpus")->capture_default_str();
  cmd->add_option("--short-seq-prob", o.instances.short_seq_prob, "probability of a shorter target length")
      ->capture_default_str();
  cmd->add_option("--masked-lm-prob", o.instances.mask.masked_lm_prob, "fraction of tokens to predict")
      ->capture_default_str();
  cmd->add_option("--seed", o.instances.seed, "random seed")->capture_default_str();
  cmd->add_option("--threads", o.threads, "threads (0 = one per core)")->capture_default_str();
  cmd->add_flag("--whole-word", o.instances.mask.whole_word, "whole-word masking");
  cmd->add_flag("--dynamic-masking", o.instances.dynamic_masking,
                "store unmasked instances; the reader masks per epoch");
  cmd->add_option("--bin-size", o.bin_size, "length bins of this width, one file each (phase 2: 64); 0 = none")
      ->capture_default_str();
  cmd->add_option("--shards", o.shards, "output shards (0 = one per 16M corpus tokens)")->capture_default_str();
  cmd->add_option("--gzip-level", o.gzip_level, "HDF5 deflate level 0..9")->capture_default_str();
  if (need_out) cmd->add_option("--out", o.out, "output folder")->required();
}

PretrainOptions resolve(const PretrainArgs& a) {
  PretrainOptions o = a.o;
  if (!a.weights.empty() && a.weights.size() != a.inputs.size())
    throw Error("--weights: " + std::to_string(a.weights.size()) + " weights for " + std::to_string(a.inputs.size()) +
                " --input values (give one per input)");
  o.inputs.clear();
  for (std::size_t i = 0; i < a.inputs.size(); ++i)
    o.inputs.push_back({a.inputs[i], a.weights.empty() ? 1.0 : a.weights[i]});
  o.format = a.format == "line"    ? data::DocFormat::Line
             : a.format == "blank" ? data::DocFormat::Blank
                                   : data::DocFormat::Auto;
  return o;
}

// The pipeline allocates and frees buffers of tens of MB; glibc would mmap/munmap each (a page fault per
// 4 KiB on every reuse). Keeping them in the heap makes `data pretrain` ~20% faster.
void keep_large_allocations() {
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

data::ProgressFn progress_to(data::ProgressLog& log) {
  return [&log](const char* phase, std::int64_t done, std::int64_t total, const char* unit) {
    log.update(phase, done, total, unit);
  };
}

void print_summary(const PretrainOptions& o, const data::PretrainStats& s) {
  for (const auto& e : s.corpus.examples) spdlog::warn("skipped {}", e);
  const double m = s.masked ? static_cast<double>(s.masked) : 1.0;
  std::printf("corpus     %lld files, %s, %lld documents, %lld sentences, %lld tokens\n",
              static_cast<long long>(s.corpus.files),
              data::ProgressLog::format_bytes(static_cast<double>(s.corpus.bytes)).c_str(),
              static_cast<long long>(s.documents), static_cast<long long>(s.sentences),
              static_cast<long long>(s.tokens));
  std::printf("skipped    %lld non-UTF-8 lines, %lld empty documents\n",
              static_cast<long long>(s.corpus.non_utf8_lines), static_cast<long long>(s.corpus.empty_documents));
  std::printf("instances  %lld in %zu files (seq %d), %lld tokens\n", static_cast<long long>(s.instances),
              s.files.size(), o.instances.seq_len, static_cast<long long>(s.instance_tokens));
  if (o.instances.dynamic_masking)
    std::printf("masking    dynamic (done by the reader each epoch)\n");
  else
    std::printf("masking    %.2f%% of tokens: %.1f%% [MASK], %.1f%% random, %.1f%% kept\n", 100.0 * s.masked_ratio(),
                100.0 * s.masked_as_mask / m, 100.0 * s.masked_as_random / m, 100.0 * s.masked_kept / m);
  std::printf("NSP        %.2f%% random next\n", 100.0 * s.random_next_share());
  std::printf("time       %.2f s (tokenize %.2f, instances %.2f, write %.2f): %.0f instances/s\n", s.total_seconds,
              s.read_seconds, s.create_seconds, s.write_seconds,
              s.total_seconds > 0 ? s.instances / s.total_seconds : 0.0);
}

}  // namespace

void add_data_command(CLI::App& app, int& exit_code) {
  CLI::App* data_cmd = app.add_subcommand("data", "prepare pre-training data (Wikipedia dumps, HDF5 instance shards)");
  data_cmd->require_subcommand(1);

  auto wa = std::make_shared<data::WikipediaOptions>();
  CLI::App* wiki =
      data_cmd->add_subcommand("wikipedia", "bz2 XML dump -> cleaned article text, one article per line, sharded");
  wiki->add_option("--dump", wa->dump, "enwiki-*-pages-articles*.xml.bz2 (or .xml)")->required();
  wiki->add_option("--out", wa->out, "output folder")->required();
  wiki->add_option("--shards", wa->shards, "text shards (0 = one per 64 MiB of dump)")->capture_default_str();
  wiki->add_option("--min-chars", wa->min_chars, "skip articles shorter than this after cleaning")
      ->capture_default_str();
  wiki->add_option("--threads", wa->threads, "cleaning threads (0 = one per core)")->capture_default_str();
  wiki->callback([wa, &exit_code] {
    data::ProgressLog log("wikipedia");
    auto st = data::run_wikipedia(*wa, [&log](std::uint64_t done, std::uint64_t total, std::int64_t) {
      log.update("read", static_cast<std::int64_t>(done), static_cast<std::int64_t>(total), "B");
    });
    std::printf(
        "pages %lld: %lld articles kept, %lld redirects, %lld in other namespaces, %lld empty after cleaning, %lld too "
        "short\n",
        static_cast<long long>(st.pages), static_cast<long long>(st.articles), static_cast<long long>(st.redirects),
        static_cast<long long>(st.other_namespaces), static_cast<long long>(st.empty),
        static_cast<long long>(st.too_short));
    std::printf("wrote %s of text in %zu shards to %s (%.1f s)\n",
                data::ProgressLog::format_bytes(static_cast<double>(st.bytes_out)).c_str(), st.shard_bytes.size(),
                wa->out.c_str(), st.seconds);
    exit_code = 0;
  });

  auto pa = std::make_shared<PretrainArgs>();
  CLI::App* pre =
      data_cmd->add_subcommand("pretrain", "corpus -> masked-LM/NSP instances in NVIDIA-layout HDF5 shards");
  add_pretrain_flags(pre, *pa, true);
  pre->callback([pa, &exit_code] {
    PretrainOptions o = resolve(*pa);
    keep_large_allocations();
    data::ProgressLog log("pretrain");
    auto st = data::run_pretrain(o, progress_to(log));
    print_summary(o, st);
    std::printf("wrote      %s/stats.json\n", o.out.c_str());
    exit_code = 0;
  });
}

void add_bench_data_command(CLI::App& bench, int& exit_code) {
  auto pa = std::make_shared<PretrainArgs>();
  CLI::App* cmd = bench.add_subcommand("data", "instances/s of `data pretrain` (output to a temporary folder)");
  add_pretrain_flags(cmd, *pa, false);
  cmd->add_option("--out", pa->o.out, "output folder (default: a temporary folder, removed afterwards)");
  cmd->callback([pa, &exit_code] {
    PretrainOptions o = resolve(*pa);
    keep_large_allocations();
    std::string tmp;
    if (o.out.empty()) {
      char tmpl[] = "/tmp/bertx_bench_data_XXXXXX";
      if (!mkdtemp(tmpl)) throw Error("bench data: cannot create a temporary folder under /tmp");
      tmp = o.out = tmpl;
    }
    struct Cleanup {
      std::string dir;
      ~Cleanup() {
        std::error_code ec;
        if (!dir.empty()) fs::remove_all(dir, ec);
      }
    } cleanup{tmp};
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::printf("bench data: %d thread(s), seq %d, dupe factor %d\n", threads, o.instances.seq_len,
                o.instances.dupe_factor);
    data::ProgressLog log("bench");
    auto st = data::run_pretrain(o, progress_to(log));
    print_summary(o, st);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
