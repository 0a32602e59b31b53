// test_train_parts.cpp - the trainer's parts on their own: LR schedule against hand-computed values, the
// loss scaler (skip + back-off on inf, growth after the window, exact unscaling), checkpoint folders
// (atomic, newest N kept, .tmp ignored) and progress.json round trip and errors, the training reader's checks
// (token ids within the model's vocabulary, a training split that never ends), the logged gradient norm.
#include "doctest_torch.hpp"

#include <filesystem>
#include <memory>

#include <ATen/ATen.h>

#include "bertx/error.hpp"
#include "data/checked_reader.hpp"
#include "test_util.hpp"
#include "train/loss_scaler.hpp"
#include "host/progress.hpp"
#include "train/schedule.hpp"
#include "train/train_state.hpp"

using namespace bertx;

TEST_CASE("learning rate: linear warm-up then polynomial decay as Google's BERT") {
  TrainOptions t;
  t.max_steps = 100;
  t.learning_rate = 1e-3;
  t.warmup_proportion = 0.1;  // 10 warm-up steps
  t.warmup_start_lr = 0.0;
  t.decay_power = 0.5;
  CHECK(learning_rate_at(t, 0) == 0.0);
  CHECK(learning_rate_at(t, 5) == doctest::Approx(5e-4));
  CHECK(learning_rate_at(t, 10) == doctest::Approx(1e-3 * std::sqrt(0.9)));  // decay counts from step 0
  CHECK(learning_rate_at(t, 75) == doctest::Approx(1e-3 * 0.5));
  CHECK(learning_rate_at(t, 100) == 0.0);
  t.decay_power = 1.0;
  CHECK(learning_rate_at(t, 50) == doctest::Approx(5e-4));
  t.schedule = Schedule::Linear;  // NVIDIA's warmup_linear: (1 - x) / (1 - warmup), warm-up 0.1 of 100 steps
  CHECK(learning_rate_at(t, 10) == doctest::Approx(1e-3));
  CHECK(learning_rate_at(t, 55) == doctest::Approx(1e-3 * 0.45 / 0.9));
  CHECK(learning_rate_at(t, 100) == 0.0);
  t.schedule = Schedule::Constant;
  CHECK(learning_rate_at(t, 90) == doctest::Approx(1e-3));
  t.warmup_start_lr = 1e-4;
  CHECK(learning_rate_at(t, 5) == doctest::Approx(1e-4 + 0.9e-3 * 0.5));
}

