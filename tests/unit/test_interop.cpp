// test_interop.cpp - other trainers' checkpoints (core/src/io/interop.*, tf_bundle.*, pt_archive.*) on the
// fixtures that tools/interop/make_fixtures.py wrote with the real producers (TensorFlow's Saver, torch.save):
// every tensor equals the reference Hugging Face model's, and damaged files give one-line bertx::Errors.
#include "doctest_torch.hpp"

#include <filesystem>

#include "io/interop.hpp"
#include "io/interop_names.hpp"
#include "io/pt_archive.hpp"
#include "io/tf_bundle.hpp"
#include "test_util.hpp"

using namespace bertx;
namespace fs = std::filesystem;

static const std::string kFix = std::string(BERTX_SOURCE_DIR) + "/tests/fixtures/interop";

// The largest |a - b| over the reference model's tensors (the tied decoder copy excluded); every one must exist.
static double max_diff_to_reference(const TensorMap& got) {
  const TensorMap ref = load_safetensors(kFix + "/reference/model.safetensors");
  double worst = 0;
  int n = 0;
  for (const auto& [name, t] : ref) {
    if (name.rfind("cls.predictions.decoder", 0) == 0 || name.find("position_ids") != std::string::npos) continue;
    INFO(name);
    REQUIRE(got.count(name) == 1);
    REQUIRE(got.at(name).sizes() == t.sizes());
    worst = std::max(worst, (got.at(name).to(at::kDouble) - t.to(at::kDouble)).abs().max().item<double>());
    ++n;
  }
  CHECK(n == 46);  // 5 embedding + 2 x 16 layer + 2 pooler + 7 head tensors of the 2-layer reference
  return worst;
}

