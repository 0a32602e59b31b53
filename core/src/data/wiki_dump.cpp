// wiki_dump.cpp - bz2 (multistream) decompression with libbz2, page splitting of the XML stream, and the
// `data wikipedia` pipeline (reader thread = caller, cleaning on worker threads, output in dump order).
#include "data/wiki_dump.hpp"

#include <bzlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <thread>

#include <nlohmann/json.hpp>

#include "bertx/error.hpp"
#include "data/corpus.hpp"
#include "data/wikitext.hpp"
#include "base/fs_util.hpp"

namespace bertx::data {

namespace fs = std::filesystem;

struct CompressedReader::Bz {
  bz_stream s{};
};

CompressedReader::CompressedReader(const std::string& path) : path_(path), in_(1 << 20), bz_(std::make_unique<Bz>()) {
  f_ = std::fopen(path.c_str(), "rb");
  if (!f_) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) file_size_ = static_cast<std::uint64_t>(st.st_size);
  in_len_ = std::fread(in_.data(), 1, in_.size(), f_);
  bz2_ = in_len_ >= 3 && std::memcmp(in_.data(), "BZh", 3) == 0;
}

CompressedReader::~CompressedReader() {
  if (stream_open_) BZ2_bzDecompressEnd(&bz_->s);
  if (f_) std::fclose(f_);
}

// Refills the input buffer (keeps nothing: called only when it is fully consumed). Returns bytes read.
std::size_t CompressedReader::fill() {
  consumed_ += in_len_;
  in_pos_ = 0;
  in_len_ = eof_ ? 0 : std::fread(in_.data(), 1, in_.size(), f_);
  if (in_len_ == 0) {
    if (std::ferror(f_))
      throw Error(path_ + ": read error at byte " + std::to_string(consumed_) + ": " + std::strerror(errno));
    eof_ = true;
  }
  return in_len_;
}

std::size_t CompressedReader::read(char* buf, std::size_t n) {
  if (!bz2_) {
    std::size_t got = 0;
    while (got < n) {
      if (in_pos_ == in_len_ && fill() == 0) break;
      std::size_t k = std::min(n - got, in_len_ - in_pos_);
      std::memcpy(buf + got, in_.data() + in_pos_, k);
      in_pos_ += k, got += k;
    }
    return got;
  }
  bz_stream& s = bz_->s;
  while (true) {
    if (in_pos_ == in_len_ && fill() == 0) {
      if (stream_open_)
        throw Error(path_ + ": truncated bz2 data: the file ends inside the stream that starts at byte " +
                    std::to_string(stream_start_));
      return 0;
    }
    if (!stream_open_) {
      s = bz_stream{};
      if (BZ2_bzDecompressInit(&s, 0, 0) != BZ_OK) throw Error(path_ + ": cannot initialise bz2 decompression");
      stream_open_ = true;
      stream_start_ = consumed_ + in_pos_;
    }
    s.next_in = in_.data() + in_pos_;
    s.avail_in = static_cast<unsigned>(in_len_ - in_pos_);
    s.next_out = buf;
    s.avail_out = static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30));
    const unsigned before_out = s.avail_out;
    const int rc = BZ2_bzDecompress(&s);
    in_pos_ = in_len_ - s.avail_in;
    const std::size_t produced = before_out - s.avail_out;
    if (rc == BZ_STREAM_END) {  // multistream: the next stream (if any) starts right after
      BZ2_bzDecompressEnd(&s);
      stream_open_ = false;
      if (produced) return produced;
      continue;
    }
    if (rc != BZ_OK) {
      const char* what = rc == BZ_DATA_ERROR_MAGIC ? "not bz2 data (bad magic)"
                         : rc == BZ_DATA_ERROR     ? "corrupt bz2 data (CRC or format error)"
                         : rc == BZ_MEM_ERROR      ? "out of memory decompressing bz2"
                                                   : "bz2 decompression error";
      throw Error(path_ + ": " + what + " near byte " + std::to_string(consumed_ + in_pos_) +
                  " (stream starting at byte " + std::to_string(stream_start_) + ")");
    }
    if (produced) return produced;
  }
}

WikiDumpReader::WikiDumpReader(const std::string& path) : in_(path) {}

