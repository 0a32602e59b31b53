// tasks.cpp - the GLUE task table, example loading and submission files.
#include "tasks.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bertx/error.hpp"
#include "tsv.hpp"

namespace bertx::glue {

namespace {

TaskSpec pair(std::string name, std::string display, std::vector<std::string> labels, std::string a, std::string b,
              std::string label, std::vector<std::string> metrics) {
  TaskSpec t;
  t.name = std::move(name);
  t.display = display;
  t.labels = std::move(labels);
  t.text_a = std::move(a);
  t.text_b = std::move(b);
  t.label = std::move(label);
  t.eval_files = {"dev.tsv"};
  t.test_files = {"test.tsv"};
  t.submission_files = {display + ".tsv"};
  t.metrics = std::move(metrics);
  return t;
}

std::vector<TaskSpec> make_tasks() {
  const std::vector<std::string> binary{"0", "1"}, nli{"entailment", "not_entailment"};
  std::vector<TaskSpec> v;
  TaskSpec cola = pair("cola", "CoLA", binary, "sentence", "", "", {"mcc"});
  cola.header = false;  // train/dev: source, label, original label, sentence
  cola.columns = 4;
  cola.label_pos = 1;
  cola.text_a_pos = 3;
  v.push_back(cola);
  v.push_back(pair("sst2", "SST-2", binary, "sentence", "", "label", {"accuracy"}));
  v.push_back(pair("mrpc", "MRPC", binary, "#1 String", "#2 String", "Quality", {"accuracy", "f1"}));
  v.push_back(pair("stsb", "STS-B", {}, "sentence1", "sentence2", "score", {"pearson", "spearman"}));
  TaskSpec qqp = pair("qqp", "QQP", binary, "question1", "question2", "is_duplicate", {"accuracy", "f1"});
  qqp.index = "id";
  v.push_back(qqp);
  TaskSpec mnli = pair("mnli", "MNLI", {"contradiction", "entailment", "neutral"}, "sentence1", "sentence2",
                       "gold_label", {"accuracy"});
  mnli.eval_files = {"dev_matched.tsv", "dev_mismatched.tsv"};
  mnli.test_files = {"test_matched.tsv", "test_mismatched.tsv"};
  mnli.submission_files = {"MNLI-m.tsv", "MNLI-mm.tsv"};
  mnli.set_suffixes = {"", "_mm"};
  v.push_back(mnli);
  v.push_back(pair("qnli", "QNLI", nli, "question", "sentence", "label", {"accuracy"}));
  v.push_back(pair("rte", "RTE", nli, "sentence1", "sentence2", "label", {"accuracy"}));
  v.push_back(pair("wnli", "WNLI", binary, "sentence1", "sentence2", "label", {"accuracy"}));
  // Not GLUE: ChemProt chemical-protein relations in the BLUE benchmark's layout (header index, sentence, label;
  // the entities masked as @CHEMICAL$ / @GENE$), scored as BioBERT / BLUE do: micro F1 over the five CPR
  // classes, "false" (id 0) counting as no relation.
  v.push_back(pair("chemprot", "ChemProt", {"false", "CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"}, "sentence", "",
                   "label", {"accuracy", "micro_f1"}));
  return v;
}

std::int64_t parse_int(std::string_view s, const std::string& where, const char* what) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    throw Error(where + ": " + what + " '" + std::string(s) + "' is not an integer");
  return v;
}

}  // namespace

const std::vector<TaskSpec>& tasks() {
  static const std::vector<TaskSpec> t = make_tasks();
  return t;
}

std::vector<std::string> task_names() {
  std::vector<std::string> n;
  for (const auto& t : tasks()) n.push_back(t.name);
  return n;
}

const TaskSpec& task(const std::string& name) {
  for (const auto& t : tasks())
    if (t.name == name) return t;
  std::string all;
  for (const auto& n : task_names()) all += (all.empty() ? "" : ", ") + n;
  throw Error("unknown GLUE task '" + name + "'; known: " + all);
}

TaskSpec generic_task(std::int64_t num_labels) {
  if (num_labels < 1) throw Error("[task] num_labels must be >= 1 (1 = regression), got " + std::to_string(num_labels));
  TaskSpec t;
  t.name = "custom";
  t.display = "custom";
  if (num_labels > 1)
    for (std::int64_t i = 0; i < num_labels; ++i) t.labels.push_back(std::to_string(i));
  t.submission_files = {"predictions.tsv"};
  t.metrics = num_labels > 1 ? std::vector<std::string>{"accuracy"} : std::vector<std::string>{"pearson", "spearman"};
  return t;
}

std::vector<Example> load_examples(const TaskSpec& spec, const std::string& path, bool labelled, std::int64_t set) {
  const bool header = spec.header || !labelled;  // every test file has a header
  TsvFile f(path, header, spec.columns);
  std::size_t a = spec.text_a_pos, label = spec.label_pos, b = 0, index = 0;
  const bool has_b = !spec.text_b.empty(), has_index = header && f.has_column(spec.index);
  if (header) {
    a = f.column(spec.text_a);
    if (has_b) b = f.column(spec.text_b);
    if (labelled) label = f.column(spec.label);
    index = has_index || !labelled ? f.column(spec.index) : 0;  // test rows are identified by it in submissions
  }
  std::vector<Example> out;
  std::vector<std::string_view> row;
  while (f.next(row)) {
    Example e;
    e.text_a = row[a];
    if (has_b) e.text_b = row[b];
    e.set = set;
    e.index = has_index ? parse_int(row[index], f.where(), "index") : static_cast<std::int64_t>(out.size());
    if (labelled) {
      const std::string_view text = row[label];
      if (spec.regression()) {
        const std::string s(text);
        char* end = nullptr;
        e.value = std::strtof(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(e.value))
          throw Error(f.where() + ": score '" + s + "' is not a number");
      } else {
        for (std::size_t i = 0; i < spec.labels.size(); ++i)
          if (spec.labels[i] == text) e.label = static_cast<std::int64_t>(i);
        if (e.label < 0) {
          std::string all;
          for (const auto& l : spec.labels) all += (all.empty() ? "" : ", ") + l;
          throw Error(f.where() + ": label '" + std::string(text) + "' is not a " + spec.display + " label (" + all +
                      ")");
        }
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> write_submission(const TaskSpec& spec, const std::string& dir,
                                          const std::vector<Outcome>& outcomes) {
  std::filesystem::create_directories(dir);
  std::vector<std::string> written;
  for (std::size_t s = 0; s < spec.submission_files.size(); ++s) {
    const std::string path = (std::filesystem::path(dir) / spec.submission_files[s]).string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot write the prediction file");
    out << "index\tprediction\n";
    for (const Outcome& o : outcomes) {
      if (o.set != static_cast<std::int64_t>(s)) continue;
      out << o.index << '\t';
      if (spec.regression()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", o.value);
        out << buf << '\n';
      } else {
        if (o.label < 0 || o.label >= spec.num_labels())
          throw Error(path + ": predicted class id " + std::to_string(o.label) + " out of range");
        out << spec.labels[static_cast<std::size_t>(o.label)] << '\n';
      }
    }
    out.close();
    if (!out) throw Error(path + ": write failed");
    written.push_back(path);
  }
  return written;
}

}  // namespace bertx::glue
