// tasks.hpp - the GLUE tasks as data: where each file keeps its sentences and labels, the label names, the
// metrics GLUE scores it with and the submission file names the benchmark server expects; plus loading a
// split's examples and writing submission TSVs. Pure C++ (no LibTorch), shared by the `glue` reader, the
// `classification` task and the tests.
//
// Layouts (GLUE download, as Google's run_classifier.py / Hugging Face's processors read them):
//   CoLA train/dev: no header, 4 columns (source, label, original label, sentence); test: index, sentence.
//   Other tasks: a header; columns are found by name (MRPC "#1 String", MNLI "gold_label", ...), so MNLI's
//   train (12 columns) and dev (16 columns: five annotator labels) need no special case.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace bertx::glue {

struct TaskSpec {
  std::string name;                           // name in experiment files: "mrpc"
  std::string display;                        // GLUE's name: "MRPC"
  std::vector<std::string> labels;            // label text of each class id; empty = regression (STS-B)
  bool header = true;                         // train/dev files start with a header line (CoLA's do not)
  std::size_t columns = 0;                    // headerless train/dev: columns per row
  std::size_t text_a_pos = 0, label_pos = 0;  // headerless train/dev: column positions
  std::string text_a, text_b, label;          // header column names (text_b "" = single sentence)
  std::string index = "index";                // id column of test files (QQP: "id")
  std::vector<std::string> eval_files;        // dev file(s), one example set each (MNLI: matched, mismatched)
  std::vector<std::string> test_files;        // test file(s), one example set each
  std::vector<std::string> submission_files;  // one per test file: "CoLA.tsv"; MNLI: "MNLI-m.tsv", "MNLI-mm.tsv"
  std::vector<std::string> metrics;           // GLUE's metrics: accuracy, f1, mcc, pearson, spearman
  std::vector<std::string> set_suffixes{""};  // metric-name suffix per example set (MNLI: "", "_mm")

  bool regression() const { return labels.empty(); }
  std::int64_t num_labels() const { return regression() ? 1 : static_cast<std::int64_t>(labels.size()); }
};

// cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli.
const std::vector<TaskSpec>& tasks();
std::vector<std::string> task_names();
// Throws bertx::Error listing the known names.
const TaskSpec& task(const std::string& name);
// A non-GLUE classification (num_labels >= 2) or regression (1) task: accuracy or Pearson/Spearman,
// predictions.tsv with class ids.
TaskSpec generic_task(std::int64_t num_labels);

struct Example {
  std::string text_a, text_b;  // text_b "" = single sentence (as Google's: an empty B is no B)
  std::int64_t label = -1;     // class id; -1 when unlabelled (test) or regression
  float value = 0;             // regression target (STS-B score)
  std::int64_t index = 0;      // test: the file's index column; train/dev: the row's 0-based ordinal
  std::int64_t set = 0;        // which file of the split it came from (MNLI: 0 matched, 1 mismatched)
};

// Reads one file. labelled = train/dev layout with labels; false = test layout (index column, no label).
// Errors name path:line: wrong column count, unknown label text, a score that is not a number.
std::vector<Example> load_examples(const TaskSpec& spec, const std::string& path, bool labelled, std::int64_t set = 0);

// One scored example: prediction and (when labelled) the gold answer.
struct Outcome {
  std::int64_t index = 0, set = 0;  // Example::index, Example::set
  std::int64_t label = -1;          // predicted class id (classification)
  double value = 0;                 // predicted value (regression)
  bool labelled = false;            // gold / gold_value are known (train/dev)
  std::int64_t gold = -1;           // gold class id (classification)
  double gold_value = 0;            // gold value (regression)
};

// Writes "index<TAB>prediction" files (label names; STS-B values with 3 decimals) into dir, one per set,
// named as the GLUE server expects. Returns the paths written.
std::vector<std::string> write_submission(const TaskSpec& spec, const std::string& dir,
                                          const std::vector<Outcome>& outcomes);

}  // namespace bertx::glue
