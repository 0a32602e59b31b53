// test_optim_golden.cpp - optimizer parity with ../shared/golden/optim (trajectories of torch AdamW,
// NVIDIA BertAdam, cybertronai LAMB and apex FusedLAMB/NVLAMB over 6 fixed-gradient steps), optimizer state
// round trips, and the safetensors reader/writer (round trips and malformed files).
// Builds the optimizers through optimizers.hpp directly, and checks the plugin's registration (plugin.cpp is
// compiled into this test) with a stand-in Registry: no plugin host involved.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <nlohmann/json.hpp>

#include "doctest_torch.hpp"

#include "bertx/error.hpp"
#include "bertx/plugin.hpp"
#include "optimizers.hpp"
#include "io/safetensors.hpp"

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const std::string kOptimDir = std::string(BERTX_SHARED_DIR) + "/golden/optim";

// Tolerance against the golden float32 trajectories: |ours - golden| <= kAtol + kRtol * |golden|.
// The references' own float32-vs-float64 spread is ~1.7e-7 (trajectories.json).
constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-6;

struct Golden {
  bertx::TensorMap tensors;
  json info;
};

const Golden& golden() {
  static const Golden g = [] {
    Golden out;
    out.tensors = bertx::load_safetensors(kOptimDir + "/trajectories.safetensors");
    std::ifstream in(kOptimDir + "/trajectories.json");
    REQUIRE(in.good());
    out.info = json::parse(in);
    return out;
  }();
  return g;
}

const at::Tensor& gt(const std::string& key) {
  auto it = golden().tensors.find(key);
  REQUIRE_MESSAGE(it != golden().tensors.end(), "golden tensor missing: " << key);
  return it->second;
}

// The message of the bertx::Error that fn throws ("" if it throws nothing; fails on any other exception).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const bertx::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// Options as the host hands them over: schema defaults, then overrides.
bertx::Options options_for(const bertx::Schema& schema, const std::map<std::string, bertx::OptionValue>& overrides) {
  std::map<std::string, bertx::OptionValue> values;
  for (const auto& spec : schema) values[spec.key] = spec.default_value;
  for (const auto& [k, v] : overrides) {
    REQUIRE_MESSAGE(values.count(k), "option not in schema: " << k);
    values[k] = v;
  }
  return bertx::Options("[optimizer] (test)", values);
}

// Builds the optimizer of a golden variant from its hyper-parameters in trajectories.json, through the same
// option parsing the plugin factories use.
std::shared_ptr<bertx::Optimizer> make_variant(const std::string& variant) {
  const json& hp = golden().info.at("variants").at(variant).at("hyperparameters");
  using namespace bertx::optim;
  if (variant == "adamw") {
    CHECK(hp.at("amsgrad") == false);
    CHECK(hp.at("maximize") == false);
    // torch.optim.AdamW has no clipping of its own: the golden run did none.
    return make_adamw(adamw_config(options_for(adamw_schema(), {{"betas", hp.at("betas").get<std::vector<double>>()},
                                                                {"eps", hp.at("eps").get<double>()},
                                                                {"max_grad_norm", 0.0}})));
  }
  if (variant == "bertadam") {
    CHECK(hp.at("t_total") == -1);  // constant lr: the schedule is the host's business
    return make_bertadam(bertadam_config(options_for(
        bertadam_schema(), {{"betas", std::vector<double>{hp.at("b1").get<double>(), hp.at("b2").get<double>()}},
                            {"eps", hp.at("e").get<double>()},
                            {"max_grad_norm", hp.at("max_grad_norm").get<double>()}})));
  }
  if (variant == "lamb_cybertron") {
    CHECK(hp.at("adam") == false);
    return make_lamb(lamb_config(options_for(
        lamb_schema(), {{"betas", hp.at("betas").get<std::vector<double>>()}, {"eps", hp.at("eps").get<double>()}})));
  }
  if (variant == "nvlamb" || variant == "nvlamb_all") {
    CHECK(hp.at("bias_correction") == true);
    CHECK(hp.at("grad_averaging") == true);
    CHECK(hp.at("adam_w_mode") == true);
    return make_nvlamb(
        nvlamb_config(options_for(nvlamb_schema(), {{"betas", hp.at("betas").get<std::vector<double>>()},
                                                    {"eps", hp.at("eps").get<double>()},
                                                    {"max_grad_norm", hp.at("max_grad_norm").get<double>()},
                                                    {"use_nvlamb", hp.at("use_nvlamb").get<bool>()}})));
  }
  FAIL("unknown variant " << variant);
  return nullptr;
}