static std::string copy_dir(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

// Calls load() on `file` with each byte (every `stride`-th) flipped and at each truncation: it must load or throw
// a non-empty one-line bertx::Error, never anything else. Returns how many variants were refused.
template <class F>
static int damage_each_byte(const std::string& file, std::size_t stride, F&& load) {
  const std::string orig = test::read_text(file);
  int refused = 0;
  auto attempt = [&](const std::string& bytes) {
    test::write_text(file, bytes);
    try {
      load();
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK(!m.empty());
      CHECK(m.find('\n') == std::string::npos);
      ++refused;
    }
  };
  for (std::size_t i = 0; i < orig.size(); i += stride) {
    std::string b = orig;
    b[i] = static_cast<char>(b[i] ^ 0x5a);
    attempt(b);
  }
  for (std::size_t n : {std::size_t{0}, std::size_t{7}, orig.size() / 3, orig.size() / 2, orig.size() - 1})
    attempt(orig.substr(0, n));
  test::write_text(file, orig);
  return refused;
}

TEST_CASE("Google's TF BERT checkpoint (bert_model.ckpt) equals the reference model, kernels transposed") {
  const ModelSource s = find_model_source(kFix + "/google");
  CHECK(s.format == "tensorflow");
  CHECK(s.weights == kFix + "/google/bert_model.ckpt");
  CHECK(s.config == kFix + "/google/bert_config.json");
  CHECK(max_diff_to_reference(load_model_weights(s)) == 0.0);
  // The raw bundle: header, shapes and the step counter are as TensorFlow wrote them.
  tf::Bundle b(kFix + "/google/bert_model.ckpt");
  CHECK(b.num_shards() == 1);
  bool kernel = false;
  for (const auto& e : b.entries())
    if (e.name == "bert/encoder/layer_1/intermediate/dense/kernel") {
      kernel = true;
      CHECK((e.shape == std::vector<std::int64_t>{32, 64}));  // (in, out): transposed on load
    }
  CHECK(kernel);
}

TEST_CASE("BioBERT's layout (model.ckpt-1000000, adam slots, global_step) loads, found by its .index") {
  const ModelSource s = find_model_source(kFix + "/biobert_v1.1_pubmed");
  CHECK(s.weights == kFix + "/biobert_v1.1_pubmed/model.ckpt-1000000");
  std::size_t slots = 0;
  const tf::Bundle bundle(s.weights);
  for (const auto& e : bundle.entries()) slots += e.name.find("/adam_") != std::string::npos || e.name == "global_step";
  CHECK(slots == 2 * 46 + 1);  // present in the file, left out of the weights
  CHECK(max_diff_to_reference(load_model_weights(s)) == 0.0);
  // The checkpoint file of the training machine names an absolute path elsewhere: the folder's file is used.
  test::TempDir d;
  const std::string dir = copy_dir(kFix + "/biobert_v1.1_pubmed", d / "bio");
  test::write_text(dir + "/checkpoint", "model_checkpoint_path: \"/home/someone/pretrain/model.ckpt-1000000\"\n");
  CHECK(tf::find_checkpoint_prefix(dir) == dir + "/model.ckpt-1000000");
  // The prefix, the .index and the data file name the same checkpoint.
  for (const std::string f :
       {"/model.ckpt-1000000", "/model.ckpt-1000000.index", "/model.ckpt-1000000.data-00000-of-00001"})
    CHECK(find_model_source(dir + f).weights == dir + "/model.ckpt-1000000");
}

TEST_CASE("a TF2 object-based checkpoint and an unknown variable are refused in one line naming them") {
  const std::string e = test::error_of([] { load_tf_checkpoint(kFix + "/tf2_object/ckpt"); });
  CHECK(e.find("TF2 object-based checkpoint") != std::string::npos);
  CHECK(e.find("ckpt.index") != std::string::npos);
  const std::string u =
      test::error_of([] { interop::from_tf("bert/encoder/layer_0/attention/self/qeury/kernel", "x"); });
  CHECK(u.find("'bert/encoder/layer_0/attention/self/qeury/kernel'") != std::string::npos);
  CHECK(interop::from_tf("bert/encoder/layer_3/output/dense/kernel/adam_m", "x").name.empty());
  CHECK(interop::from_tf("global_step", "x").name.empty());
  const auto m = interop::from_tf("bert/encoder/layer_11/attention/output/LayerNorm/beta", "x");
  CHECK(m.name == "bert.encoder.layer.11.attention.output.LayerNorm.bias");
  CHECK(!m.transpose);
  CHECK(interop::from_tf("cls/seq_relationship/output_weights", "x").name == "cls.seq_relationship.weight");
  CHECK(interop::from_nvidia("module.bert.pooler.dense_act.weight", "x").name == "bert.pooler.dense.weight");
}

TEST_CASE("NVIDIA's ckpt_N.pt (dense_act names, padded vocab, optimizer and Python objects) equals the reference") {
  for (const char* dir : {"/nvidia", "/nvidia_module"}) {
    INFO(dir);
    const ModelSource s = find_model_source(kFix + dir);
    CHECK(s.format == "nvidia-pytorch");
    CHECK(s.weights == kFix + dir + "/ckpt_8.pt");
    std::vector<std::string> notes;
    const TensorMap t = load_model_weights(s, &notes);
    REQUIRE(notes.size() == 1);
    CHECK(notes[0].find("padded to 104 rows (a multiple of 8) trimmed to the 99 tokens") != std::string::npos);
    CHECK(max_diff_to_reference(t) == 0.0);
  }
  pt::Archive a(kFix + "/nvidia/ckpt_8.pt");
  CHECK(a.state_dict_key() == "model");
  // Untrimmed, the padding rows are there; a vocab that no padding explains is refused.
  TensorMap raw = load_nvidia_checkpoint(kFix + "/nvidia/ckpt_8.pt");
  CHECK(raw.at("bert.embeddings.word_embeddings.weight").size(0) == 104);
  const std::string e = test::error_of([&] { trim_padded_vocab(raw, 90, "ckpt_8.pt"); });
  CHECK(e.find("104 rows but the vocab has 90 tokens") != std::string::npos);
  CHECK(trim_padded_vocab(raw, 104, "ckpt_8.pt").empty());
}

TEST_CASE("damaged .index / .data / .pt files give one-line errors, never a crash") {
  test::TempDir d;
  const std::string g = copy_dir(kFix + "/google", d / "google");
  const std::string prefix = g + "/bert_model.ckpt";
  CHECK(damage_each_byte(prefix + ".index", 1, [&] { load_tf_checkpoint(prefix); }) > 0);
  // Every byte of a weight is covered by its entry's crc32c (global_step, the last 8 bytes, is skipped unread).
  const std::string data = prefix + ".data-00000-of-00001";
  const std::string orig = test::read_text(data);
  for (std::size_t i : {std::size_t{0}, orig.size() / 2, orig.size() - 9}) {
    std::string b = orig;
    b[i] = static_cast<char>(b[i] ^ 1);
    test::write_text(data, b);
    const std::string m = test::error_of([&] { load_tf_checkpoint(prefix); });
    INFO(m);
    CHECK(m.find("fail their crc32c check") != std::string::npos);
  }
  test::write_text(data, orig.substr(0, orig.size() - 12));
  const std::string m = test::error_of([&] { load_tf_checkpoint(prefix); });
  INFO(m);
  CHECK(m.find("truncated shard") != std::string::npos);
  fs::remove(data);
  CHECK(test::error_of([&] { load_tf_checkpoint(prefix); }).find("cannot open the data shard") != std::string::npos);

  const std::string pt = copy_dir(kFix + "/nvidia", d / "nvidia") + "/ckpt_8.pt";
  CHECK(damage_each_byte(pt, 61, [&] { load_nvidia_checkpoint(pt); }) > 0);
  const std::string bytes = test::read_text(pt);
  test::write_text(pt, bytes.substr(0, bytes.size() / 2));
  CHECK(test::error_of([&] { load_nvidia_checkpoint(pt); }).find("not a zip archive") != std::string::npos);
}
