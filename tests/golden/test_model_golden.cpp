// test_model_golden.cpp - the BERT plugin against Hugging Face transformers v4.26.1 (../shared/golden/model):
// forward outputs, losses and gradients of the pretraining, span-QA and classification models in fp32 (on the
// CPU, and on a CUDA device where there is one), plus HF-folder round trip and weight-loading errors.
#include "doctest_torch.hpp"

#include <cmath>
#include <optional>

#include <ATen/ATen.h>

#include "bertx/compat.hpp"
#include "bertx/losses.hpp"
#include "bertx/model.hpp"
#include "host/plugin_host.hpp"
#include "test_util.hpp"
#include "io/weights.hpp"

using namespace bertx;

namespace {

const std::string kGolden = std::string(BERTX_SHARED_DIR) + "/golden/model";

TensorMap golden(const std::string& name) { return load_safetensors(kGolden + "/" + name + ".safetensors"); }

PluginHost& host() {
  static PluginHost h = [] {
    PluginHost x;
    x.load(std::string(BERTX_BUILD_PLUGIN_DIR) + "/libbertx_model_bert.so");
    return x;
  }();
  return h;
}

std::shared_ptr<Model> golden_model(Head head, const std::vector<std::string>& head_files = {},
                                    bool padding_idx = true) {
  auto m = host().create<Model>(
      Kind::Model, "bert",
      host().options_for(
          Kind::Model, "bert",
          {{"preset", std::string("custom")}, {"config", kGolden + "/config.json"}, {"padding_idx", padding_idx}}));
  TensorMap w = golden("weights");
  for (const auto& f : head_files)
    for (auto& [k, v] : golden(f)) w[k] = v;
  m->add_head(head, head == Head::Classification ? w.at("classifier.weight").size(0) : 2);
  LoadReport r = load_weights(m->module(), w, kGolden);
  CHECK(r.missing.empty());
  m->module().eval();
  return m;
}

Batch golden_batch() {
  TensorMap in = golden("inputs");
  Batch b;
  for (const char* k : {"input_ids", "token_type_ids", "attention_mask"}) b.tensors[k] = in.at(k);
  return b;
}

double max_abs(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

#define CHECK_CLOSE(name, a, b, tol)          \
  do {                                        \
    const double err_ = max_abs(a, b);        \
    INFO(name << ": max abs error " << err_); \
    CHECK(err_ <= (tol));                     \
  } while (0)

// Every parameter's gradient (on whatever device) against `ref`, each within `tol`: how many, and the worst error.
std::pair<int, double> check_grads(Model& m, const TensorMap& ref, double tol) {
  int compared = 0;
  double worst = 0;
  for (const auto& item : m.module().named_parameters(true)) {
    REQUIRE(ref.count(item.key()) == 1);
    REQUIRE(item.value().grad().defined());
    const double err = max_abs(item.value().grad().cpu(), ref.at(item.key()));
    INFO(item.key() << ": max abs error " << err);
    CHECK(err <= tol);
    worst = std::max(worst, err);
    ++compared;
  }
  return {compared, worst};
}

// A reduced-precision sequence_output against the golden fp32 one, at real tokens (the unpadded encoder leaves
// zeros at padded positions).
double error_at_real_tokens(const at::Tensor& seq, const TensorMap& ref) {
  const at::Tensor real = golden_batch().at("attention_mask").to(at::kBool).unsqueeze(-1);  // (B, S, 1)
  return max_abs(seq.to(at::kFloat).cpu().masked_select(real), ref.at("sequence_output").masked_select(real));
}

}  // namespace

TEST_CASE("BERT pretraining forward and losses match Hugging Face in fp32") {
  auto m = golden_model(Head::Pretraining);
  TensorMap ref = golden("pretraining_outputs"), in = golden("inputs");
  EncoderOutput out = m->encode(golden_batch(), true);
  REQUIRE(out.hidden_states.size() == 3);
  for (int i = 0; i < 3; ++i)
    CHECK_CLOSE("hidden_states." << i, out.hidden_states[i], ref.at("hidden_states." + std::to_string(i)), 1e-5);
  CHECK_CLOSE("sequence_output", out.sequence_output, ref.at("sequence_output"), 1e-5);
  CHECK_CLOSE("pooled_output", out.pooled_output, ref.at("pooled_output"), 1e-5);
  at::Tensor all_logits = m->mlm_logits(out.sequence_output, {});
  CHECK_CLOSE("mlm_logits", all_logits, ref.at("mlm_logits"), 3e-5);
  at::Tensor nsp = m->nsp_logits(out.pooled_output);
  CHECK_CLOSE("nsp_logits", nsp, ref.at("nsp_logits"), 1e-5);

  // Fast path: logits at masked positions only, (B, P) layout, equal to the full logits' rows.
  at::Tensor pairs = in.at("masked_lm_positions");  // (N, 2)
  at::Tensor gathered =
      m->mlm_logits(out.sequence_output, pairs.select(1, 1).view({-1, 1}).narrow(0, 0, 1).expand({3, 1}));
  for (int b = 0; b < 3; ++b)
    CHECK_CLOSE("gathered row", gathered[b][0], all_logits[b][pairs[0][1].item<std::int64_t>()], 1e-5);

  at::Tensor mlm = losses::mlm(all_logits, in.at("masked_lm_labels"));
  at::Tensor nsp_loss = losses::classification(nsp, in.at("next_sentence_label"));
  CHECK_CLOSE("mlm_loss", mlm, ref.at("mlm_loss"), 1e-5);
  CHECK_CLOSE("nsp_loss", nsp_loss, ref.at("nsp_loss"), 1e-5);
  CHECK_CLOSE("total_loss", mlm + nsp_loss, ref.at("total_loss"), 1e-5);
}

TEST_CASE("BERT pretraining gradients match Hugging Face (with and without padding_idx)") {
  for (bool padding_idx : {true, false}) {
    CAPTURE(padding_idx);
    auto m = golden_model(Head::Pretraining, {}, padding_idx);
    TensorMap in = golden("inputs");
    EncoderOutput out = m->encode(golden_batch(), false);
    at::Tensor loss = losses::mlm(m->mlm_logits(out.sequence_output, {}), in.at("masked_lm_labels")) +
                      losses::classification(m->nsp_logits(out.pooled_output), in.at("next_sentence_label"));
    loss.backward();
    TensorMap ref = golden("pretraining_grads");
    if (!padding_idx)
      ref["bert.embeddings.word_embeddings.weight"] =
          golden("pretraining_grads_no_padding_idx").at("bert.embeddings.word_embeddings.weight");
    const auto [compared, worst] = check_grads(*m, ref, 1e-4);
    MESSAGE("padding_idx=" << padding_idx << ": " << compared << " gradients, worst max abs error " << worst);
    CHECK(compared == 46);
  }
}

// The MLM decoder writes its dense gradient of the tied word embedding into .grad itself and the lookup's sparse
// one is added there by autograd (bert.cpp, TiedDecoderWeightFn): over two backward passes (gradient accumulation)
// both parts of both passes must land, dense, in the one .grad.
TEST_CASE("the tied word-embedding gradient accumulates dense and sparse parts over two backward passes") {
  auto m = golden_model(Head::Pretraining, {}, true);
  TensorMap in = golden("inputs");
  for (int pass = 0; pass < 2; ++pass) {
    EncoderOutput out = m->encode(golden_batch(), false);
    at::Tensor loss = losses::mlm(m->mlm_logits(out.sequence_output, {}), in.at("masked_lm_labels")) +
                      losses::classification(m->nsp_logits(out.pooled_output), in.at("next_sentence_label"));
    loss.backward();
  }
  const at::Tensor grad = m->module().named_parameters(true)["bert.embeddings.word_embeddings.weight"].grad();
  CHECK_FALSE(grad.is_sparse());
  TensorMap twice = golden("pretraining_grads");
  for (auto& [name, t] : twice) t = t * 2;
  const auto [compared, worst] = check_grads(*m, twice, 2e-4);
  MESSAGE(compared << " gradients after two passes, worst max abs error against twice Hugging Face's " << worst);
  CHECK(compared == 46);
}

TEST_CASE("BERT span-QA head matches Hugging Face: logits, loss and gradients") {
  auto m = golden_model(Head::SpanQA, {"qa_head"});
  TensorMap ref = golden("qa_outputs"), in = golden("inputs");
  CHECK(m->module().named_parameters(true).find("bert.pooler.dense.weight") ==
        nullptr);  // BertForQuestionAnswering has none
  EncoderOutput out = m->encode(golden_batch(), false);
  at::Tensor logits = m->span_logits(out.sequence_output);
  at::Tensor start = logits.select(-1, 0), end = logits.select(-1, 1);
  CHECK_CLOSE("start_logits", start, ref.at("start_logits"), 1e-5);
  CHECK_CLOSE("end_logits", end, ref.at("end_logits"), 1e-5);
  at::Tensor loss = losses::span(start, end, in.at("start_positions"), in.at("end_positions"));
  CHECK_CLOSE("loss", loss, ref.at("loss"), 1e-5);
  loss.backward();
  auto params = m->module().named_parameters(true);
  for (const char* p : {"bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.attention.self.query.weight",
                        "qa_outputs.weight", "qa_outputs.bias"})
    CHECK_CLOSE(p, params[p].grad(), ref.at(std::string("grad.") + p), 1e-4);
}

TEST_CASE("BERT classification head matches Hugging Face: logits, loss and gradients") {
  auto m = golden_model(Head::Classification, {"cls_head"});
  TensorMap ref = golden("cls_outputs"), in = golden("inputs");
  EncoderOutput out = m->encode(golden_batch(), false);
  at::Tensor logits = m->classifier_logits(out.pooled_output);
  CHECK_CLOSE("logits", logits, ref.at("logits"), 1e-5);
  at::Tensor loss = losses::classification(logits, in.at("cls_labels"));
  CHECK_CLOSE("loss", loss, ref.at("loss"), 1e-5);
  loss.backward();
  auto params = m->module().named_parameters(true);
  for (const char* p : {"bert.pooler.dense.weight", "classifier.weight", "classifier.bias"})
    CHECK_CLOSE(p, params[p].grad(), ref.at(std::string("grad.") + p), 1e-4);
}

TEST_CASE("bf16 autocast on the CPU stays close to fp32") {
  auto m = golden_model(Head::Pretraining);
  TensorMap ref = golden("pretraining_outputs");
  at::Tensor seq;
  {
    compat::AutocastScope bf16(at::kCPU, at::kBFloat16);
    seq = m->encode(golden_batch(), false).sequence_output.to(at::kFloat);
  }
  const double err = error_at_real_tokens(seq, ref);
  MESSAGE("bf16 sequence_output max abs error at real tokens " << err);
  CHECK(err < 0.1);  // bf16 has ~3 significant digits; LayerNorm outputs are O(1)
  CHECK(err > 0);    // and it did run in reduced precision
}

// The GPU machine runs the golden label too (tools/gpu/check.sh): the same golden outputs and gradients on a CUDA
// device in fp32 (TF32 off; reductions in another order, so 1e-4) and, under bf16 autocast, within bf16's precision.
TEST_CASE("on a CUDA device BERT matches Hugging Face in fp32 and stays close under bf16 autocast") {
  if (!at::globalContext().hasCUDA()) {
    MESSAGE("no CUDA device here: this case runs on the GPU machine (tools/gpu/check.sh)");
    return;
  }
  const at::Device cuda(at::kCUDA, 0);
  compat::set_cuda_tf32(false);
  auto m = golden_model(Head::Pretraining);
  m->module().to(cuda);
  TensorMap ref = golden("pretraining_outputs"), in = golden("inputs"), grads = golden("pretraining_grads");
  Batch batch = golden_batch();
  for (auto& [k, v] : batch.tensors) v = v.to(cuda);
  EncoderOutput out = m->encode(batch, false);
  CHECK_CLOSE("sequence_output", out.sequence_output.cpu(), ref.at("sequence_output"), 1e-4);
  at::Tensor loss = losses::mlm(m->mlm_logits(out.sequence_output, {}), in.at("masked_lm_labels").to(cuda)) +
                    losses::classification(m->nsp_logits(out.pooled_output), in.at("next_sentence_label").to(cuda));
  CHECK_CLOSE("total_loss", loss.cpu(), ref.at("total_loss"), 1e-4);
  loss.backward();
  CHECK(check_grads(*m, grads, 1e-4).first == 46);
  at::Tensor seq;
  {
    compat::AutocastScope bf16(at::kCUDA, at::kBFloat16);
    seq = m->encode(batch, false).sequence_output;
  }
  const double err = error_at_real_tokens(seq, ref);
  MESSAGE("CUDA bf16 sequence_output max abs error at real tokens " << err);
  CHECK(err < 0.1);
  CHECK(err > 0);
}

TEST_CASE("a model saved as a Hugging Face folder loads back identically") {
  test::TempDir d;
  auto m = golden_model(Head::Pretraining);
  save_hf_folder(*m, d / "hf", std::string(BERTX_SHARED_DIR) + "/golden/tokenizer/vocab.txt");
  MetadataMap meta;
  TensorMap saved = load_safetensors(d / "hf/model.safetensors", &meta);
  CHECK(meta["format"] == "pt");                              // transformers refuses safetensors without it
  CHECK(saved.count("cls.predictions.decoder.weight") == 0);  // tied: stored once, as HF does
  auto again = host().create<Model>(
      Kind::Model, "bert",
      host().options_for(Kind::Model, "bert", {{"preset", std::string("custom")}, {"config", d / "hf/config.json"}}));
  again->add_head(Head::Pretraining);
  load_weights(again->module(), saved, d / "hf");
  again->module().eval();
  CHECK(max_abs(again->encode(golden_batch(), false).pooled_output, m->encode(golden_batch(), false).pooled_output) ==
        0);
  CHECK(std::filesystem::file_size(d / "hf/vocab.txt") ==
        std::filesystem::file_size(std::string(BERTX_SHARED_DIR) + "/golden/tokenizer/vocab.txt"));
}

TEST_CASE("weight loading errors name the tensor and the shapes") {
  auto m = host().create<Model>(
      Kind::Model, "bert",
      host().options_for(Kind::Model, "bert",
                         {{"preset", std::string("custom")}, {"config", kGolden + "/config.json"}}));
  TensorMap w = golden("weights");
  w["bert.encoder.layer.1.output.dense.weight"] = at::zeros({64, 128});
  try {
    load_weights(m->module(), w, "ckpt");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "ckpt: tensor 'bert.encoder.layer.1.output.dense.weight' has shape [64, 128] but the model's parameter has "
          "[64, 256] (wrong config.json for these weights?)");
  }
  w = golden("weights");
  w.erase("bert.encoder.layer.1.output.dense.bias");
  try {
    load_weights(m->module(), w, "ckpt");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("ckpt: missing encoder tensor 'bert.encoder.layer.1.output.dense.bias' [64]") ==
          0);
  }
  // Legacy TF-port names load into the modern ones.
  w = golden("weights");
  w["bert.embeddings.LayerNorm.gamma"] = w.at("bert.embeddings.LayerNorm.weight");
  w.erase("bert.embeddings.LayerNorm.weight");
  CHECK(load_weights(m->module(), w, "ckpt").missing.empty());
}

