// test_distill_cli.cpp - distillation through `bertx run`, as a user runs experiments/distill/tiny_mrpc.toml: a tiny
// teacher fine-tuned on the bundled sentence pairs for a few steps, its dry run counting the teacher, a 1-layer
// student trained from it (every weighted loss logged, evaluation on the student, a 1-layer checkpoint), a student
// half the teacher's width learning through the projection fit_dense (checkpointed with it, resumed bit for bit), and
// the one-line refusals of a missing teacher and a bad [distill] value.
#include "doctest_torch.hpp"

#include <filesystem>

#include "io/weights.hpp"
#include "store/store.hpp"
#include "test_util.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

const std::string kBertx = BERTX_BIN;
const std::string kSrc = BERTX_SOURCE_DIR;

test::CommandResult bertx_run(const std::string& args) {
  return test::run_command("cd '" + kSrc + "' && " + kBertx + " run " + args);
}

std::vector<MetricRow> metric(const std::string& db, const std::string& name) {
  auto store = RunStore::open(db);
  auto runs = store->list_runs();
  REQUIRE(runs.size() == 1);
  return store->metrics(runs.front().id, name);
}

}  // namespace

TEST_CASE("a tiny student distilled from a tiny fine-tuned teacher trains, logs each loss and keeps one layer") {
  test::TempDir d;
  auto teacher = bertx_run(
      "experiments/tiny_finetune.toml --set train.from_pretrained= --set train.epochs=0 "
      "--set train.max_steps=30 --set train.eval=false --set run.threads=2 --set run.output_dir=" +
      (d / "teacher") + " --set run.store=" + (d / "teacher.db"));
  INFO(teacher.output);
  REQUIRE(teacher.exit_code == 0);
  const std::string from = " --set distill.teacher=" + (d / "teacher/bert/finetune");

  auto dry = bertx_run("experiments/distill/tiny_mrpc.toml --dry-run" + from);
  INFO(dry.output);
  REQUIRE(dry.exit_code == 0);
  CHECK(dry.output.find("[distill]") != std::string::npos);
  CHECK(dry.output.find("#   distillation teacher ") != std::string::npos);

  auto student = bertx_run("experiments/distill/tiny_mrpc.toml" + from +
                           " --set train.epochs=0 --set train.max_steps=12 --set train.log_freq=1 --set run.threads=2"
                           " --set run.output_dir=" +
                           (d / "student") + " --set run.store=" + (d / "student.db"));
  INFO(student.output);
  REQUIRE(student.exit_code == 0);
  CHECK(student.output.find("teacher " + (d / "teacher/bert/finetune")) != std::string::npos);
  CHECK(student.output.find("student layers from the teacher's") != std::string::npos);
  const std::string db = d / "student.db";
  for (const char* name : {"loss", "hard_loss", "kd_soft_loss", "kd_hidden_loss"}) {
    INFO(name);
    const auto rows = metric(db, name);
    REQUIRE(rows.size() == 12);
    for (const auto& r : rows) CHECK(std::isfinite(r.value));
  }
  CHECK(metric(db, "kd_attention_loss").empty());  // weight 0: not computed
  // loss = 0.5 hard + 1 soft + 1 hidden (tiny_mrpc.toml's weights), step by step.
  const auto loss = metric(db, "loss"), hard = metric(db, "hard_loss"), soft = metric(db, "kd_soft_loss"),
             hidden = metric(db, "kd_hidden_loss");
  for (std::size_t i = 0; i < loss.size(); ++i)
    CHECK(loss[i].value == doctest::Approx(0.5 * hard[i].value + soft[i].value + hidden[i].value).epsilon(1e-5));
  CHECK(!metric(db, "eval_accuracy").empty());  // the student is evaluated as any classifier
  const TensorMap w = load_safetensors(d / "student/bert/distill/12/model.safetensors");
  CHECK(w.count("bert.encoder.layer.0.attention.self.query.weight") == 1);
  CHECK(w.count("bert.encoder.layer.1.attention.self.query.weight") == 0);
  CHECK(w.count("classifier.weight") == 1);

  // A student half the teacher's width (64 against 128, the teacher's 2 heads): every intermediate loss through
  // fit_dense, which the checkpoint keeps and a resume from step 4 restores (step 8 equal to the run straight through).
  test::write_text(d / "narrow.json",
                   R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 256, "max_position_embeddings": 512, "type_vocab_size": 2, "hidden_act": "gelu"})");
  const std::string narrow =
      "experiments/distill/tiny_mrpc.toml" + from +
      " --set model.preset=custom --set model.config=" + (d / "narrow.json") +
      " --set distill.init_layers=[] --set distill.attention_weight=1"
      " --set distill.embedding_weight=1 --set train.epochs=0 --set train.max_steps=8"
      " --set train.num_steps_per_checkpoint=4 --set train.keep_checkpoints=3 --set run.threads=2"
      " --set run.output_dir=" +
      (d / "narrow") + " --set run.store=" + (d / "narrow.db");
  auto first = bertx_run(narrow);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK(first.output.find("learned projection fit_dense 64 -> 128") != std::string::npos);
  const std::string step8 = d / "narrow/bert/distill/8/model.safetensors";
  const TensorMap straight = load_safetensors(step8);
  REQUIRE(straight.count("fit_dense.weight") == 1);
  CHECK(straight.at("fit_dense.weight").sizes() == at::IntArrayRef{128, 64});
  CHECK(straight.at("bert.encoder.layer.0.attention.self.query.weight").sizes() == at::IntArrayRef{64, 64});
  fs::remove_all(d / "narrow/bert/distill/8");
  auto resumed = bertx_run(narrow);
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(resumed.output.find("from " + (d / "narrow/bert/distill/4")) != std::string::npos);
  const TensorMap again = load_safetensors(step8);
  REQUIRE(again.size() == straight.size());
  for (const auto& [name, t] : straight) {
    INFO(name);
    CHECK(at::equal(t, again.at(name)));
  }

  auto missing = bertx_run("experiments/distill/tiny_mrpc.toml --set distill.teacher=" + (d / "nowhere") +
                           " --set run.output_dir=" + (d / "bad") + " --set run.store=" + (d / "bad.db"));
  CHECK(missing.exit_code != 0);
  CHECK(missing.output.find(d / "nowhere") != std::string::npos);
  auto cold = bertx_run("experiments/distill/tiny_mrpc.toml --dry-run --set distill.temperature=0" + from);
  CHECK(cold.exit_code != 0);
  CHECK(cold.output.find("[distill] temperature: must be > 0, got 0") != std::string::npos);
}
