// test_glue_cli.cpp - the bundled GLUE experiment files resolve (plugins, options, extends), and a GLUE file
// with a malformed row stops `bertx run` with one error line naming file:line.
#include <doctest/doctest.h>

#include "test_util.hpp"

using namespace bertx;

TEST_CASE("the GLUE and tiny_finetune experiment files resolve") {
  for (const std::string name : {"glue_cola", "glue_mrpc", "glue_mnli", "tiny_finetune"}) {
    INFO(name);
    auto r =
        test::run_command(std::string(BERTX_BIN) + " run " BERTX_SOURCE_DIR "/experiments/" + name + ".toml --dry-run");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("type = \"glue\"") != std::string::npos);
    CHECK(r.output.find("type = \"classification\"") != std::string::npos);
  }
}

TEST_CASE("a malformed GLUE row stops the run with one line naming file:line") {
  test::TempDir d;
  test::write_text(d / "data/train.tsv",
                   "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta \"b\tc\n0\t3\t4\tonly four\n");
  auto r = test::run_command(
      std::string(BERTX_BIN) +
      " run " BERTX_SOURCE_DIR "/experiments/tiny_finetune.toml --set run.output_dir=" + (d / "out") +
      " --set run.store=" + (d / "runs.db") + " --set train.from_pretrained= --set data.data_dir=" + (d / "data") +
      " --set data.vocab=" BERTX_SOURCE_DIR "/experiments/vocab/bert-base-uncased.txt");
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find(d / "data/train.tsv:3: 4 tab-separated columns, expected 5") != std::string::npos);
}