TEST_CASE("presets have the seeds' shapes and initialisation is truncated normal") {
  auto make = [](const std::string& preset) {
    return host().create<Model>(Kind::Model, "bert", host().options_for(Kind::Model, "bert", {{"preset", preset}}));
  };
  auto tiny = make("tiny");
  CHECK(tiny->config().hidden_size == 128);
  at::Tensor w = tiny->module().named_parameters(true)["bert.encoder.layer.0.attention.self.query.weight"];
  const double std = tiny->config().initializer_range;
  CHECK(w.abs().max().item<double>() <= 2 * std + 1e-7);
  CHECK(w.std().item<double>() == doctest::Approx(0.88 * std).epsilon(0.05));  // std of N(0,1) truncated at 2 = 0.88
  CHECK(tiny->module()
            .named_parameters(true)["bert.encoder.layer.0.attention.self.query.bias"]
            .abs()
            .max()
            .item<double>() == 0);
  CHECK(tiny->module().named_parameters(true)["bert.embeddings.word_embeddings.weight"][0].abs().max().item<double>() ==
        0);
  try {
    make("bert-huge");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("unknown BERT preset 'bert-huge'") != std::string::npos);
  }
}

TEST_CASE("activation checkpointing gives the same loss and gradients with dropout on") {
  auto run = [](bool checkpointing) {
    auto m = host().create<Model>(Kind::Model, "bert",
                                  host().options_for(Kind::Model, "bert",
                                                     {{"preset", std::string("custom")},
                                                      {"config", kGolden + "/config.json"},
                                                      {"activation_checkpointing", checkpointing},
                                                      {"unpadded", false}}));  // same dropout draws
    m->add_head(Head::Pretraining);
    load_weights(m->module(), golden("weights"), kGolden);
    m->module().train();  // dropout active: the replay must reuse the same masks
    at::manual_seed(123);
    TensorMap in = golden("inputs");
    EncoderOutput out = m->encode(golden_batch(), false);
    at::Tensor loss = losses::mlm(m->mlm_logits(out.sequence_output, {}), in.at("masked_lm_labels")) +
                      losses::classification(m->nsp_logits(out.pooled_output), in.at("next_sentence_label"));
    loss.backward();
    TensorMap grads;
    for (const auto& item : m->module().named_parameters(true)) grads[item.key()] = item.value().grad().clone();
    grads["loss"] = loss.detach();
    return grads;
  };
  TensorMap plain = run(false), checkpointed = run(true);
  double worst = 0;
  for (const auto& [k, v] : plain) worst = std::max(worst, max_abs(v, checkpointed.at(k)));
  MESSAGE("activation checkpointing: worst max abs difference " << worst);
  CHECK(worst <= 1e-6);
  CHECK(max_abs(plain.at("loss"), golden("pretraining_outputs").at("total_loss")) > 1e-4);  // dropout really was on
}