TEST_CASE("loss scaler: an inf gradient is reported and halves the scale, finite steps grow it") {
  LossScaler s(LossScalerConfig{true, 1024.0, 2.0, 0.5, 3});
  CHECK(s.scale(at::ones({})).item<double>() == 1024.0);
  at::Tensor g1 = at::full({4}, 2048.0f), g2 = at::full({2}, 1024.0f);
  CHECK(s.unscale_and_check({g1, g2}));
  CHECK(g1.allclose(at::full({4}, 2.0f)));  // divided by the scale in place
  CHECK(g2.allclose(at::full({2}, 1.0f)));
  at::Tensor bad = at::ones({3});
  bad[1] = std::numeric_limits<float>::infinity();
  CHECK_FALSE(s.unscale_and_check({g1, bad}));
  s.update(false);
  CHECK(s.scale() == 512.0);
  bad[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(s.unscale_and_check({bad}));
  for (int i = 0; i < 3; ++i) s.update(true);
  CHECK(s.scale() == 1024.0);  // grew after a window of 3 good steps
  CHECK(s.good_steps() == 0);
}

TEST_CASE("without dynamic scaling the guard still catches non-finite gradients and leaves values alone") {
  LossScaler s(LossScalerConfig{false, 1024.0, 2.0, 0.5, 3});
  CHECK(s.scale() == 1.0);
  at::Tensor g = at::full({2}, 3.0f);
  CHECK(s.unscale_and_check({g}));
  CHECK(g.allclose(at::full({2}, 3.0f)));
  g[0] = std::numeric_limits<float>::infinity();
  CHECK_FALSE(s.unscale_and_check({g}));
  s.update(false);
  CHECK(s.scale() == 1.0);
}

TEST_CASE("gradient norm: the L2 norm of all gradients together, bf16 ones read in float32") {
  // 3-4-12: sqrt(9 + 16 + 144) = 13, the 12 split over two bf16 entries (sqrt(2 * 72)).
  const at::Tensor a = at::tensor({3.0f, 4.0f}), b = at::full({2}, std::sqrt(72.0f)).to(at::kBFloat16);
  const double want = std::sqrt(9.0 + 16.0 + 2.0 * std::pow(static_cast<double>(b[0].item<float>()), 2));
  CHECK(gradient_norm({a, b}) == doctest::Approx(want).epsilon(1e-6));
  CHECK(gradient_norm({a}) == doctest::Approx(5.0).epsilon(1e-7));
  CHECK(gradient_norm({}) == 0.0);
}

TEST_CASE("progress.json round trips and refuses foreign or newer files") {
  test::TempDir d;
  Progress p{1200, "phase2", 3, {{"epoch", 3}, {"sample", 4096}}, 7, 65536.0, 12, 2, "abc"};
  test::write_text(d / "progress.json", progress_json(p));
  Progress q = read_progress(d / "progress.json");
  CHECK(q.step == 1200);
  CHECK(q.phase == "phase2");
  CHECK(q.reader == p.reader);
  CHECK(q.run_id == 7);
  CHECK(q.loss_scale == 65536.0);
  CHECK(q.skipped_steps == 2);
  test::write_text(d / "bad.json", "{\"step\": 1}");
  CHECK_THROWS_WITH_AS(
      read_progress(d / "bad.json"),
      (d / "bad.json" + ": not a bertx checkpoint progress file (magic \"bertx-checkpoint\" missing)").c_str(), Error);
  // A "magic" that is not a string (fuzz_progress's crash input: a duplicate "magic": 0 after the real one) is
  // the same one-line error, not nlohmann's type_error.
  test::write_text(d / "magic0.json",
                   "{\"magic\": \"bertx-checkpoint\", \"format_version\": 1, \"step\": 2, \"magic\": 0}");
  CHECK_THROWS_WITH_AS(
      read_progress(d / "magic0.json"),
      (d / "magic0.json" + ": not a bertx checkpoint progress file (magic \"bertx-checkpoint\" missing)").c_str(),
      Error);
  // An integer field holding a float or an integer past 2^63 - 1 (fuzz_progress: "step": 2.0e22 was cast, undefined
  // behaviour) is a one-line error naming the key, not a truncated or wrapped step.
  for (const std::string& bad : {"2.0184467440737096e+22", "3.5", "18446744073709551615"}) {
    std::string j = progress_json(p);
    j.replace(j.find("\"step\": 1200"), 12, "\"step\": " + bad);
    test::write_text(d / "step.json", j);
    CHECK_THROWS_WITH_AS(read_progress(d / "step.json"),
                         (d / "step.json" + ": key 'step' must be a 64-bit integer, got " + bad).c_str(), Error);
  }
  std::string newer = progress_json(p);
  newer.replace(newer.find("\"format_version\": 1"), 19, "\"format_version\": 9");
  test::write_text(d / "newer.json", newer);
  CHECK_THROWS_WITH_AS(read_progress(d / "newer.json"),
                       (d / "newer.json" + ": checkpoint format 9 is newer than this bertx reads (1)").c_str(), Error);
}

TEST_CASE("latest_checkpoint picks the largest complete step folder") {
  test::TempDir d;
  CHECK_FALSE(latest_checkpoint(d / "none").has_value());
  test::write_text(d / "100/progress.json", "{}");
  test::write_text(d / "300/progress.json", "{}");
  test::write_text(d / "400.tmp/progress.json", "{}");  // interrupted write
  std::filesystem::create_directories(d / "500");       // no progress.json: incomplete
  REQUIRE(latest_checkpoint(d.path.string()).has_value());
  CHECK(*latest_checkpoint(d.path.string()) == 300);
}

namespace {

// Two batches of input ids {ids}, then the end of the split; position() counts the batches read.
class TwoBatches final : public DatasetReader {
 public:
  explicit TwoBatches(std::int64_t top_id) : top_id_(top_id) {}
  void open(const DatasetContext&) override {}
  std::optional<Batch> next_batch() override {
    if (read_ == 2) return std::nullopt;
    ++read_;
    Batch b;
    b.tensors["input_ids"] = at::tensor({std::int64_t{1}, top_id_}).view({1, 2});  // (B=1, S=2)
    return b;
  }
  std::int64_t epoch() const override { return 0; }
  ReaderPosition position() const override { return {{"batches", read_}}; }
  void seek(const ReaderPosition& p) override { read_ = p.at("batches"); }
  std::int64_t samples_per_epoch() const override { return 2; }

 private:
  std::int64_t top_id_, read_ = 0;
};

}  // namespace

TEST_CASE("the training reader refuses token ids past the model's vocabulary and a training split that ends") {
  CheckedReader ok(std::make_shared<TwoBatches>(99), 100, "fake");
  ok.open(DatasetContext{"train", 1, 0, 1, 1});
  CHECK(ok.next_batch().has_value());
  CHECK(ok.position().at("batches") == 1);
  ok.seek({{"batches", 0}});
  CHECK(ok.samples_per_epoch() == 2);
  CHECK(ok.next_batch().has_value());
  CHECK(ok.next_batch().has_value());
  CHECK_THROWS_WITH_AS(ok.next_batch(), "[data] fake: the training reader returned no batch", Error);

  CheckedReader eval(std::make_shared<TwoBatches>(99), 100, "fake");
  eval.open(DatasetContext{"eval", 1, 0, 1, 1});
  CHECK(eval.next_batch().has_value());
  CHECK(eval.next_batch().has_value());
  CHECK_FALSE(eval.next_batch().has_value());  // an evaluation pass ends

  CheckedReader wrong(std::make_shared<TwoBatches>(100), 100, "fake");
  wrong.open(DatasetContext{"train", 1, 0, 1, 1});
  CHECK_THROWS_WITH_AS(
      wrong.next_batch(),
      "[data] fake: token id 100 >= the model's vocab_size 100: the data was prepared with another vocabulary "
      "than the model's (check the vocab file and [model] preset/config)",
      Error);
}
