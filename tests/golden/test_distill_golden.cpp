// test_distill_golden.cpp - distillation (train/distill.hpp) against the PyTorch reference that
// tools/distill/make_reference.py wrote with transformers' BERT and torch.nn.functional on the golden model
// (tests/fixtures/distill/reference.safetensors): the golden 2-layer classifier as teacher, a 1-layer student started
// from its layer 2 (init_layers), every loss term, the weighted total and the student's gradients to 1e-6; then the
// losses' own rules (masked rows, regression, masked keys), the layer maps and the refusals. A second reference
// (narrow.safetensors) has a student half the teacher's width, whose hidden states reach the teacher's width through
// the learned projection fit_dense (TinyBERT's W_h): the same terms and the projection's own gradients.
#include "doctest_torch.hpp"

#include <filesystem>

#include <ATen/ATen.h>

#include "bertx/task.hpp"
#include "host/plugin_host.hpp"
#include "io/weights.hpp"
#include "test_util.hpp"
#include "train/distill.hpp"

using namespace bertx;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = std::string(BERTX_SHARED_DIR) + "/golden/model";
const std::string kFixtures = std::string(BERTX_SOURCE_DIR) + "/tests/fixtures/distill";
const std::string kReference = kFixtures + "/reference.safetensors";

PluginHost& host() {
  static PluginHost h = [] {
    PluginHost x;
    x.load(std::string(BERTX_BUILD_PLUGIN_DIR) + "/libbertx_model_bert.so");
    x.load(std::string(BERTX_BUILD_PLUGIN_DIR) + "/libbertx_glue.so");
    return x;
  }();
  return h;
}

// The golden model as a classification teacher folder: config.json, weights and the classifier head.
void write_teacher(const fs::path& dir, bool with_head = true) {
  fs::create_directories(dir);
  fs::copy_file(kGolden + "/config.json", dir / "config.json");
  fs::copy_file(kGolden + "/weights.safetensors", dir / "weights.safetensors");
  if (with_head) fs::copy_file(kGolden + "/cls_head.safetensors", dir / "cls_head.safetensors");
}

std::shared_ptr<Model> student(std::int64_t layers, const std::string& config = kGolden + "/config.json") {
  return host().create<Model>(
      Kind::Model, "bert",
      host().options_for(Kind::Model, "bert",
                         {{"preset", std::string("custom")}, {"config", config}, {"num_hidden_layers", layers}}));
}

std::shared_ptr<Task> classification() {
  return host().create<Task>(Kind::Task, "classification",
                             host().options_for(Kind::Task, "classification", {{"num_labels", std::int64_t{2}}}));
}

Batch golden_batch() {
  TensorMap in = load_safetensors(kGolden + "/inputs.safetensors");
  Batch b;
  for (const char* k : {"input_ids", "token_type_ids", "attention_mask"}) b.tensors[k] = in.at(k);
  b.tensors["labels"] = in.at("cls_labels");
  return b;
}

double max_abs(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// The golden teacher with every loss weighted as make_reference.py weighs them.
DistillOptions reference_options(const fs::path& teacher) {
  DistillOptions o;
  o.teacher = teacher;
  o.temperature = 2.0;
  o.hard_weight = 0.5, o.soft_weight = 1.0, o.hidden_weight = 1.0, o.attention_weight = 0.5, o.embedding_weight = 2.0;
  return o;
}

// One step's loss terms, total, logits and the gradients the reference holds (grad.<name>), each to 1e-6.
void check_against(const TensorMap& ref, Distiller& distiller, Task& task, Model& model) {
  model.module().eval();  // no dropout, as the reference; autograd stays on
  StepOutput out = distiller.step(task, model, golden_batch());
  for (const char* term : {"soft", "hidden", "attention", "embedding"}) {
    const double got = out.metrics.at(std::string("kd_") + term + "_loss").item<double>();
    const double want = ref.at(std::string("loss.") + term).item<double>();
    INFO(term << ": bertx " << got << ", reference " << want);
    CHECK(got == doctest::Approx(want).epsilon(1e-5));
    CHECK(std::abs(got - want) < 1e-6);
  }
  CHECK(std::abs(out.metrics.at("hard_loss").item<double>() - ref.at("loss.hard").item<double>()) < 1e-6);
  CHECK(std::abs(out.loss.item<double>() - ref.at("loss.total").item<double>()) < 1e-6);
  CHECK(max_abs(out.outputs.at("logits"), ref.at("student_logits")) < 1e-6);
  out.loss.backward();
  auto params = model.module().named_parameters(true);
  int checked = 0;
  for (const auto& [key, want] : ref) {
    if (key.rfind("grad.", 0) != 0) continue;
    const std::string name = key.substr(5);
    const at::Tensor* p = params.find(name);
    REQUIRE_MESSAGE(p, name);
    REQUIRE_MESSAGE(p->grad().defined(), name);
    const double diff = max_abs(p->grad(), want), scale = want.abs().max().item<double>();
    INFO(name << ": max |bertx - reference| " << diff << " of max |grad| " << scale);
    CHECK(diff <= 1e-6 * std::max(1.0, scale));
    ++checked;
  }
  CHECK(checked >= 9);
}

}  // namespace

