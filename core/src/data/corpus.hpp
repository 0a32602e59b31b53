// corpus.hpp - text corpora -> tokenized documents (lists of sentences of WordPiece ids) in one flat store.
// Input formats: one document per line (Wikipedia output, PubMed abstracts) or Google's format (one
// sentence per line, blank lines between documents); each line is split into sentences either way.
// Several corpora can be mixed, each with a weight (how often its documents are used).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "data/huge_vector.hpp"

namespace bertx {
class Tokenizer;
}

namespace bertx::data {

enum class DocFormat {
  Auto,   // per file: Blank when the file's first MiB has a blank line between text lines, else Line
  Line,   // one document per line
  Blank,  // documents separated by blank lines
};

struct CorpusInput {
  std::string path;     // a text file, or a folder read recursively (hidden, .json and .tmp files skipped)
  double weight = 1.0;  // relative use of this corpus' documents (2 = each used twice as often, 0.5 = half)
};

// Tokenized documents: document d has sentences doc_start[d] .. doc_start[d+1]-1; sentence s has tokens
// tokens[sentence_start[s] .. sentence_start[s+1]).
struct Documents {
  huge_vector<std::int32_t> tokens;
  huge_vector<std::uint64_t> sentence_start{0};
  std::vector<std::uint64_t> doc_start{0};
  std::vector<float> doc_weight;  // the weight of the corpus each document came from

  std::size_t num_docs() const { return doc_start.size() - 1; }
  std::size_t num_sentences() const { return sentence_start.size() - 1; }
  std::size_t doc_sentences(std::size_t d) const { return doc_start[d + 1] - doc_start[d]; }
  std::uint64_t doc_tokens(std::size_t d) const {
    return sentence_start[doc_start[d + 1]] - sentence_start[doc_start[d]];
  }
  // Sentence `j` (0-based) of document `d`.
  std::span<const std::int32_t> sentence(std::size_t d, std::size_t j) const {
    const std::size_t s = doc_start[d] + j;
    return {tokens.data() + sentence_start[s], tokens.data() + sentence_start[s + 1]};
  }
  void append(const Documents& other);  // appends other's documents after ours
};

struct CorpusStats {
  std::int64_t files = 0, lines = 0, bytes = 0;
  std::int64_t non_utf8_lines = 0;    // skipped lines that are not valid UTF-8
  std::int64_t empty_documents = 0;   // documents without a single token (dropped)
  std::vector<std::string> examples;  // the first few skipped lines as "file:line: reason"
};

struct CorpusOptions {
  std::vector<CorpusInput> inputs;     // at least one
  DocFormat format = DocFormat::Auto;  // document boundaries of every input file
  int threads = 0;                     // tokenizing threads; 0 = all hardware threads
};

// Every file of an input (sorted, so the order never depends on the file system). Throws bertx::Error
// naming the path when it does not exist or holds no file.
std::vector<std::string> list_corpus_files(const std::string& path);

// Creates `dir` and refuses (bertx::Error naming it) when it already holds files named <prefix>*<suffix>:
// stale shards of an earlier run would be read with the new ones.
void prepare_output_dir(const std::string& dir, const std::string& prefix, const std::string& suffix);

// Reads and tokenizes every input. `progress(bytes_done, bytes_total)` is called after each block.
// Throws bertx::Error naming the inputs when no document remains (empty corpus).
Documents read_corpus(const CorpusOptions& options, const Tokenizer& tokenizer, CorpusStats& stats,
                      const std::function<void(std::int64_t, std::int64_t)>& progress = {});

}  // namespace bertx::data
