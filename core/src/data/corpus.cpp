// corpus.cpp - block-wise reading of text corpora, UTF-8 checks, sentence splitting and parallel WordPiece
// tokenization. Blocks end at a document boundary; documents of a block are tokenized in parallel chunks
// whose results are appended in order, so the store never depends on the thread count.
#include "data/corpus.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "bertx/error.hpp"
#include "bertx/tokenizer.hpp"
#include "bertx/parallel.hpp"
#include "data/text.hpp"

namespace bertx::data {

namespace fs = std::filesystem;

void Documents::append(const Documents& o) {
  const std::uint64_t tok_base = tokens.size(), sent_base = num_sentences();
  tokens.insert(tokens.end(), o.tokens.begin(), o.tokens.end());
  for (std::size_t i = 1; i < o.sentence_start.size(); ++i) sentence_start.push_back(tok_base + o.sentence_start[i]);
  for (std::size_t i = 1; i < o.doc_start.size(); ++i) doc_start.push_back(sent_base + o.doc_start[i]);
  doc_weight.insert(doc_weight.end(), o.doc_weight.begin(), o.doc_weight.end());
}

std::vector<std::string> list_corpus_files(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  if (!fs::is_directory(path, ec)) throw Error(path + ": no such file or folder");
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    const std::string ext = it->path().extension().string();
    if (it->is_regular_file() && ext != ".json" && ext != ".tmp") files.push_back(it->path().string());
  }
  if (ec) throw Error(path + ": cannot list folder: " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error(path + ": folder holds no text file");
  return files;
}

void prepare_output_dir(const std::string& dir, const std::string& prefix, const std::string& suffix) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create output folder: " + ec.message());
  int stale = 0;
  std::string example;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      if (stale++ == 0) example = name;
    }
  }
  if (stale)
    throw Error(dir + ": already holds " + std::to_string(stale) + " file(s) like " + example +
                " from an earlier run; remove them or choose another output folder");
}

namespace {

struct Line {
  std::string_view text;
  std::int64_t number;  // 1-based line number in its file
};
struct DocLines {
  std::size_t begin, end;  // range of lines
};

bool blank(std::string_view s) { return trim(s).empty(); }

DocFormat detect_format(std::string_view head) {
  bool text_before = false, blank_seen = false;
  std::size_t pos = 0;
  while (pos < head.size()) {
    std::size_t nl = head.find('\n', pos);
    if (nl == std::string_view::npos) break;  // the last (maybe partial) line does not count
    std::string_view line = head.substr(pos, nl - pos);
    pos = nl + 1;
    if (blank(line))
      blank_seen = text_before;
    else if (blank_seen)
      return DocFormat::Blank;
    else
      text_before = true;
  }
  return DocFormat::Line;
}

// Tokenizes documents [first, last) of `docs` into `out`, counting non-UTF-8 lines.
struct ChunkResult {
  Documents docs;
  std::int64_t non_utf8 = 0, empty_docs = 0;
  std::vector<std::string> examples;
};

void tokenize_docs(const std::vector<Line>& lines, const std::vector<DocLines>& docs, std::size_t first,
                   std::size_t last, const Tokenizer& tok, float weight, const std::string& file, ChunkResult& r) {
  std::vector<std::string_view> sentences;
  std::vector<std::int32_t> ids;
  for (std::size_t d = first; d < last; ++d) {
    const std::size_t sent_before = r.docs.num_sentences();
    for (std::size_t l = docs[d].begin; l < docs[d].end; ++l) {
      const Line& line = lines[l];
      const std::size_t bad = find_invalid_utf8(line.text);
      if (bad != std::string_view::npos) {
        ++r.non_utf8;
        if (r.examples.size() < 5)
          r.examples.push_back(file + ":" + std::to_string(line.number) + ": not UTF-8 (byte " +
                               std::to_string(bad + 1) + " of the line); line skipped");
        continue;
      }
      sentences.clear();
      split_sentences(line.text, sentences);
      for (std::string_view s : sentences) {
        ids.clear();
        tok.encode(s, ids);
        if (ids.empty()) continue;
        r.docs.tokens.insert(r.docs.tokens.end(), ids.begin(), ids.end());
        r.docs.sentence_start.push_back(r.docs.tokens.size());
      }
    }
    if (r.docs.num_sentences() == sent_before) {
      ++r.empty_docs;
      continue;
    }
    r.docs.doc_start.push_back(r.docs.num_sentences());
    r.docs.doc_weight.push_back(weight);
  }
}

}  // namespace