TEST_CASE("distillation losses and the student's gradients equal the PyTorch reference on the golden model") {
  test::TempDir d;
  write_teacher(d / "teacher");
  DistillOptions o = reference_options(d / "teacher");
  o.init_layers = {2};
  auto model = student(1);
  auto task = classification();
  task->attach(*model);
  Distiller distiller(host(), o, *task, *model, at::Device(at::kCPU));
  CHECK(distiller.projection().empty());  // same width: no projection
  distiller.init_student(*model);
  {  // the reference's nudge off the teacher (make_reference.py)
    at::NoGradGuard no_grad;
    auto params = model->module().named_parameters(true);
    params["bert.embeddings.LayerNorm.weight"].mul_(1.1);
    params["classifier.bias"].add_(0.05);
  }
  check_against(load_safetensors(kReference), distiller, *task, *model);
}

TEST_CASE("a student half the teacher's width learns through fit_dense, equal to the PyTorch reference") {
  test::TempDir d;
  write_teacher(d / "teacher");
  const TensorMap ref = load_safetensors(kFixtures + "/narrow.safetensors");
  auto model = student(1, kFixtures + "/narrow_config.json");
  auto task = classification();
  task->attach(*model);
  Distiller distiller(host(), reference_options(d / "teacher"), *task, *model, at::Device(at::kCPU));
  CHECK(distiller.projection() == "fit_dense 32 -> 64");
  // The projection is the student's: the optimizer and checkpoints see it under TinyBERT's name.
  auto params = model->module().named_parameters(true);
  REQUIRE(params.find("fit_dense.weight"));
  CHECK(params["fit_dense.weight"].sizes() == at::IntArrayRef{64, 32});
  CHECK(params["fit_dense.bias"].sizes() == at::IntArrayRef{64});
  TensorMap init;  // the reference's initialisation, fit_dense included
  for (const auto& [key, t] : ref)
    if (key.rfind("init.", 0) == 0) init[key.substr(5)] = t;
  const LoadReport loaded = load_weights(model->module(), init, "narrow.safetensors", /*require_encoder=*/true);
  CHECK(loaded.missing.empty());
  CHECK(loaded.unexpected.empty());
  check_against(ref, distiller, *task, *model);
}

TEST_CASE(
    "the soft loss counts masked rows only, is MSE for one-value rows, and the attention loss zeroes masked keys") {
  const at::Tensor s = at::randn({4, 3}), t = at::randn({4, 3});
  const at::Tensor mask = at::tensor({1, 0, 1, 0}) == 1;
  const at::Tensor kept = distill::soft_loss(s, t, 1.5, mask);
  const at::Tensor rows = at::tensor({0, 2});
  CHECK(kept.item<double>() ==
        doctest::Approx(distill::soft_loss(s.index_select(0, rows), t.index_select(0, rows), 1.5).item<double>()));
  CHECK(distill::soft_loss(s, s, 3.0).item<double>() == doctest::Approx(0.0).epsilon(1e-7));
  CHECK(distill::soft_loss(s, t, 1.0, at::zeros({4}, at::kBool)).item<double>() == 0.0);  // no rows: 0, not NaN
  const at::Tensor r = at::randn({5, 1}), q = at::randn({5, 1});
  CHECK(distill::soft_loss(r, q, 4.0).item<double>() == doctest::Approx(at::mse_loss(r, q).item<double>()));
  // Scores at masked keys (the last two of sequence 1) differ wildly and still count 0.
  at::Tensor a = at::randn({2, 2, 3, 3}), b = a.clone();
  b.index_put_({1, at::indexing::Slice(), at::indexing::Slice(), at::indexing::Slice(1, 3)}, 1e3);
  const at::Tensor mask2 = at::tensor({1, 1, 1, 1, 0, 0}).view({2, 3});
  CHECK(distill::attention_mse(a, b, mask2).item<double>() == doctest::Approx(0.0));
  CHECK(distill::attention_mse(a, b, at::ones({2, 3})).item<double>() > 1e4);
}

