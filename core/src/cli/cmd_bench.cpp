// cmd_bench.cpp - `bertx bench <what>`: throughput measurements. `bench tokenizer --vocab V --input FILE
// [--threads N] [--cased] [--seconds S]` encodes the file's lines ('\n'-separated) over and over for about
// S seconds (default 2), on one thread and then on N threads (std::thread over contiguous chunks of lines),
// and prints lines/s, MB/s and tokens/s: the number to watch when the data pipeline is input-bound.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "bertx/error.hpp"
#include "bertx/tokenizer.hpp"
#include "commands.hpp"

namespace bertx::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct Counts {
  std::uint64_t lines = 0, bytes = 0, tokens = 0;
};

// Encodes lines[begin, end) repeatedly until `deadline` (at least once).
Counts encode_until(const Tokenizer& tok, const std::vector<std::string_view>& lines, std::size_t begin,
                    std::size_t end, Clock::time_point deadline) {
  Counts c;
  std::vector<std::int32_t> ids;
  do {
    for (std::size_t i = begin; i < end; ++i) {
      ids.clear();
      tok.encode(lines[i], ids);
      c.tokens += ids.size();
      c.bytes += lines[i].size() + 1;
    }
    c.lines += end - begin;
  } while (Clock::now() < deadline);
  return c;
}

void print_row(unsigned threads, const Counts& c, double seconds) {
  std::printf("%7u  %12.0f  %8.2f  %12.0f\n", threads, static_cast<double>(c.lines) / seconds,
              static_cast<double>(c.bytes) / seconds / 1e6, static_cast<double>(c.tokens) / seconds);
}

void bench_tokenizer(const std::string& vocab, const std::string& input, unsigned threads, bool cased, double seconds) {
  TokenizerOptions opts;
  opts.do_lower_case = !cased;
  const Tokenizer tok(Vocab::load(vocab), opts);
  std::ifstream in(input, std::ios::binary);
  if (!in) throw Error("bench tokenizer: cannot open " + input);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.emplace_back(text.data() + pos, nl - pos);
    pos = nl + 1;
  }
  if (lines.empty()) throw Error("bench tokenizer: " + input + " is empty");
  std::printf("tokenizer bench: vocab %s (%d tokens, %s), input %s (%zu lines, %.2f MB), ~%.1f s per row\n",
              vocab.c_str(), tok.vocab().size(), cased ? "cased" : "lower-cased", input.c_str(), lines.size(),
              static_cast<double>(text.size()) / 1e6, seconds);
  std::printf("threads       lines/s      MB/s      tokens/s\n");
  const auto budget = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  encode_until(tok, lines, 0, lines.size(), Clock::now());  // warm-up: one pass (scratch buffers, caches)
  auto t0 = Clock::now();
  Counts one = encode_until(tok, lines, 0, lines.size(), t0 + budget);
  print_row(1, one, std::chrono::duration<double>(Clock::now() - t0).count());
  if (threads <= 1) return;
  std::vector<Counts> per(threads);
  std::vector<std::thread> pool;
  t0 = Clock::now();
  for (unsigned t = 0; t < threads; ++t) {
    const std::size_t b = lines.size() * t / threads, e = lines.size() * (t + 1) / threads;
    pool.emplace_back([&, t, b, e] { per[t] = encode_until(tok, lines, b, e, t0 + budget); });
  }
  for (auto& th : pool) th.join();
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  Counts all;
  for (const auto& c : per) {
    all.lines += c.lines;
    all.bytes += c.bytes;
    all.tokens += c.tokens;
  }
  print_row(threads, all, dt);
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  CLI::App* bench =
      app.add_subcommand("bench", "measure throughput (tokenizer, data, model training, inference, store)");
  bench->require_subcommand(1);
  add_bench_data_command(*bench, exit_code);       // `bench data`: cmd_data.cpp
  add_bench_model_command(*bench, exit_code);      // `bench model`: cmd_bench_model.cpp
  add_bench_inference_command(*bench, exit_code);  // `bench inference`: cmd_bench_inference.cpp
  add_bench_store_command(*bench, exit_code);      // `bench store`: cmd_bench_store.cpp

  struct TokArgs {
    std::string vocab, input;
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    bool cased = false;
    double seconds = 2.0;
  };
  auto ta = std::make_shared<TokArgs>();
  CLI::App* tok = bench->add_subcommand("tokenizer", "WordPiece encode throughput on a text file's lines");
  tok->add_option("--vocab", ta->vocab, "vocab.txt")->required();
  tok->add_option("--input", ta->input, "text file, one input per line")->required();
  tok->add_option("--threads", ta->threads, "threads of the second row (default: one per core)")
      ->check(CLI::PositiveNumber);
  tok->add_flag("--cased", ta->cased, "keep case (cased vocabs)");
  tok->add_option("--seconds", ta->seconds, "time per row")->check(CLI::PositiveNumber);
  tok->callback([ta, &exit_code] {
    bench_tokenizer(ta->vocab, ta->input, ta->threads, ta->cased, ta->seconds);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
