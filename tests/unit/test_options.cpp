// test_options.cpp - the field binder of bertx/options.hpp (Fields<S>): one field list gives the schema
// (keys, types, defaults from S's initialisers, choices of enums and strings), the reading of Options into
// an S, the values of an S (which read back to the same S), and the existing error style for an enum
// value outside its names. Also: [train] precision, schedule and resume as enums in the host's schema.
#include <doctest/doctest.h>

#include "bertx/options.hpp"
#include "host/train_options.hpp"
#include "test_util.hpp"

using namespace bertx;
using bertx::test::error_of;

namespace {

enum class Colour { Red, DarkBlue };
const EnumNames<Colour>& option_names(Colour) {
  static const EnumNames<Colour> n{{Colour::Red, "red"}, {Colour::DarkBlue, "dark-blue"}};
  return n;
}

struct Inner {
  int depth = 3;  // a narrower integer than int64
};

struct Sample {
  std::string name;                       // required
  bool flag = true;                       // a boolean
  std::int64_t count = 7;                 // an integer
  double rate = 0.5;                      // a float
  std::string mode = "a";                 // a string with choices
  std::vector<std::string> tags{"x"};     // strings
  std::vector<double> weights{1.0, 2.0};  // floats
  Colour colour = Colour::DarkBlue;       // an enum
  Inner inner;                            // a nested member
  double lo = 0.1, hi = 0.9;              // one custom option "range" = [lo, hi]
};

const Fields<Sample>& sample_fields() {
  static const Fields<Sample> f{
      field_required("name", &Sample::name, "the name"),
      field("flag", &Sample::flag, "a flag"),
      field("count", &Sample::count, "a count"),
      field("rate", &Sample::rate, "a rate"),
      field("mode", &Sample::mode, "a mode", {"a", "b"}),
      field("tags", &Sample::tags, "tags"),
      field("weights", &Sample::weights, "weights"),
      field("colour", &Sample::colour, "a colour"),
      field("depth", &Sample::inner, &Inner::depth, "nested depth"),
      field_custom<Sample>(
          "range", OptionType::FloatList, "[lo, hi]",
          [](const Options& o, Sample& s) {
            const auto& r = o.get_floats("range");
            s.lo = r.at(0);
            s.hi = r.at(1);
          },
          [](const Sample& s) {
            return OptionValue(std::vector<double>{s.lo, s.hi});
          }),
  };
  return f;
}

const OptionSpec& spec(const Schema& s, const std::string& key) {
  for (const auto& o : s)
    if (o.key == key) return o;
  FAIL("no key " << key);
  throw 0;
}

}  // namespace

TEST_CASE("a field list gives the schema: keys in order, types from the members, defaults, choices") {
  const Schema s = sample_fields().schema();
  std::vector<std::string> keys;
  for (const auto& o : s) keys.push_back(o.key);
  CHECK(keys == std::vector<std::string>{"name", "flag", "count", "rate", "mode", "tags", "weights", "colour", "depth",
                                         "range"});
  CHECK(std::holds_alternative<std::monostate>(spec(s, "name").default_value));
  CHECK(spec(s, "name").type == OptionType::String);
  CHECK(spec(s, "flag").type == OptionType::Bool);
  CHECK(std::get<bool>(spec(s, "flag").default_value) == true);
  CHECK(spec(s, "count").type == OptionType::Int);
  CHECK(std::get<std::int64_t>(spec(s, "count").default_value) == 7);
  CHECK(spec(s, "rate").type == OptionType::Float);
  CHECK(std::get<double>(spec(s, "rate").default_value) == 0.5);
  CHECK(spec(s, "mode").choices == std::vector<std::string>{"a", "b"});
  CHECK(spec(s, "tags").type == OptionType::StringList);
  CHECK(spec(s, "weights").type == OptionType::FloatList);
  CHECK(spec(s, "colour").type == OptionType::String);
  CHECK(std::get<std::string>(spec(s, "colour").default_value) == "dark-blue");
  CHECK(spec(s, "colour").choices == std::vector<std::string>{"red", "dark-blue"});
  CHECK(spec(s, "depth").type == OptionType::Int);
  CHECK(std::get<std::int64_t>(spec(s, "depth").default_value) == 3);
  CHECK(std::get<std::vector<double>>(spec(s, "range").default_value) == std::vector<double>{0.1, 0.9});
  CHECK(spec(s, "colour").doc == "a colour");
}

TEST_CASE("read fills the struct from Options and its values read back to the same struct") {
  Sample in;
  in.name = "n";
  in.flag = false;
  in.count = -2;
  in.rate = 1e-4;
  in.mode = "b";
  in.tags = {"p", "q"};
  in.weights = {};
  in.colour = Colour::Red;
  in.inner.depth = 12;
  in.lo = 0.25;
  in.hi = 0.75;
  const auto values = sample_fields().values(in);
  CHECK(std::get<std::string>(values.at("colour")) == "red");
  CHECK(std::get<std::int64_t>(values.at("depth")) == 12);
  const Sample out = sample_fields().read(Options("[sample]", values));
  CHECK(out.name == "n");
  CHECK(out.flag == false);
  CHECK(out.count == -2);
  CHECK(out.rate == 1e-4);
  CHECK(out.mode == "b");
  CHECK(out.tags == std::vector<std::string>{"p", "q"});
  CHECK(out.weights.empty());
  CHECK(out.colour == Colour::Red);
  CHECK(out.inner.depth == 12);
  CHECK(out.lo == 0.25);
  CHECK(out.hi == 0.75);
  CHECK(sample_fields().values(out) == values);
}

TEST_CASE("an enum value outside its names is rejected in the schema check's words") {
  auto values = sample_fields().values(Sample{});
  values["colour"] = std::string("blue");
  CHECK(error_of([&] { sample_fields().read(Options("[sample]", values)); }) ==
        "[sample] colour: 'blue' is not one of: red, dark-blue");
  CHECK(enum_name(Colour::DarkBlue) == "dark-blue");
  CHECK(enum_from_name<Colour>("red", "[x]", "colour") == Colour::Red);
}

TEST_CASE("[train] precision, schedule and resume are enums with the documented names and defaults") {
  const Schema s = train_schema();
  CHECK(spec(s, "precision").choices == std::vector<std::string>{"fp32", "tf32", "amp", "amp-bf16", "int8"});
  CHECK(spec(s, "schedule").choices == std::vector<std::string>{"poly", "linear", "constant"});
  CHECK(spec(s, "resume").choices == std::vector<std::string>{"auto", "never"});
  CHECK(std::get<std::string>(spec(s, "precision").default_value) == "fp32");
  CHECK(std::get<std::string>(spec(s, "schedule").default_value) == "poly");
  CHECK(std::get<std::string>(spec(s, "resume").default_value) == "auto");
  CHECK(std::get<std::int64_t>(spec(s, "max_steps").default_value) == 1000);
  auto values = train_fields().values(TrainOptions{});
  values["precision"] = std::string("amp-bf16");
  values["use_pure_fp16"] = true;
  const TrainOptions t = train_options_from(Options("[train]", values));
  CHECK(t.precision == Precision::AmpBf16);
  CHECK(mixed_precision(t.precision));
  values["precision"] = std::string("tf32");
  CHECK(error_of([&] { train_options_from(Options("[train]", values)); }) ==
        "[train] use_pure_fp16 = true needs precision = \"amp\" (fp16) or \"amp-bf16\" (bf16), got \"tf32\"");
}