Documents read_corpus(const CorpusOptions& o, const Tokenizer& tok, CorpusStats& st,
                      const std::function<void(std::int64_t, std::int64_t)>& progress) {
  if (o.inputs.empty()) throw Error("no corpus input given");
  struct FileJob {
    std::string path;
    float weight;
    std::int64_t size;
  };
  std::vector<FileJob> jobs;
  std::int64_t total = 0;
  std::string names;
  for (const CorpusInput& in : o.inputs) {
    if (!(in.weight > 0)) throw Error(in.path + ": corpus weight must be > 0 (got " + std::to_string(in.weight) + ")");
    names += (names.empty() ? "" : ", ") + in.path;
    for (std::string& f : list_corpus_files(in.path)) {
      std::error_code ec;
      auto size = static_cast<std::int64_t>(fs::file_size(f, ec));
      total += size;
      jobs.push_back({std::move(f), static_cast<float>(in.weight), size});
    }
  }
  const int threads = resolve_threads(o.threads);
  constexpr std::size_t kBlock = 8u << 20;
  Documents all;
  std::int64_t done = 0;
  std::vector<char> buf;
  for (const FileJob& job : jobs) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(job.path.c_str(), "rb"), &std::fclose);
    if (!f) throw Error(job.path + ": cannot open: " + std::strerror(errno));
    ++st.files;
    huge_vector<char> carry;      // text after the last complete document of the previous block
    std::int64_t carry_line = 1;  // line number of carry's first line
    DocFormat format = o.format;
    bool eof = false;
    while (!eof) {
      huge_vector<char> text = std::move(carry);
      carry = {};
      const std::size_t old = text.size();
      text.resize(old + kBlock);
      const std::size_t got = std::fread(text.data() + old, 1, kBlock, f.get());
      text.resize(old + got);
      if (got < kBlock) {
        if (std::ferror(f.get())) throw Error(job.path + ": read error: " + std::strerror(errno));
        eof = true;
      }
      done += static_cast<std::int64_t>(got);
      st.bytes += static_cast<std::int64_t>(got);
      if (format == DocFormat::Auto)
        format = detect_format(std::string_view(text.data(), std::min<std::size_t>(text.size(), 1u << 20)));
      // Lines of this block; the unfinished tail (and, for Blank, the unfinished document) is carried over.
      std::vector<Line> lines;
      std::vector<DocLines> docs;
      std::string_view view(text.data(), text.size());
      std::size_t pos = 0, doc_begin = 0, complete_until = 0;
      std::int64_t number = carry_line;
      std::int64_t complete_line = carry_line;
      while (pos < view.size()) {
        std::size_t nl = view.find('\n', pos);
        if (nl == std::string_view::npos) {
          if (!eof) break;
          nl = view.size();
        }
        std::string_view line = view.substr(pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        pos = nl + 1;
        ++st.lines;
        if (blank(line)) {
          if (lines.size() > doc_begin) docs.push_back({doc_begin, lines.size()});
          doc_begin = lines.size();
          complete_until = std::min(pos, view.size()), complete_line = number + 1;
        } else {
          lines.push_back({line, number});
          if (format == DocFormat::Line) {
            docs.push_back({doc_begin, lines.size()});
            doc_begin = lines.size();
            complete_until = std::min(pos, view.size()), complete_line = number + 1;
          }
        }
        ++number;
      }
      if (eof) {
        if (lines.size() > doc_begin) docs.push_back({doc_begin, lines.size()});
        complete_until = view.size();
      } else {
        // Lines after complete_until are read again with the next block: uncount them.
        st.lines -= number - complete_line;
        carry.assign(view.begin() + static_cast<std::ptrdiff_t>(complete_until), view.end());
        carry_line = complete_line;
        if (complete_until == 0 && carry.size() > (512u << 20))
          throw Error(job.path + ":" + std::to_string(carry_line) + ": a document longer than 512 MiB");
      }
      // Tokenize this block's documents in parallel chunks, appended in order.
      const std::size_t chunk_docs = std::max<std::size_t>(1, docs.size() / (static_cast<std::size_t>(threads) * 8));
      const std::size_t chunks = (docs.size() + chunk_docs - 1) / chunk_docs;
      std::vector<ChunkResult> results(chunks);
      parallel_for(chunks, threads, [&](std::size_t c) {
        tokenize_docs(lines, docs, c * chunk_docs, std::min(docs.size(), (c + 1) * chunk_docs), tok, job.weight,
                      job.path, results[c]);
      });
      for (ChunkResult& r : results) {
        all.append(r.docs);
        st.non_utf8_lines += r.non_utf8;
        st.empty_documents += r.empty_docs;
        for (std::string& e : r.examples)
          if (st.examples.size() < 10) st.examples.push_back(std::move(e));
      }
      if (progress) progress(done, total);
    }
  }
  if (all.num_docs() == 0)
    throw Error(names + ": empty corpus: no document with text (" + std::to_string(st.lines) + " lines read, " +
                std::to_string(st.non_utf8_lines) + " skipped as not UTF-8)");
  return all;
}

}  // namespace bertx::data
