// test_config.cpp - experiment files: extends chains, --set overrides with type checks, and errors that
// name file:line:column for syntax errors, unknown sections/keys and wrong types.
#include <doctest/doctest.h>

#include "bertx/error.hpp"
#include "host/config.hpp"
#include "host/plugin_host.hpp"
#include "host/sections.hpp"
#include "host/train_options.hpp"
#include "test_util.hpp"

using namespace bertx;
using bertx::test::error_of;

static ResolvedConfig resolve_file(const std::string& f, const std::vector<std::string>& sets = {}) {
  PluginHost host;  // no plugins: only host sections
  return resolve(Experiment::load(f, sets), host);
}

TEST_CASE("the host's sections are registered as plugins register builders: run, train, bench and distill, each once") {
  PluginHost host;
  const auto& all = host.sections().all();
  REQUIRE(all.size() == 4);
  CHECK(all[0].name == "run");
  CHECK(all[1].name == "train");
  CHECK(all[2].name == "bench");
  CHECK(all[3].name == "distill");
  for (const auto& s : all) {
    CHECK_FALSE(s.description.empty());
    CHECK_FALSE(s.schema().empty());
  }
  SectionRegistry registry;
  register_host_sections(registry);
  CHECK(error_of([&] {
          registry.add({"train", "again", &train_schema});
        }).find("[train] is registered twice") != std::string::npos);
  // resolve() validates each registered section: a key of [bench] is checked against bench's schema.
  test::TempDir d;
  test::write_text(d / "e.toml", "[run]\nname = \"e\"\n[bench]\nno_such_key = 1\n");
  CHECK(error_of([&] { resolve_file(d / "e.toml"); }).find("no_such_key") != std::string::npos);
}

TEST_CASE("extends chains merge parent first, child wins, defaults fill the rest") {
  test::TempDir d;
  test::write_text(d / "base.toml", "[run]\nname = \"base\"\nseed = 1\noutput_dir = \"out/base\"\nthreads = 2\n");
  test::write_text(d / "sub/mid.toml", "extends = \"../base.toml\"\n[run]\nseed = 2\n");
  test::write_text(d / "sub/child.toml", "extends = \"mid.toml\"\n[run]\nname = \"child\"\n");
  ResolvedConfig rc = resolve_file(d / "sub/child.toml");
  CHECK(rc.run.name == "child");
  CHECK(rc.run.seed == 2);
  CHECK(rc.run.output_dir == "out/base");
  CHECK(rc.run.threads == 2);
  CHECK(rc.run.store == RunOptions{}.store);
  CHECK(rc.run.device == "auto");
  REQUIRE(rc.files.size() == 3);
  CHECK(rc.files[0] == d / "sub/child.toml");
  CHECK(rc.text.find("seed = 2") != std::string::npos);
  CHECK(rc.text.find("store = \"runs/bertx.db\"") != std::string::npos);  // defaults are part of the record
  CHECK(rc.text.find("extends") == std::string::npos);
}

TEST_CASE("extends accepts a list, later parents win over earlier ones") {
  test::TempDir d;
  test::write_text(d / "a.toml", "[run]\nname = \"a\"\nseed = 1\nthreads = 1\n");
  test::write_text(d / "b.toml", "[run]\nseed = 5\n");
  test::write_text(d / "c.toml", "extends = [\"a.toml\", \"b.toml\"]\n[run]\nthreads = 3\n");
  ResolvedConfig rc = resolve_file(d / "c.toml");
  CHECK(rc.run.name == "a");
  CHECK(rc.run.seed == 5);
  CHECK(rc.run.threads == 3);
}

TEST_CASE("extends errors: cycles, missing parents, wrong type") {
  test::TempDir d;
  test::write_text(d / "a.toml", "extends = \"b.toml\"\n[run]\nname = \"a\"\n");
  test::write_text(d / "b.toml", "extends = \"a.toml\"\n");
  CHECK(error_of([&] { Experiment::load(d / "a.toml"); }).find("extends cycle") != std::string::npos);
  test::write_text(d / "c.toml", "# comment\nextends = \"nope.toml\"\n[run]\nname = \"c\"\n");
  const std::string e = error_of([&] { Experiment::load(d / "c.toml"); });
  CHECK(e.find(d / "c.toml" + ":2:1: extends 'nope.toml': file not found") == 0);
  test::write_text(d / "f.toml", "[run]\nname = \"f\"\nextends = \"a.toml\"\n");  // inside [run]: just an unknown key
  CHECK(error_of([&] { resolve_file(d / "f.toml"); }) ==
        d / "f.toml" +
            ":3:1: unknown key 'extends' in [run]; known keys: name, seed, output_dir, store, threads, device, "
            "description, dist_backend, dist_bucket_mb, dist_timeout_s, tensorboard");
  test::write_text(d / "e.toml", "extends = 3\n");
  CHECK(error_of([&] { Experiment::load(d / "e.toml"); }) ==
        d / "e.toml" + ":1:1: 'extends' must be a string or an array of strings (relative paths)");
  CHECK(error_of([&] { Experiment::load(d / "missing.toml"); }) == d / "missing.toml" + ": experiment file not found");
}

