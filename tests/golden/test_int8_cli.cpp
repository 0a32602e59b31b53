// test_int8_cli.cpp - int8 inference from the command line on the golden model folder: `bertx forward --precision
// int8` close to fp32 and not equal to it, `bertx quantize` writing a 4x smaller int8 folder that forward runs with
// identical int8 results, and the one-line refusals (int8 with --grads, a folder quantized twice, a bad flag).
#include <filesystem>

#include "doctest_torch.hpp"

#include "io/safetensors.hpp"
#include "test_util.hpp"

using namespace bertx;

namespace {

const std::string kGolden = std::string(BERTX_SHARED_DIR) + "/golden/model";

test::CommandResult forward(const std::string& model, const std::string& out, const std::string& extra) {
  return test::run_command(std::string(BERTX_BIN) + " forward --model " + model + " --inputs " + kGolden +
                           "/inputs.safetensors --out " + out + " --head classification " + extra);
}

double max_rel(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() /
         b.to(at::kDouble).abs().max().item<double>();
}

}  // namespace

TEST_CASE("bertx quantize + forward --precision int8: close to fp32, 4x smaller linears, same int8 either way") {
  if (std::string(BERTX_ONEDNN) != "1") {
    MESSAGE("skipped: built without oneDNN (int8 GEMMs)");
    return;
  }
  test::TempDir d;
  auto r = forward(kGolden, d / "fp32.safetensors", "");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  r = forward(kGolden, d / "int8.safetensors", "--precision int8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("activations quantized per token to +-") != std::string::npos);
  const TensorMap fp32 = load_safetensors(d / "fp32.safetensors"), int8 = load_safetensors(d / "int8.safetensors");
  for (const char* k : {"sequence_output", "pooled_output", "logits"}) {
    INFO(k);
    const double rel = max_rel(int8.at(k), fp32.at(k));
    CHECK(rel > 0);    // the linears really ran in int8
    CHECK(rel < 0.1);  // and still compute the same model
  }

  r = test::run_command(std::string(BERTX_BIN) + " quantize --model " + kGolden + " --out " + (d / "q"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto x = r.output.find("x smaller");
  REQUIRE(x != std::string::npos);
  const double ratio = std::stod(r.output.substr(r.output.rfind(", ", x) + 2));
  CHECK(ratio > 3.5);  // int8 values + one float32 scale per row of 4-byte floats: 4 x in / (in + 4)
  CHECK(ratio < 4.0);
  const TensorMap q = load_safetensors(d / "q/model.safetensors");
  int int8_tensors = 0;
  for (const auto& [name, t] : q) int8_tensors += t.scalar_type() == at::kChar;
  CHECK(int8_tensors == 12);  // 2 layers x (query, key, value, attention output, intermediate, output)
  CHECK(std::filesystem::exists(d / "q/cls_head.safetensors"));
  r = forward(d / "q", d / "int8q.safetensors", "--precision int8");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const TensorMap int8q = load_safetensors(d / "int8q.safetensors");
  for (const auto& [name, t] : int8) {
    INFO(name);
    CHECK(at::equal(int8q.at(name), t));
  }
  r = forward(d / "q", d / "deq.safetensors", "");  // fp32 on the dequantized weights
  INFO(r.output);
  CHECK(r.exit_code == 0);

  r = test::run_command(std::string(BERTX_BIN) + " quantize --model " + (d / "q") + " --out " + (d / "q2"));
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("is already int8 (a bertx quantize folder); nothing to do") != std::string::npos);
  r = forward(kGolden, d / "x.safetensors", "--precision int8 --grads");
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("forward --precision = \"int8\" is for inference") != std::string::npos);
  r = forward(kGolden, d / "x.safetensors", "--precision int4");
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("forward: --precision 'int4': expected fp32 | tf32 | amp (fp16) | amp-bf16 (bf16) | int8") !=
        std::string::npos);
}