TEST_CASE("layer maps: uniform by default, checked when given") {
  CHECK(distill::layer_map({}, 3, 6, "layer_map") == std::vector<std::int64_t>{2, 4, 6});
  CHECK(distill::layer_map({}, 4, 12, "layer_map") == std::vector<std::int64_t>{3, 6, 9, 12});
  CHECK(distill::layer_map({}, 2, 3, "layer_map") == std::vector<std::int64_t>{1, 3});
  CHECK(distill::layer_map({1, 5}, 2, 6, "layer_map") == std::vector<std::int64_t>{1, 5});
  CHECK_THROWS_WITH(distill::layer_map({1}, 2, 6, "layer_map"),
                    "[distill] layer_map: 1 entries for a student of 2 layers (one teacher layer per student layer)");
  CHECK_THROWS_WITH(distill::layer_map({1, 7}, 2, 6, "init_layers"),
                    "[distill] init_layers: 7 is not a teacher layer (integers 1..6)");
  CHECK_THROWS_WITH(distill::layer_map({1, 2.5}, 2, 6, "layer_map"),
                    "[distill] layer_map: 2.5 is not a teacher layer (integers 1..6)");
}

TEST_CASE("a teacher without the task's head, or a student of another head count, is refused naming [distill]") {
  test::TempDir d;
  write_teacher(d / "bare", /*with_head=*/false);
  write_teacher(d / "teacher");
  DistillOptions o;
  o.teacher = d / "bare";
  auto model = student(1);
  auto task = classification();
  task->attach(*model);
  CHECK_THROWS_WITH_AS(Distiller(host(), o, *task, *model, at::Device(at::kCPU)),
                       doctest::Contains("its checkpoint has no head for the run's task"), Error);
  o.soft_weight = 0, o.hidden_weight = 1;  // intermediate layers alone: a teacher without the head will do
  CHECK_NOTHROW(Distiller(host(), o, *task, *model, at::Device(at::kCPU)));
  o.teacher = d / "teacher";
  o.layer_map = {3};
  CHECK_THROWS_WITH_AS(Distiller(host(), o, *task, *model, at::Device(at::kCPU)),
                       "[distill] layer_map: 3 is not a teacher layer (integers 1..2)", Error);
  // Attention scores are matched head by head: a student of 2 heads against the teacher's 4 is refused.
  o.layer_map.clear();
  o.attention_weight = 1;
  const std::string two_heads = d / "two_heads.json";
  test::write_text(two_heads, test::read_text(kFixtures + "/narrow_config.json"));
  {
    std::string text = test::read_text(two_heads);
    const std::string four = "\"num_attention_heads\": 4";
    const auto at = text.find(four);
    REQUIRE(at != std::string::npos);
    text.replace(at, four.size(), "\"num_attention_heads\": 2");
    test::write_text(two_heads, text);
  }
  auto narrow = student(1, two_heads);
  task->attach(*narrow);
  CHECK_THROWS_WITH_AS(
      Distiller(host(), o, *task, *narrow, at::Device(at::kCPU)),
      doctest::Contains("[distill] attention_weight: the student has 2 attention heads, the teacher 4"), Error);
  // Hidden states alone: the narrower student is taken, with its projection.
  o.attention_weight = 0;
  Distiller widened(host(), o, *task, *narrow, at::Device(at::kCPU));
  CHECK(widened.projection() == "fit_dense 32 -> 64");
}
