// cmd_encode.cpp - `bertx encode --vocab V.txt [--cased] [--max-chars N] [--tokens]`: WordPiece-tokenizes
// stdin, one output line of space-separated ids (or pieces with --tokens) per input line.
// Lines are split on '\n' only: stdin is read as bytes, since lines may hold \r, \v, \f, \x85, U+2028,
// U+2029 or NUL, which the tokenizer treats as whitespace or drops but which must not start a new line.
#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

#include "bertx/error.hpp"
#include "bertx/tokenizer.hpp"
#include "commands.hpp"

namespace bertx::cli {

namespace {

struct Output {
  std::string buf;
  void flush() {
    if (!buf.empty() && std::fwrite(buf.data(), 1, buf.size(), stdout) != buf.size())
      throw Error("bertx encode: cannot write to stdout");
    buf.clear();
  }
};

}  // namespace

void add_encode_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::string vocab;
    bool cased = false;
    bool tokens = false;
    std::int32_t max_chars = 200;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("encode", "WordPiece-tokenize stdin: one line of ids per input line");
  cmd->add_option("--vocab", args->vocab, "vocab.txt (one token per line)")->required();
  cmd->add_flag("--cased", args->cased, "keep case and accents (cased vocabs); default lower-cases");
  cmd->add_option("--max-chars", args->max_chars, "longer words become [UNK] (Google: 200, Hugging Face: 100)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--tokens", args->tokens, "print the word pieces instead of their ids");
  cmd->callback([args, &exit_code] {
    TokenizerOptions opts;
    opts.do_lower_case = !args->cased;
    opts.max_input_chars_per_word = args->max_chars;
    const Tokenizer tok(Vocab::load(args->vocab), opts);
    Output out;
    out.buf.reserve(1 << 20);
    std::vector<std::int32_t> ids;
    auto emit_line = [&](std::string_view line) {
      ids.clear();
      tok.encode(line, ids);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i) out.buf.push_back(' ');
        if (args->tokens) {
          out.buf += tok.vocab().token(ids[i]);
        } else {
          char num[16];
          out.buf.append(num, std::to_chars(num, num + sizeof num, ids[i]).ptr);
        }
      }
      out.buf.push_back('\n');
      if (out.buf.size() >= (1 << 20)) out.flush();
    };
    std::string pending;  // a line not yet ended by '\n'
    std::vector<char> chunk(1 << 20);
    while (std::size_t n = std::fread(chunk.data(), 1, chunk.size(), stdin)) {
      std::string_view data(chunk.data(), n);
      for (std::size_t nl; (nl = data.find('\n')) != std::string_view::npos; data.remove_prefix(nl + 1)) {
        if (pending.empty()) {
          emit_line(data.substr(0, nl));
        } else {
          pending.append(data.substr(0, nl));
          emit_line(pending);
          pending.clear();
        }
      }
      pending.append(data);
    }
    if (std::ferror(stdin)) throw Error("bertx encode: cannot read stdin");
    if (!pending.empty()) emit_line(pending);  // last line without '\n'
    out.flush();
    std::fflush(stdout);
    exit_code = 0;
  });
}

}  // namespace bertx::cli