double variant_lr(const std::string& variant) {
  return golden().info.at("variants").at(variant).at("hyperparameters").at("lr").get<double>();
}

// The golden parameters (W, b, ln_w) as leaf tensors that require grad, like a model's.
using Params = std::map<std::string, at::Tensor>;

std::vector<std::string> param_order() { return golden().info.at("param_order").get<std::vector<std::string>>(); }

Params initial_params() {
  Params p;
  for (const auto& name : param_order()) {
    at::Tensor t = gt("init." + name).clone();
    t.set_requires_grad(true);
    p[name] = t;
  }
  return p;
}

Params clone_params(const Params& from) {
  Params p;
  for (const auto& [name, t] : from) {
    at::Tensor c = t.detach().clone();
    c.set_requires_grad(true);
    p[name] = c;
  }
  return p;
}

// Param groups as trajectories.json lists them (W with weight decay 0.01; b and ln_w with 0).
void add_groups(bertx::Optimizer& opt, const Params& params) {
  for (const auto& g : golden().info.at("param_groups")) {
    bertx::ParamGroup group;
    for (const auto& name : g.at("params")) {
      group.names.push_back(name.get<std::string>());
      group.params.push_back(params.at(name.get<std::string>()));
    }
    group.weight_decay = g.at("weight_decay").get<double>();
    opt.add_param_group(group);
  }
}

void set_grads(Params& params, std::int64_t step) {
  for (auto& [name, t] : params) t.mutable_grad() = gt("grads." + name).select(0, step).clone();
}

// Max |ours - golden| over all parameters after step `step` (0-based); CHECKs the tolerance per element.
double compare_step(const Params& params, const std::string& variant, std::int64_t step) {
  double worst = 0.0;
  for (const auto& [name, t] : params) {
    at::Tensor want = gt(variant + "." + name).select(0, step).to(at::kDouble);
    at::Tensor got = t.detach().to(at::kDouble);
    at::Tensor diff = got.sub(want).abs();
    const double max_diff = diff.max().item<double>();
    const bool ok = diff.le(want.abs().mul(kRtol).add(kAtol)).all().item<bool>();
    CHECK_MESSAGE(ok, variant << " step " << step + 1 << " param " << name << ": max abs diff " << max_diff);
    worst = std::max(worst, max_diff);
  }
  return worst;
}