bool WikiDumpReader::fill() {
  if (eof_) return false;
  if (pos_ > (1u << 22) && pos_ > buf_.size() / 2) {
    buf_.erase(0, pos_);
    base_ += pos_;
    pos_ = 0;
  }
  const std::size_t old = buf_.size();
  buf_.resize(old + (1 << 20));
  const std::size_t got = in_.read(buf_.data() + old, 1 << 20);
  buf_.resize(old + got);
  if (got == 0) eof_ = true;
  if (!checked_header_ && (buf_.size() >= 4096 || eof_)) {
    checked_header_ = true;
    const std::size_t m = buf_.find("<mediawiki");
    if (m == std::string::npos || m > 1024)
      throw Error(in_.path() + ": not a MediaWiki XML dump (no <mediawiki> element at the start)");
  }
  return got > 0;
}

static std::string_view between(std::string_view block, std::string_view open, std::string_view close) {
  std::size_t b = block.find(open);
  if (b == std::string_view::npos) return {};
  b += open.size();
  std::size_t e = block.find(close, b);
  return e == std::string_view::npos ? std::string_view{} : block.substr(b, e - b);
}

bool WikiDumpReader::next(WikiPage& page) {
  while (true) {
    std::size_t b = buf_.find("<page>", pos_);
    if (b == std::string::npos) {
      if (buf_.find("</mediawiki>", pos_) != std::string::npos) saw_end_ = true;
      if (buf_.size() >= pos_ + 16) pos_ = buf_.size() - 16;  // keep a partial "<page" tail
      if (!fill()) {
        if (!checked_header_) throw Error(in_.path() + ": not a MediaWiki XML dump (empty)");
        if (!saw_end_)
          throw Error(in_.path() + ": truncated XML: no closing </mediawiki> after byte " +
                      std::to_string(base_ + pos_));
        pos_ = buf_.size();
        return false;
      }
      continue;
    }
    pos_ = b;
    std::size_t e = buf_.find("</page>", b);
    while (e == std::string::npos) {
      const std::size_t scanned = buf_.size() - pos_;
      if (!fill())
        throw Error(in_.path() + ": truncated XML: <page> at byte " + std::to_string(base_ + pos_) +
                    " is never closed");
      e = buf_.find("</page>", pos_ + (scanned >= 8 ? scanned - 8 : 0));
    }
    b = pos_;
    std::string_view block(buf_.data() + b, e + 7 - b);
    page.offset = base_ + b;
    page.title = decode_entities(between(block, "<title>", "</title>"));
    std::string_view ns = between(block, "<ns>", "</ns>");
    page.ns = ns.empty() ? 0 : std::strtoll(std::string(ns).c_str(), nullptr, 10);
    page.redirect = block.find("<redirect") != std::string_view::npos;
    page.text.clear();
    std::size_t t = block.find("<text");
    if (t != std::string_view::npos) {
      std::size_t gt = block.find('>', t);
      if (gt != std::string_view::npos && block[gt - 1] != '/') {
        std::size_t te = block.find("</text>", gt);
        if (te != std::string_view::npos) page.text = decode_entities(block.substr(gt + 1, te - gt - 1));
      }
    }
    pos_ = e + 7;
    return true;
  }
}

namespace {

// Text shards written as <name>.tmp and renamed when complete; removed if the run fails.
struct ShardFiles {
  std::vector<std::string> paths;
  std::vector<std::FILE*> files;
  bool committed = false;
  ~ShardFiles() {
    for (std::size_t i = 0; i < files.size(); ++i) {
      if (files[i]) std::fclose(files[i]);
      if (!committed) std::remove((paths[i] + ".tmp").c_str());
    }
  }
};

}  // namespace

