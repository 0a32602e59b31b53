// test_encode_cli.cpp - `bertx encode` as a user runs it: stdin lines split on '\n' only (a \r, \v or
// U+2028 inside a line does not start a new one), one output line per input line (empty for blank input),
// --tokens, and the one-line error for a vocab whose casing contradicts --cased.
#include <doctest/doctest.h>

#include <string>

#include "test_util.hpp"

using bertx::test::run_command;

static const std::string kBertx = BERTX_BIN;

namespace {

void write_vocab(const std::string& path) {
  bertx::test::write_text(path, "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\nun\n##aff\n##able\n!\n");
}

}  // namespace

TEST_CASE("bertx encode writes one line of ids per input line") {
  bertx::test::TempDir d;
  write_vocab(d / "vocab.txt");
  // Lines: CR inside, U+2028 inside, vertical tab (dropped: joins), empty, blank, accents, last without '\n'.
  bertx::test::write_text(d / "in.txt",
                          "hello\rworld\n"
                          "hello\xe2\x80\xa8world!\n"
                          "un\x0b"
                          "affable\n"
                          "\n"
                          " \t \n"
                          "H\xc3\xa9llo zz\n"
                          "unaffable");
  auto r = run_command(kBertx + " encode --vocab " + (d / "vocab.txt") + " < " + (d / "in.txt"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output == "5 6\n5 6 10\n7 8 9\n\n\n5 1\n7 8 9\n");

  auto t = run_command(kBertx + " encode --tokens --max-chars 5 --vocab " + (d / "vocab.txt") + " < " + (d / "in.txt"));
  INFO(t.output);
  CHECK(t.exit_code == 0);
  CHECK(t.output == "hello world\nhello world !\n[UNK]\n\n\nhello [UNK]\n[UNK]\n");

  auto empty = run_command(kBertx + " encode --vocab " + (d / "vocab.txt") + " < /dev/null");
  CHECK(empty.exit_code == 0);
  CHECK(empty.output.empty());
}

TEST_CASE("bertx encode --cased with an uncased vocab fails with one line") {
  bertx::test::TempDir d;
  write_vocab(d / "vocab.txt");
  auto r = run_command("echo hi | " + kBertx + " encode --cased --vocab " + (d / "vocab.txt"));
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("bertx: error: vocab " + (d / "vocab.txt") + " looks uncased") == 0);
  CHECK(r.output.find('\n') == r.output.size() - 1);
  auto missing = run_command(kBertx + " encode --vocab " + (d / "nope.txt") + " < /dev/null");
  CHECK(missing.exit_code == 2);
  CHECK(missing.output == "bertx: error: vocab " + (d / "nope.txt") + ": cannot open (No such file or directory)\n");
}