// The golden variants checked (lamb_cybertron is our lamb; nvlamb_all is nvlamb with use_nvlamb = true).
const std::vector<std::string> kVariants{"adamw", "bertadam", "lamb_cybertron", "nvlamb", "nvlamb_all"};

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("bertx_test_optim_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

TEST_SUITE("optim golden") {
  TEST_CASE("golden file is what the MANIFEST describes") {
    const auto& g = golden();
    CHECK(g.info.at("steps") == 6);
    CHECK(gt("init.W").sizes().vec() == std::vector<std::int64_t>{7, 5});
    CHECK(gt("grads.W").sizes().vec() == std::vector<std::int64_t>{6, 7, 5});
    CHECK((gt("nvlamb_fp64.W").scalar_type() == at::kDouble));
    for (const auto& v : kVariants)
      for (const auto& name : param_order()) CHECK((gt(v + "." + name).scalar_type() == at::kFloat));
  }

  TEST_CASE("6-step trajectories match the references") {
    for (const auto& variant : kVariants) {
      SUBCASE(variant.c_str()) {
        Params params = initial_params();
        auto opt = make_variant(variant);
        add_groups(*opt, params);
        const double lr = variant_lr(variant);
        double worst = 0.0;
        for (std::int64_t k = 0; k < 6; ++k) {
          set_grads(params, k);
          opt->step(lr);
          worst = std::max(worst, compare_step(params, variant, k));
        }
        MESSAGE(variant << ": max abs diff vs golden over 6 steps = " << worst);
        if (variant == "nvlamb") {
          // Informative: distance to the float64 restatement (the reference's own float32 spread is ~1.7e-7).
          double d64 = 0.0;
          for (const auto& [name, t] : params)
            d64 = std::max(
                d64, t.detach().to(at::kDouble).sub(gt("nvlamb_fp64." + name).select(0, 5)).abs().max().item<double>());
          MESSAGE("nvlamb: max abs diff vs float64 restatement after step 6 = " << d64);
          CHECK(d64 < 1e-6);
        }
      }
    }
  }

  TEST_CASE("state_dict -> safetensors -> load_state_dict continues identically") {
    TempDir tmp;
    for (const auto& variant : kVariants) {
      SUBCASE(variant.c_str()) {
        const double lr = variant_lr(variant);
        Params a = initial_params();
        auto opt_a = make_variant(variant);
        add_groups(*opt_a, a);
        for (std::int64_t k = 0; k < 3; ++k) {
          set_grads(a, k);
          opt_a->step(lr);
        }
        auto state = opt_a->state_dict();
        CHECK(state.size() == 2 * param_order().size() + 1);
        REQUIRE(state.count("step"));
        CHECK(state.at("step").item<std::int64_t>() == 3);
        for (const auto& name : param_order()) {
          REQUIRE(state.count(name + ".exp_avg"));
          REQUIRE(state.count(name + ".exp_avg_sq"));
          CHECK(state.at(name + ".exp_avg").sizes() == a.at(name).sizes());
        }
        const std::string file = tmp.file(variant + ".safetensors");
        bertx::save_safetensors(file, state, {{"optimizer", variant}});
        bertx::MetadataMap meta;
        auto loaded = bertx::load_safetensors(file, &meta);
        CHECK(meta.at("optimizer") == variant);

        Params b = clone_params(a);
        auto opt_b = make_variant(variant);
        add_groups(*opt_b, b);
        opt_b->load_state_dict(loaded);
        for (std::int64_t k = 3; k < 6; ++k) {
          set_grads(a, k);
          set_grads(b, k);
          opt_a->step(lr);
          opt_b->step(lr);
          for (const auto& name : param_order())
            CHECK_MESSAGE(at::equal(a.at(name).detach(), b.at(name).detach()),
                          variant << " step " << k + 1 << " " << name);
          compare_step(b, variant, k);
        }
      }
    }
  }

  TEST_CASE("load_state_dict refuses incomplete or mismatched state, naming the key") {
    for (const auto& variant : kVariants) {
      SUBCASE(variant.c_str()) {
        Params params = initial_params();
        auto opt = make_variant(variant);
        add_groups(*opt, params);
        set_grads(params, 0);
        opt->step(variant_lr(variant));
        const auto good = opt->state_dict();
        auto clone_state = [&] {
          bertx::TensorMap s;
          for (const auto& [k, v] : good) s[k] = v.clone();
          return s;
        };

        auto missing = clone_state();
        missing.erase("W.exp_avg");
        std::string msg = error_of([&] { opt->load_state_dict(missing); });
        CHECK_MESSAGE(contains(msg, "'W.exp_avg'"), msg);
        CHECK(contains(msg, "missing"));

        auto no_step = clone_state();
        no_step.erase("step");
        msg = error_of([&] { opt->load_state_dict(no_step); });
        CHECK_MESSAGE(contains(msg, "'step'"), msg);

        auto bad_shape = clone_state();
        bad_shape["b.exp_avg_sq"] = at::zeros({4}, at::TensorOptions().dtype(at::kFloat));
        msg = error_of([&] { opt->load_state_dict(bad_shape); });
        CHECK_MESSAGE(contains(msg, "'b.exp_avg_sq'"), msg);
        CHECK(contains(msg, "[4]"));

        auto extra = clone_state();
        extra["bias.exp_avg"] = at::zeros({5}, at::TensorOptions().dtype(at::kFloat));
        msg = error_of([&] { opt->load_state_dict(extra); });
        CHECK_MESSAGE(contains(msg, "'bias.exp_avg'"), msg);

        // A refused load leaves the state as it was.
        auto after = opt->state_dict();
        for (const auto& [k, v] : good) CHECK(at::equal(after.at(k), v));
      }
    }
  }

  TEST_CASE("option schemas: defaults match the config structs, bad values are refused") {
    using namespace bertx::optim;
    const AdamWConfig a = adamw_config(options_for(adamw_schema(), {}));
    CHECK(a.beta1 == 0.9);
    CHECK(a.beta2 == 0.999);
    CHECK(a.eps == 1e-6);
    CHECK(a.max_grad_norm == 1.0);
    const BertAdamConfig ba = bertadam_config(options_for(bertadam_schema(), {}));
    CHECK(ba.max_grad_norm == 1.0);
    CHECK(ba.eps == 1e-6);
    const LambConfig l = lamb_config(options_for(lamb_schema(), {}));
    CHECK(l.beta2 == 0.999);
    const NvLambConfig n = nvlamb_config(options_for(nvlamb_schema(), {}));
    CHECK(n.max_grad_norm == 1.0);
    CHECK(n.use_nvlamb == false);

    std::string msg = error_of([&] {
      adamw_config(options_for(adamw_schema(), {{"betas", std::vector<double>{0.9}}}));
    });
    CHECK_MESSAGE(contains(msg, "'betas'"), msg);
    CHECK(contains(msg, "[optimizer] (test)"));
    msg = error_of([&] { nvlamb_config(options_for(nvlamb_schema(), {{"betas", std::vector<double>{0.9, 1.0}}})); });
    CHECK_MESSAGE(contains(msg, "'betas'"), msg);
    msg = error_of([&] { lamb_config(options_for(lamb_schema(), {{"eps", -1.0}})); });
    CHECK_MESSAGE(contains(msg, "'eps'"), msg);
    msg = error_of([&] { bertadam_config(options_for(bertadam_schema(), {{"max_grad_norm", -1.0}})); });
    CHECK_MESSAGE(contains(msg, "'max_grad_norm'"), msg);
  }

  TEST_CASE("trust-ratio edge cases the golden data does not reach") {
    auto f32 = at::TensorOptions().dtype(at::kFloat);
    auto run = [&](const std::shared_ptr<bertx::Optimizer>& opt, at::Tensor p, at::Tensor g, double wd) {
      p.set_requires_grad(true);
      p.mutable_grad() = g;
      opt->add_param_group({{"p"}, {p}, wd});
      opt->step(0.01);
      return p.detach();
    };
    // LAMB clamps ||p|| to 10: p = 100 * ones(4) (norm 200), g = ones: u = 3.162 * ones (norm 6.32), so each
    // element moves by lr * 10 / ||u|| * u = 0.01 * 10 * 0.5.
    at::Tensor p = run(bertx::optim::make_lamb({}), at::ones({4}, f32).mul(100), at::ones({4}, f32), 0.0);
    CHECK(p.sub(99.95).abs().max().item<double>() < 1e-5);
    // LAMB with ||p|| = 0: ratio 1, so p = -lr * u.
    p = run(bertx::optim::make_lamb({}), at::zeros({4}, f32), at::ones({4}, f32), 0.0);
    CHECK(p.add(0.01 * 0.1 / (std::sqrt(0.001) + 1e-6)).abs().max().item<double>() < 1e-7);
    // NVLAMB (trust ratio everywhere) with ||p|| = 0: ratio lr. Global norm 2 > 1 halves g: u = 0.5 / (0.5 + eps).
    bertx::optim::NvLambConfig all;
    all.use_nvlamb = true;
    p = run(bertx::optim::make_nvlamb(all), at::zeros({4}, f32), at::ones({4}, f32), 0.0);
    CHECK(p.add(0.01 * 0.5 / (0.5 + 1e-6)).abs().max().item<double>() < 1e-7);
    // Zero gradients: no NaN anywhere, parameters unchanged (weight decay 0).
    for (auto opt : {bertx::optim::make_adamw({}), bertx::optim::make_bertadam({}), bertx::optim::make_lamb({}),
                     bertx::optim::make_nvlamb(all)}) {
      p = run(opt, at::ones({3}, f32), at::zeros({3}, f32), 0.0);
      CHECK(at::equal(p, at::ones({3}, f32)));
    }
  }

  TEST_CASE("param groups: duplicates and non-float parameters are refused and no grad means no update") {
    auto opt = bertx::optim::make_adamw({});
    at::Tensor w = at::arange(6, at::TensorOptions().dtype(at::kFloat)).reshape({2, 3});
    opt->add_param_group({{"w"}, {w}, 0.0});
    std::string msg = error_of([&] { opt->add_param_group({{"w"}, {w.clone()}, 0.0}); });
    CHECK_MESSAGE(contains(msg, "'w'"), msg);
    msg = error_of([&] { opt->add_param_group({{"i"}, {at::arange(3)}, 0.0}); });
    CHECK_MESSAGE(contains(msg, "'i'"), msg);
    at::Tensor before = w.clone();
    opt->step(0.1);  // w has no gradient
    CHECK(at::equal(w, before));
    CHECK(opt->state_dict().at("step").item<std::int64_t>() == 0);
  }
}

// plugin.cpp, compiled into this test, defines the plugin's entry point.
extern "C" const bertx_plugin_info* bertx_plugin_entry(void);

namespace {
struct RecordingRegistry : bertx::Registry {
  std::vector<bertx::BuilderSpec> specs;
  void add(bertx::BuilderSpec spec) override { specs.push_back(std::move(spec)); }
};
}  // namespace

TEST_SUITE("optimizers plugin") {
  TEST_CASE("the entry point registers adamw, bertadam, lamb and nvlamb with working factories") {
    const bertx_plugin_info* info = bertx_plugin_entry();
    REQUIRE(info != nullptr);
    CHECK(info->api_version == BERTX_PLUGIN_API_VERSION);
    CHECK(std::string(info->name) == "optimizers");
    RecordingRegistry registry;
    char err[256] = {0};
    REQUIRE_MESSAGE(info->register_fn(&registry, err, sizeof err) == 0, err);
    std::vector<std::string> names;
    for (const auto& spec : registry.specs) {
      names.push_back(spec.name);
      CHECK((spec.kind == bertx::Kind::Optimizer));
      CHECK_FALSE(spec.description.empty());
      for (const auto& opt : spec.schema) CHECK_MESSAGE(!opt.doc.empty(), spec.name << "." << opt.key);

      // Build it as the host does (schema defaults), then take one step.
      std::shared_ptr<void> any = spec.factory(options_for(spec.schema, {}));
      auto opt = std::shared_ptr<bertx::Optimizer>(any, static_cast<bertx::Optimizer*>(any.get()));
      at::Tensor w = at::arange(6, at::TensorOptions().dtype(at::kFloat)).reshape({2, 3});
      w.set_requires_grad(true);
      w.mutable_grad() = at::arange(6, at::TensorOptions().dtype(at::kFloat)).reshape({2, 3}).sub(2.5);
      opt->add_param_group({{"w"}, {w}, 0.01});
      at::Tensor before = w.detach().clone();
      opt->step(1e-3);
      CHECK_MESSAGE(!at::equal(w.detach(), before), spec.name);
      CHECK(opt->state_dict().at("step").item<std::int64_t>() == 1);

      std::string msg = error_of([&] {
        spec.factory(options_for(spec.schema, {{"betas", std::vector<double>{0.9}}}));
      });
      CHECK_MESSAGE(contains(msg, "'betas'"), spec.name << ": " << msg);
    }
    CHECK(names == std::vector<std::string>{"adamw", "bertadam", "lamb", "nvlamb"});
  }
}

// ---------------------------------------------------------------------------------------------------------
namespace {

// Writes a safetensors-like file from a raw header text and raw data bytes.
void write_raw(const std::string& path, const std::string& header, const std::string& data, std::uint64_t header_len) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((header_len >> (8 * i)) & 0xff));
  out << header << data;
}
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  write_raw(path, header, data, header.size());
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_SUITE("safetensors") {
  TEST_CASE("round trip of every supported dtype, shapes, metadata") {
    TempDir tmp;
    const std::string file = tmp.file("roundtrip.safetensors");
    auto base = at::arange(-6, 6, at::TensorOptions().dtype(at::kDouble)).mul(0.75).reshape({3, 4});
    bertx::TensorMap in{
        {"f32", base.to(at::kFloat)},
        {"f64", base.clone()},
        {"f16", base.to(at::kHalf)},
        {"bf16", base.to(at::kBFloat16)},
        {"i64", base.mul(1000).to(at::kLong)},
        {"i32", base.mul(4).to(at::kInt)},
        {"i8", base.mul(4).to(at::kChar)},
        {"u8", base.add(6).to(at::kByte)},
        {"bool", base.gt(0)},
        {"scalar", at::scalar_tensor(3.5, at::TensorOptions().dtype(at::kFloat))},
        {"empty", at::zeros({0, 3}, at::TensorOptions().dtype(at::kFloat))},
        {"transposed", base.to(at::kFloat).t()},                           // not contiguous
        {"odd.f16", at::arange(3, at::TensorOptions().dtype(at::kHalf))},  // 6 bytes: alignment of what follows
    };
    bertx::MetadataMap meta_in{{"format", "pt"}, {"note", "two words"}};
    bertx::save_safetensors(file, in, meta_in);
    CHECK_FALSE(fs::exists(file + ".tmp"));
    const std::string bytes = read_bytes(file);
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[i]);
    CHECK((8 + header_len) % 8 == 0);  // data section 8-byte aligned, like the reference writer
    const json header = json::parse(bytes.substr(8, header_len));
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      const auto begin = entry.at("data_offsets")[0].get<std::uint64_t>();
      const std::uint64_t item = entry.at("dtype") == "F64" || entry.at("dtype") == "I64"    ? 8
                                 : entry.at("dtype") == "F32" || entry.at("dtype") == "I32"  ? 4
                                 : entry.at("dtype") == "F16" || entry.at("dtype") == "BF16" ? 2
                                                                                             : 1;
      CHECK_MESSAGE(begin % item == 0, name << " misaligned at " << begin);
    }

    bertx::MetadataMap meta_out;
    auto out = bertx::load_safetensors(file, &meta_out);
    CHECK(meta_out == meta_in);
    REQUIRE(out.size() == in.size());
    for (const auto& [name, t] : in) {
      REQUIRE(out.count(name));
      const at::Tensor& r = out.at(name);
      CHECK_MESSAGE((r.scalar_type() == t.scalar_type()), name);
      CHECK_MESSAGE(r.sizes() == t.sizes(), name);
      CHECK_MESSAGE(at::equal(r, t), name);
      CHECK(r.is_contiguous());
    }
    CHECK(out.at("scalar").dim() == 0);

    // Saving again replaces the file; a file without metadata reads back an empty map.
    bertx::save_safetensors(file, {{"only", at::zeros({2}, at::TensorOptions().dtype(at::kFloat))}});
    auto again = bertx::load_safetensors(file, &meta_out);
    CHECK(again.size() == 1);
    CHECK(meta_out.empty());
  }

  TEST_CASE("reads files of other writers: the golden files") {
    auto traj = bertx::load_safetensors(kOptimDir + "/trajectories.safetensors");
    CHECK(traj.size() == 24);
    bertx::MetadataMap meta;
    const std::string cls = std::string(BERTX_SHARED_DIR) + "/golden/model/cls_head.safetensors";
    if (fs::exists(cls)) {
      auto head = bertx::load_safetensors(cls, &meta);
      CHECK(meta.at("num_labels") == "2");
      CHECK(head.at("classifier.weight").sizes().vec() == std::vector<std::int64_t>{2, 64});
    }
  }

  TEST_CASE("writer refuses what it cannot store, naming the tensor, and leaves no file") {
    TempDir tmp;
    const std::string file = tmp.file("bad.safetensors");
    std::string msg = error_of([&] {
      bertx::save_safetensors(
          file, {{"ok", at::zeros({2})}, {"shorts", at::zeros({2}, at::TensorOptions().dtype(at::kShort))}});
    });
    CHECK_MESSAGE(contains(msg, "\"shorts\""), msg);
    CHECK(contains(msg, file));
    msg = error_of([&] { bertx::save_safetensors(file, {{"__metadata__", at::zeros({2})}}); });
    CHECK_MESSAGE(contains(msg, "__metadata__"), msg);
    msg = error_of([&] { bertx::save_safetensors(file, {{"undef", at::Tensor()}}); });
    CHECK_MESSAGE(contains(msg, "undef"), msg);
    CHECK_FALSE(fs::exists(file));
    CHECK_FALSE(fs::exists(file + ".tmp"));
    msg = error_of([&] { bertx::save_safetensors(tmp.file("no/such/dir/x.safetensors"), {{"a", at::zeros({1})}}); });
    CHECK_MESSAGE(contains(msg, "no/such/dir/x.safetensors"), msg);
  }

  TEST_CASE("malformed files throw bertx::Error naming the file and the tensor") {
    TempDir tmp;
    // A valid file to start from: one F32 tensor "w" of shape [2, 2] (16 bytes).
    const std::string good = tmp.file("good.safetensors");
    bertx::save_safetensors(good, {{"w", at::arange(4, at::TensorOptions().dtype(at::kFloat)).reshape({2, 2})}});
    const std::string good_bytes = read_bytes(good);
    const std::string data(16, '\0');
    const std::string path = tmp.file("bad.safetensors");

    struct Case {
      const char* what;
      std::function<void()> write;
      std::vector<std::string> expect;  // substrings of the message besides the file name
    };
    const std::vector<Case> cases{
        {"missing file", [&] { fs::remove(path); }, {"cannot open"}},
        {"shorter than 8 bytes",
         [&] {
           write_raw(path, "", "", 0);
           fs::resize_file(path, 5);
         },
         {"truncated"}},
        {"truncated data",
         [&] {
           std::ofstream(path, std::ios::binary | std::ios::trunc) << good_bytes.substr(0, good_bytes.size() - 3);
         },
         {"\"w\""}},
        {"header length larger than the file",
         [&] { write_raw(path, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", data, 1u << 20); },
         {"header length"}},
        {"absurd header length", [&] { write_raw(path, "{}", "", ~std::uint64_t{0}); }, {"header length"}},
        {"header not JSON", [&] { write_raw(path, "{\"w\": [", data); }, {"JSON"}},
        {"header not an object", [&] { write_raw(path, "[1,2]", data); }, {"not a JSON object"}},
        {"offsets out of range",
         [&] { write_raw(path, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[16,32]}})", data); },
         {"\"w\"", "outside"}},
        {"end before begin",
         [&] { write_raw(path, R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[16,0]}})", data); },
         {"\"w\"", "end before begin"}},
        {"size does not match shape",
         [&] { write_raw(path, R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", data); },
         {"\"w\"", "needs 24"}},
        {"bad dtype",
         [&] { write_raw(path, R"({"w":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}})", data); },
         {"\"w\"", "unsupported dtype \"C64\""}},
        {"negative dimension",
         [&] { write_raw(path, R"({"w":{"dtype":"F32","shape":[-2,-2],"data_offsets":[0,16]}})", data); },
         {"\"w\"", "shape"}},
        {"overflowing shape",
         [&] {
           write_raw(path, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,16]}})", data);
         },
         {"\"w\"", "overflows"}},
        {"overlapping tensors",
         [&] {
           write_raw(
               path,
               R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"v":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
               data);
         },
         {"\"v\"", "inside the previous tensor"}},
        {"trailing bytes",
         [&] { write_raw(path, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data); },
         {"cover 8"}},
        {"missing data_offsets",
         [&] { write_raw(path, R"({"w":{"dtype":"F32","shape":[4]}})", data); },
         {"\"w\"", "data_offsets"}},
        {"metadata value not a string",
         [&] {
           write_raw(path, R"({"__metadata__":{"k":1},"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data);
         },
         {"\"k\""}},
        {"bool byte out of range",
         [&] {
           write_raw(path, R"({"w":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x07", 2));
         },
         {"\"w\"", "BOOL"}},
        {"name with a newline is quoted on one line",
         [&] { write_raw(path, "{\"a\\nb\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}", ""); },
         {"\"a\\nb\""}},
    };
    for (const auto& c : cases) {
      CAPTURE(c.what);
      c.write();
      std::string msg = error_of([&] { bertx::load_safetensors(path); });
      REQUIRE_MESSAGE(!msg.empty(), c.what << ": no bertx::Error");
      CHECK_MESSAGE(contains(msg, path), msg);
      CHECK_MESSAGE(msg.find('\n') == std::string::npos, msg);
      for (const auto& e : c.expect) CHECK_MESSAGE(contains(msg, e), c.what << ": " << msg);
    }
  }
}