WikipediaStats run_wikipedia(const WikipediaOptions& o,
                             const std::function<void(std::uint64_t, std::uint64_t, std::int64_t)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  WikiDumpReader reader(o.dump);
  prepare_output_dir(o.out, "wiki-", ".txt");
  std::error_code ec;
  std::uint64_t dump_size = fs::file_size(o.dump, ec);
  const int shards =
      o.shards > 0 ? o.shards : static_cast<int>(std::max<std::uint64_t>(1, (dump_size + (64ull << 20) - 1) >> 26));
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  WikipediaStats st;
  st.shard_bytes.assign(static_cast<std::size_t>(shards), 0);
  st.shard_articles.assign(static_cast<std::size_t>(shards), 0);
  ShardFiles out;
  for (int i = 0; i < shards; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "wiki-%05d.txt", i);
    out.paths.push_back((fs::path(o.out) / name).string());
    std::FILE* f = std::fopen((out.paths.back() + ".tmp").c_str(), "wb");
    if (!f) throw Error(out.paths.back() + ".tmp: cannot create: " + std::strerror(errno));
    out.files.push_back(f);
  }

  // Batches of pages are cleaned on worker threads; results are written in dump order.
  struct Cleaned {
    std::vector<std::string> texts;
    std::int64_t empty = 0, too_short = 0;
  };
  std::deque<std::future<Cleaned>> pending;
  auto write_oldest = [&] {
    Cleaned c = pending.front().get();
    pending.pop_front();
    st.empty += c.empty, st.too_short += c.too_short;
    for (const std::string& t : c.texts) {
      auto k = static_cast<std::size_t>(std::min_element(st.shard_bytes.begin(), st.shard_bytes.end()) -
                                        st.shard_bytes.begin());
      if (std::fwrite(t.data(), 1, t.size(), out.files[k]) != t.size() || std::fputc('\n', out.files[k]) == EOF)
        throw Error(out.paths[k] + ".tmp: write failed: " + std::strerror(errno));
      st.shard_bytes[k] += t.size() + 1;
      st.shard_articles[k] += 1;
      st.bytes_out += t.size() + 1;
      st.articles += 1;
    }
  };
  const std::int64_t min_chars = o.min_chars;
  auto clean_batch = [min_chars](std::vector<std::string> texts) {
    Cleaned c;
    for (std::string& t : texts) {
      std::string s = clean_wikitext(t);
      if (s.empty())
        ++c.empty;
      else if (static_cast<std::int64_t>(s.size()) < min_chars)
        ++c.too_short;
      else
        c.texts.push_back(std::move(s));
    }
    return c;
  };

  WikiPage page;
  std::vector<std::string> batch;
  std::size_t batch_bytes = 0;
  auto submit = [&] {
    if (batch.empty()) return;
    if (threads <= 1) {
      std::promise<Cleaned> p;
      p.set_value(clean_batch(std::move(batch)));
      pending.push_back(p.get_future());
    } else {
      pending.push_back(std::async(std::launch::async, clean_batch, std::move(batch)));
    }
    batch = {};
    batch_bytes = 0;
    while (pending.size() > static_cast<std::size_t>(threads)) write_oldest();
  };
  while (reader.next(page)) {
    ++st.pages;
    if (page.ns != 0) {
      ++st.other_namespaces;
      continue;
    }
    if (page.redirect || page.text.compare(0, 9, "#REDIRECT") == 0 || page.text.compare(0, 9, "#redirect") == 0) {
      ++st.redirects;
      continue;
    }
    batch_bytes += page.text.size();
    batch.push_back(std::move(page.text));
    page.text = {};
    if (batch_bytes >= (4u << 20) || batch.size() >= 2000) submit();
    if (progress && st.pages % 5000 == 0) progress(reader.compressed_pos(), reader.compressed_size(), st.articles);
  }
  submit();
  while (!pending.empty()) write_oldest();
  st.bytes_in = reader.bytes_read();

  for (std::size_t i = 0; i < out.files.size(); ++i) {
    if (std::fflush(out.files[i]) != 0 || ::fsync(fileno(out.files[i])) != 0)
      throw Error(out.paths[i] + ".tmp: write failed: " + std::strerror(errno));
    std::fclose(out.files[i]);
    out.files[i] = nullptr;
    if (std::rename((out.paths[i] + ".tmp").c_str(), out.paths[i].c_str()) != 0)
      throw Error(out.paths[i] + ": rename from .tmp failed: " + std::strerror(errno));
  }
  out.committed = true;
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json j;
  j["dump"] = o.dump;
  j["pages"] = st.pages;
  j["articles"] = st.articles;
  j["skipped"] = {{"redirects", st.redirects},
                  {"other_namespaces", st.other_namespaces},
                  {"empty_after_cleaning", st.empty},
                  {"shorter_than_min_chars", st.too_short}};
  j["bytes_in"] = st.bytes_in;
  j["bytes_out"] = st.bytes_out;
  j["seconds"] = st.seconds;
  j["shards"] = nlohmann::json::array();
  for (std::size_t i = 0; i < out.paths.size(); ++i)
    j["shards"].push_back({{"file", fs::path(out.paths[i]).filename().string()},
                           {"articles", st.shard_articles[i]},
                           {"bytes", st.shard_bytes[i]}});
  write_file_atomic((fs::path(o.out) / "stats.json").string(), j.dump(2) + "\n");
  if (progress) progress(reader.compressed_size(), reader.compressed_size(), st.articles);
  return st;
}

}  // namespace bertx::data
