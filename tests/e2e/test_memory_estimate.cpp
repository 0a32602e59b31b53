// test_memory_estimate.cpp - `bertx run --dry-run`'s memory estimate: the parameter count of a real preset
// equals Hugging Face's (BertForPreTraining bert-base-uncased: 110,106,428), the optimizer's state slots
// are measured from the plugin (Adam-type: 2), the analytic activation count equals a hand count and, for
// 2-byte activations and I = 4H, Korthikanti et al.'s 34*S*H + 5*A*S^2 per layer plus our 4*S*H of fp32
// LayerNorm inputs; the largest batch is the largest that fits in 90% of the stated device memory.
#include "doctest_torch.hpp"

#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "test_util.hpp"
#include "train/memory_estimate.hpp"

using namespace bertx;

static const std::string kBertx = BERTX_BIN;
static const std::string kSrc = BERTX_SOURCE_DIR;

TEST_CASE("activation bytes per sequence equal a hand count") {
  // 1 layer, H 4, A 2, I 16, V 10, S 8, P 2, fp32 (e = 4):
  //   attention 5*4*8*4 + (2*4+1)*2*8*8 + 8*4 = 640 + 1152 + 32 = 1824
  //   MLP (4*4 + 2*4*16 + 4)*8 = 1184; LayerNorms 8*8*4 = 256; layer = 3264
  //   embeddings 13*8*4 = 416; head 2*4*(4 + 8 + 4) + 2*10*8 = 128 + 160 = 288; total 3968
  CHECK(activation_bytes_per_sequence(1, 4, 2, 16, 10, 8, 2, 4, false) == doctest::Approx(3968));
  // Checkpointing keeps 4*S*H per layer + one layer: 3 layers -> 416 + 3*128 + 3264 + 288
  CHECK(activation_bytes_per_sequence(3, 4, 2, 16, 10, 8, 2, 4, true) == doctest::Approx(416 + 3 * 128 + 3264 + 288));
}

TEST_CASE("a layer with 2-byte activations is Korthikanti's 34SH + 5AS^2 plus fp32 LayerNorm inputs") {
  const std::int64_t S = 128, H = 1024, A = 16;
  const double two_layers = activation_bytes_per_sequence(2, H, A, 4 * H, 30522, S, 20, 2, false);
  const double one_layer = activation_bytes_per_sequence(1, H, A, 4 * H, 30522, S, 20, 2, false);
  CHECK(two_layers - one_layer == doctest::Approx(34.0 * S * H + 5.0 * A * S * S + 4.0 * S * H));
}

TEST_CASE("the dry run counts bert-base's parameters as Hugging Face does and measures the optimizer state") {
  auto r = test::run_command(kBertx + " run " + kSrc +
                             "/experiments/phase1.toml --dry-run --set model.preset=bert-base-uncased "
                             "--set optimizer.type=\"adamw\" --set run.threads=1 --device-memory-gb 40");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("# memory estimate per device: 110106428 parameters, micro-batch 256 x seq 128 ([data] seq_len), "
                      "20 predictions") != std::string::npos);
  CHECK(r.output.find("(2 fp32 slots/parameter)") != std::string::npos);
  // weights fp32 + fp16 copies (amp) = 6 bytes/parameter, gradients 4, state 8.
  const double n = 110106428.0, gib = 1024.0 * 1024.0 * 1024.0;
  CHECK(r.output.find(fmt::format("weights {:.2f} GiB, gradients {:.2f} GiB, optimizer state {:.2f} GiB", 6 * n / gib,
                                  4 * n / gib, 8 * n / gib)) != std::string::npos);
  // largest batch: fixed + b * per_sequence <= 0.9 * 40 GiB < fixed + (b + 1) * per_sequence
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex(R"(\(([0-9.]+) MiB per sequence\))")));
  const double per_seq = std::stod(m[1]) * 1024 * 1024;
  REQUIRE(std::regex_search(r.output, m, std::regex(R"(largest micro-batch that fits: ([0-9]+))")));
  const double largest = std::stod(m[1]);
  const double fixed = 18 * n + 1.0 * gib;  // + CUDA runtime
  CHECK(fixed + largest * per_seq <= 0.9 * 40 * gib * 1.001);
  CHECK(fixed + (largest + 1) * per_seq > 0.9 * 40 * gib * 0.999);
}

TEST_CASE("the dry run refuses a sequence longer than the model's positions") {
  auto r = test::run_command(kBertx + " run " + kSrc + "/experiments/tiny_pretrain.toml --dry-run --seq-len 1024");
  CHECK(r.exit_code == 2);
  CHECK(r.output.find("sequence length 1024 (--seq-len) exceeds the model's max_position_embeddings 512") !=
        std::string::npos);
}

TEST_CASE("the dry run counts half weights with fp32 masters and half gradients under use_pure_fp16") {
  auto r = test::run_command(
      kBertx + " run " + kSrc +
      "/experiments/phase1.toml --dry-run --set model.preset=bert-base-uncased "
      "--set optimizer.type=\"adamw\" --set run.threads=1 --set train.use_pure_fp16=true --device-memory-gb 40");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // weights fp16 + fp32 masters = 6 bytes/parameter, gradients fp16 = 2 (amp without it: 4), state 8.
  const double n = 110106428.0, gib = 1024.0 * 1024.0 * 1024.0;
  CHECK(r.output.find(fmt::format("weights {:.2f} GiB, gradients {:.2f} GiB, optimizer state {:.2f} GiB", 6 * n / gib,
                                  2 * n / gib, 8 * n / gib)) != std::string::npos);
}
