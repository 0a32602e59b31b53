// wiki_dump.hpp - streaming reader of MediaWiki XML dumps (enwiki-*-pages-articles*.xml[.bz2]) and the
// `bertx data wikipedia` pipeline: keep namespace-0 articles that are not redirects, clean their wikitext,
// write one article per line into size-balanced text shards. Never decompresses the dump to disk.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace bertx::data {

// Reads a file that is either bzip2 (one or more concatenated streams: multistream dumps) or plain.
// Errors are bertx::Error naming the file and the compressed byte offset ("corrupt bz2 data").
class CompressedReader {
 public:
  explicit CompressedReader(const std::string& path);
  ~CompressedReader();
  CompressedReader(const CompressedReader&) = delete;
  CompressedReader& operator=(const CompressedReader&) = delete;
  // Up to n decompressed bytes into buf; 0 only at the end of the file.
  std::size_t read(char* buf, std::size_t n);
  std::uint64_t compressed_pos() const { return consumed_; }  // bytes of the file consumed so far
  std::uint64_t compressed_size() const { return file_size_; }
  bool is_bz2() const { return bz2_; }
  const std::string& path() const { return path_; }

 private:
  std::size_t fill();
  std::string path_;
  std::FILE* f_ = nullptr;
  bool bz2_ = false, stream_open_ = false, eof_ = false;
  std::uint64_t consumed_ = 0, file_size_ = 0, stream_start_ = 0;
  std::vector<char> in_;
  std::size_t in_pos_ = 0, in_len_ = 0;
  struct Bz;
  std::unique_ptr<Bz> bz_;
};

struct WikiPage {
  std::string title;
  std::int64_t ns = 0;
  bool redirect = false;
  std::string text;          // wikitext, XML entities decoded
  std::uint64_t offset = 0;  // uncompressed byte offset of <page>
};

// Splits the XML stream into pages. Throws bertx::Error "<file>: not a MediaWiki XML dump" when the
// stream does not start with <mediawiki, and "<file>: truncated XML: <page> at byte N is never closed".
class WikiDumpReader {
 public:
  explicit WikiDumpReader(const std::string& path);
  bool next(WikiPage& page);
  std::uint64_t compressed_pos() const { return in_.compressed_pos(); }
  std::uint64_t compressed_size() const { return in_.compressed_size(); }
  std::uint64_t bytes_read() const { return base_ + pos_; }

 private:
  bool fill();
  CompressedReader in_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::uint64_t base_ = 0;  // uncompressed offset of buf_[0]
  bool checked_header_ = false, eof_ = false, saw_end_ = false;
};

struct WikipediaOptions {
  std::string dump;            // enwiki-*-pages-articles*.xml.bz2 (or .xml)
  std::string out;             // output folder: wiki-00000.txt ... and stats.json
  int shards = 0;              // number of text shards; 0 = one per 64 MiB of compressed dump (at least 1)
  std::int64_t min_chars = 0;  // articles with fewer characters after cleaning are skipped (counted)
  int threads = 0;             // cleaning threads; 0 = all hardware threads
};

struct WikipediaStats {
  std::int64_t pages = 0, articles = 0, redirects = 0, other_namespaces = 0, empty = 0, too_short = 0;
  std::uint64_t bytes_in = 0, bytes_out = 0;
  std::vector<std::uint64_t> shard_bytes;
  std::vector<std::int64_t> shard_articles;
  double seconds = 0;
};

// `progress(compressed_bytes_read, compressed_bytes_total, articles)` is called every few thousand pages.
WikipediaStats run_wikipedia(const WikipediaOptions& options,
                             const std::function<void(std::uint64_t, std::uint64_t, std::int64_t)>& progress = {});

}  // namespace bertx::data