// The unpadded (packed) encoder against the padded one, in fp32 and under bf16 autocast: the same outputs at real
// tokens, pooled output, MLM logits and gradients. Lengths {16, 9, 4, 12} (B S^2 / sum L^2 = 2.1) run the packed
// attention batched over the padded layout, {64, 30 x 6, 35} (ratio 3.06, mean 34.9) per sequence (packed.hpp).
// The golden model with the unpadded (packed) encoder on or off, in eval mode (no dropout: both paths must agree
// element for element).
static auto golden_model_unpadded(bool unpadded, Head head) {
  auto m = host().create<Model>(
      Kind::Model, "bert",
      host().options_for(
          Kind::Model, "bert",
          {{"preset", std::string("custom")}, {"config", kGolden + "/config.json"}, {"unpadded", unpadded}}));
  m->add_head(head);
  TensorMap w = golden("weights");
  if (head == Head::SpanQA)
    for (auto& [k, v] : golden("qa_head")) w[k] = v;
  load_weights(m->module(), w, kGolden);
  m->module().eval();
  return m;
}

TEST_CASE("the unpadded encoder matches the padded one at real tokens, values and gradients") {
  const auto make = golden_model_unpadded;
  struct Case {
    std::int64_t S;
    std::vector<std::int64_t> lengths, positions;  // B lengths, (B, 2) MLM positions at real tokens
  };
  const std::vector<Case> cases = {
      {16, {16, 9, 4, 12}, {1, 15, 3, 8, 0, 2, 1, 11}},
      {64, {64, 30, 30, 30, 30, 30, 30, 35}, {1, 63, 3, 29, 0, 2, 1, 11, 5, 6, 7, 8, 9, 10, 20, 34}}};
  at::Tensor real;
  Batch batch;
  for (const Case& c : cases)
    for (bool bf16 : {false, true}) {
      const std::int64_t S = c.S;  // plain locals, not structured bindings: lambdas below capture them (clang < 16)
      const std::vector<std::int64_t>& lens = c.lengths;
      const std::vector<std::int64_t>& pos = c.positions;
      CAPTURE(S);
      CAPTURE(bf16);
      const auto B = static_cast<std::int64_t>(lens.size());
      at::manual_seed(7);
      batch.tensors["input_ids"] = at::randint(1, 100, {B, S}, at::kLong);
      batch.tensors["token_type_ids"] =
          (at::arange(S, at::kLong) >= 6).to(at::kLong).unsqueeze(0).expand({B, S}).contiguous();
      const at::Tensor lengths = at::tensor(lens);
      const at::Tensor mask = (at::arange(S, at::kLong).unsqueeze(0) < lengths.unsqueeze(1)).to(at::kLong);  // (B, S)
      batch.tensors["attention_mask"] = mask;
      const at::Tensor positions = at::tensor(pos).view({B, 2});  // (B, 2)
      real = mask.to(at::kBool).unsqueeze(-1);                    // (B, S, 1)
      const double tol = bf16 ? 2e-2 : 2e-5;
      auto run = [&](bool unpadded) {
        auto m = make(unpadded, Head::Pretraining);
        TensorMap r;
        {
          std::optional<compat::AutocastScope> autocast;
          if (bf16) autocast.emplace(at::kCPU, at::kBFloat16);
          EncoderOutput out = m->encode(batch, false);
          r["seq"] = out.sequence_output.to(at::kFloat);
          r["pooled"] = out.pooled_output.to(at::kFloat);
          r["mlm"] = m->mlm_logits(out.sequence_output, positions).to(at::kFloat);
        }
        (r["mlm"].logsumexp(-1).sum() + r["pooled"].square().sum()).backward();
        for (const auto& item : m->module().named_parameters(true))
          if (item.value().grad().defined()) r["grad." + item.key()] = item.value().grad().clone();
        return r;
      };
      TensorMap packed = run(true), padded = run(false);
      CHECK(packed.at("seq").masked_select(real.logical_not()).abs().max().item<double>() ==
            0.0);  // the packed path ran
      CHECK(padded.at("seq").masked_select(real.logical_not()).abs().max().item<double>() > 0.0);
      CHECK_CLOSE("sequence_output at real tokens", packed.at("seq").masked_select(real),
                  padded.at("seq").masked_select(real), tol);
      CHECK_CLOSE("pooled_output", packed.at("pooled"), padded.at("pooled"), tol);
      CHECK_CLOSE("mlm_logits", packed.at("mlm"), padded.at("mlm"), bf16 ? 0.1 : 1e-4);
      int grads = 0;
      for (const auto& [k, v] : padded) {
        if (k.rfind("grad.", 0) != 0) continue;
        REQUIRE(packed.count(k) == 1);
        CHECK(packed.at(k).layout() == at::kStrided);
        // bf16: both paths round their products to bf16 in different orders; the bound scales with the gradient
        // (a few bf16 steps, 2^-8 relative, of its largest element).
        const double scale = std::max(1.0, v.abs().max().item<double>());
        INFO(k << ": largest element " << scale);
        CHECK_CLOSE(k, packed.at(k), v, bf16 ? 5e-2 * scale : 1e-4);
        ++grads;
      }
      CHECK(grads >= 40);
    }

  // A span-QA head under autograd keeps the padded path (its loss reads every position); without autograd
  // (evaluation) it packs, and its logits at real tokens agree.
  auto qa_packed = make(true, Head::SpanQA), qa_padded = make(false, Head::SpanQA);
  const at::Tensor with_grad = qa_packed->span_logits(qa_packed->encode(batch).sequence_output);
  CHECK_CLOSE("span logits under autograd", with_grad, qa_padded->span_logits(qa_padded->encode(batch).sequence_output),
              1e-5);
  at::NoGradGuard no_grad;
  const at::Tensor a = qa_packed->span_logits(qa_packed->encode(batch).sequence_output);  // (B, S, 2)
  const at::Tensor b = qa_padded->span_logits(qa_padded->encode(batch).sequence_output);
  CHECK(max_abs(a, b) > 1e-3);  // padded positions differ: the packed path ran
  CHECK_CLOSE("span logits at real tokens", a.masked_select(real), b.masked_select(real), 2e-5);
}