TEST_CASE("--set overrides beat the file and are type-checked against the schema") {
  test::TempDir d;
  test::write_text(d / "x.toml", "[run]\nname = \"x\"\nseed = 1\n");
  ResolvedConfig rc =
      resolve_file(d / "x.toml", {"run.seed=7", "run.output_dir=/tmp/o", "run.name=123", "run.threads=4"});
  CHECK(rc.run.seed == 7);
  CHECK(rc.run.output_dir == "/tmp/o");  // bare text is a string
  CHECK(rc.run.name == "123");           // unquoted number where a string is expected: taken as written
  CHECK(rc.run.threads == 4);
  CHECK(
      error_of([&] { resolve_file(d / "x.toml", {"run.seed=abc"}); }) ==
      "--set run.seed=abc: [run] seed: expected integer, got string (global random seed (data order, init, dropout))");
  CHECK(error_of([&] { resolve_file(d / "x.toml", {"run.seed=1.5"}); }).find("expected integer, got float") !=
        std::string::npos);
  CHECK(error_of([&] { resolve_file(d / "x.toml", {"run.sed=3"}); }) ==
        "--set run.sed=3: unknown key 'sed' in [run]; did you mean 'seed'? known keys: name, seed, output_dir, store, "
        "threads, device, description, dist_backend, dist_bucket_mb, dist_timeout_s, tensorboard");
  CHECK(error_of([&] {
          resolve_file(d / "x.toml", {"run.dist_timeout_s=0"});
        }).find("dist_timeout_s: must be >= 1 (seconds), got 0") != std::string::npos);
  CHECK(error_of([&] { resolve_file(d / "x.toml", {"run.dist_backend=mpi"}); }).find("dist_backend") !=
        std::string::npos);
  CHECK(error_of([&] { resolve_file(d / "x.toml", {"seed=3"}); }).find("key must name a section and a key") !=
        std::string::npos);
  CHECK(error_of([&] { resolve_file(d / "x.toml", {"run.seed"}); }).find("expected section.key=value") !=
        std::string::npos);
  CHECK(error_of([&] { resolve_file(d / "x.toml", {"run.seed.x=1"}); }).find("'run.seed' is a value, not a table") !=
        std::string::npos);
}

TEST_CASE("syntax errors name file:line:column") {
  test::TempDir d;
  test::write_text(d / "bad.toml", "[run]\nname = \"x\"\nseed = = 3\n");
  const std::string e = error_of([&] { Experiment::load(d / "bad.toml"); });
  CHECK(e.find(d / "bad.toml" + ":3:") == 0);
  CHECK(e.find("TOML syntax error") != std::string::npos);
}

TEST_CASE("unknown sections and keys, wrong types and bad choices name the spot") {
  test::TempDir d;
  const std::string f = d / "e.toml";
  test::write_text(f, "[run]\nname = \"x\"\n\nseeed = 3\n");
  CHECK(error_of([&] { resolve_file(f); }) ==
        f + ":4:1: unknown key 'seeed' in [run]; did you mean 'seed'? known "
            "keys: name, seed, output_dir, store, threads, "
            "device, description, dist_backend, dist_bucket_mb, dist_timeout_s, tensorboard");
  test::write_text(f, "[run]\nname = \"x\"\n[modle]\ntype = \"bert\"\n");
  CHECK(error_of([&] { resolve_file(f); }) == f + ":3:2: unknown section [modle]; did you mean [model]? known "
                                                  "sections: run, train, bench, distill, model, optimizer, task, data");
  test::write_text(f, "[run]\nname = \"x\"\nseed = \"forty\"\n");
  CHECK(error_of([&] { resolve_file(f); }) ==
        f + ":3:1: [run] seed: expected integer, got string (global random seed (data order, init, dropout))");
  test::write_text(f, "[run]\nname = \"x\"\ndevice = \"tpu\"\n");
  CHECK(error_of([&] { resolve_file(f); }) == f + ":3:1: [run] device: 'tpu' is not one of: auto, cpu, cuda");
  test::write_text(f, "[run]\nseed = 3\n");
  CHECK(error_of([&] { resolve_file(f); }) ==
        f + ":1:2: [run] is missing required key 'name' (string: experiment name; groups runs in the store)");
  test::write_text(f, "title = \"x\"\n");
  CHECK(error_of([&] { resolve_file(f); }).find(f + ":1:1: unknown top-level key 'title'") == 0);
  test::write_text(f, "[model]\ntype = \"bert\"\n");
  CHECK(error_of([&] { resolve_file(f); }) == f + ": missing [run] section (it needs at least: name = \"...\")");
  test::write_text(f, "[run]\nname = \"x\"\n[optimizer]\ntype = \"adamw\"\n");
  CHECK(
      error_of([&] { resolve_file(f); }) ==
      f + ":4:1: [optimizer] unknown optimizer 'adamw'; available: none (no plugin provides one; see `bertx plugins`)");
  test::write_text(f, "[run]\nname = \"x\"\n[optimizer]\nlr = 1\n");
  CHECK(error_of([&] { resolve_file(f); }).find(f + ":3:2: [optimizer] needs type = \"<optimizer name>\"") == 0);
}

TEST_CASE("the resolved text and hash identify the config") {
  test::TempDir d;
  test::write_text(d / "x.toml", "[run]\nname = \"x\"\n");
  test::write_text(d / "y.toml", "[run]\n# same values, other layout\nseed = 42\nname = \"x\"\n");
  const ResolvedConfig a = resolve_file(d / "x.toml"), b = resolve_file(d / "y.toml");
  CHECK(a.text == b.text);  // defaults filled: an explicit default equals an omitted one
  CHECK(a.hash == b.hash);
  CHECK(a.hash.size() == 16);
  CHECK(resolve_file(d / "x.toml", {"run.seed=1"}).hash != a.hash);
}

TEST_CASE("closest_match suggests within edit distance 2 only") {
  CHECK(closest_match("lr_scael", {"lr_scale", "verbose"}) == "lr_scale");
  CHECK(closest_match("optimiser", {"optimizer", "model"}) == "optimizer");
  CHECK(closest_match("zzz", {"optimizer", "model"}).empty());
}