// The squad task's loss (softmax over real tokens) under autograd: a batch marked padding_unread packs even with
// the span-QA head, and its loss and every gradient equal the padded encoder's with the same masked loss.
TEST_CASE("span-QA training on a batch whose padding is unread packs and matches the padded encoder") {
  const std::int64_t B = 4, S = 64;  // 64: each of the CE kernel's 16 lanes sums 4 masked logits (finite, not -inf)
  at::manual_seed(11);
  Batch batch;
  batch.tensors["input_ids"] = at::randint(1, 100, {B, S}, at::kLong);
  batch.tensors["token_type_ids"] =
      (at::arange(S, at::kLong) >= 5).to(at::kLong).unsqueeze(0).expand({B, S}).contiguous();
  const at::Tensor lengths = at::tensor(std::vector<std::int64_t>{64, 20, 9, 40});
  const at::Tensor mask = (at::arange(S, at::kLong).unsqueeze(0) < lengths.unsqueeze(1)).to(at::kLong);  // (B, S)
  batch.tensors["attention_mask"] = mask;
  batch.padding_unread = true;
  const at::Tensor start = at::tensor(std::vector<std::int64_t>{3, 6, 0, 9}),
                   end = at::tensor(std::vector<std::int64_t>{5, 6, 0, 9});
  auto run = [&](bool unpadded) {
    auto m = golden_model_unpadded(unpadded, Head::SpanQA);
    const at::Tensor seq = m->encode(batch).sequence_output;
    const at::Tensor logits = m->span_logits(seq);  // (B, S, 2)
    TensorMap r;
    r["loss"] = losses::span(logits.select(2, 0), logits.select(2, 1), start, end, mask);
    r["loss"].backward();
    r["padded_seq"] = seq.masked_select(mask.eq(0).unsqueeze(-1)).abs().max().detach();
    for (const auto& item : m->module().named_parameters(true))
      if (item.value().grad().defined()) r["grad." + item.key()] = item.value().grad().clone();
    return r;
  };
  TensorMap packed = run(true), padded = run(false);
  CHECK(packed.at("padded_seq").item<double>() == 0.0);  // the packed path ran under autograd
  CHECK(padded.at("padded_seq").item<double>() > 0.0);
  CHECK(std::isfinite(packed.at("loss").item<double>()));
  CHECK_CLOSE("masked span loss", packed.at("loss"), padded.at("loss"), 1e-5);
  int grads = 0;
  for (const auto& [k, v] : padded) {
    if (k.rfind("grad.", 0) != 0) continue;
    REQUIRE(packed.count(k) == 1);
    CHECK_CLOSE(k, packed.at(k).to_dense(), v.to_dense(), 1e-4);
    ++grads;
  }
  CHECK(grads == static_cast<int>(golden_model_unpadded(false, Head::SpanQA)->module().named_parameters(true).size()));
  // The mask matters: over all S positions the padded encoder's loss differs (its padded logits take weight).
  auto m = golden_model_unpadded(false, Head::SpanQA);
  at::NoGradGuard no_grad;
  const at::Tensor logits = m->span_logits(m->encode(batch).sequence_output);
  CHECK(max_abs(losses::span(logits.select(2, 0), logits.select(2, 1), start, end), padded.at("loss")) > 1e-4);
}

// Inference under bf16 autocast keeps half copies of the weights between forwards: a weight changed in place
// (a version bump) must be re-cast, so the output equals a fresh model's with the same change.
TEST_CASE("inference under autocast re-casts a weight changed in place") {
  auto fresh = [] { return golden_model(Head::Pretraining); };
  auto changed = [](Model& m) {
    at::NoGradGuard no_grad;
    m.module().named_parameters(true)["bert.encoder.layer.0.attention.self.query.weight"].add_(0.05);
  };
  auto forward = [](Model& m) {
    at::NoGradGuard no_grad;
    compat::AutocastScope bf16(at::kCPU, at::kBFloat16);
    return m.encode(golden_batch(), false).sequence_output.to(at::kFloat);
  };
  auto m = fresh();
  const at::Tensor before = forward(*m);
  CHECK(max_abs(forward(*m), before) == 0.0);  // the kept copies give the same result
  changed(*m);
  const at::Tensor after = forward(*m);
  CHECK(max_abs(after, before) > 1e-3);
  auto reference = fresh();
  changed(*reference);
  CHECK(max_abs(after, forward(*reference)) == 0.0);
}
