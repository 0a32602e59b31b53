// text_endpoints.cpp - a served model's text endpoints from its task plugin's TextHandler (text_endpoints.hpp).
#include "serve/text_endpoints.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "bertx/task.hpp"
#include "bertx/tokenizer.hpp"
#include "host/model_folder.hpp"
#include "host/plugin_host.hpp"

namespace fs = std::filesystem;

namespace bertx::serve {

namespace {

// config.json's id2label ({"0": "negative", ...}) as names by class id; empty when absent or incomplete.
std::vector<std::string> id2label(const std::string& path, std::int64_t num_labels) {
  std::ifstream in(config_file_in(path));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("id2label") || !j["id2label"].is_object()) return {};
  std::vector<std::string> labels;
  for (std::int64_t i = 0; i < num_labels; ++i) {
    const auto it = j["id2label"].find(std::to_string(i));
    if (it == j["id2label"].end() || !it->is_string()) return {};
    labels.push_back(it->get<std::string>());
  }
  return labels;
}

// The query's sequences stacked, right-padded to the longest.
Sequences stack(const std::vector<TextSequence>& seqs, std::int64_t max_positions) {
  Sequences s;
  s.rows = static_cast<std::int64_t>(seqs.size());
  for (const auto& q : seqs) s.cols = std::max<std::int64_t>(s.cols, static_cast<std::int64_t>(q.input_ids.size()));
  if (s.rows == 0 || s.cols == 0) throw RequestError(400, "the request has no text to run");
  if (s.cols > max_positions)
    throw RequestError(400, "a sequence of " + std::to_string(s.cols) + " tokens exceeds the model's " +
                                std::to_string(max_positions) + " positions");
  const auto n = static_cast<std::size_t>(s.rows * s.cols);
  s.input_ids.assign(n, 0), s.attention_mask.assign(n, 0), s.token_type_ids.assign(n, 0);
  for (std::size_t r = 0; r < seqs.size(); ++r)
    for (std::size_t i = 0; i < seqs[r].input_ids.size(); ++i) {
      const std::size_t at = r * static_cast<std::size_t>(s.cols) + i;
      s.input_ids[at] = seqs[r].input_ids[i];
      s.token_type_ids[at] = i < seqs[r].token_type_ids.size() ? seqs[r].token_type_ids[i] : 0;
      s.attention_mask[at] = 1;
    }
  return s;
}

// The batch outputs of the query's rows as each sequence's TextOutputs (per-token outputs cut to its length).
std::vector<TextOutputs> split(const std::vector<OutputTensor>& outputs, const std::vector<TextSequence>& seqs) {
  std::vector<TextOutputs> out(seqs.size());
  for (const auto& o : outputs)
    for (std::size_t r = 0; r < seqs.size() && static_cast<std::int64_t>(r) < o.rows; ++r) {
      const std::int64_t n = o.per_token ? static_cast<std::int64_t>(seqs[r].input_ids.size()) : o.cols;
      const auto begin = o.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::int64_t>(r) * o.cols);
      out[r][o.name].assign(begin, begin + std::min(n, o.cols));
    }
  return out;
}

}  // namespace

std::vector<TextEndpoint> text_endpoints(PluginHost& host, const ServedModel& model,
                                         std::int64_t max_request_sequences) {
  if (model.vocab.empty()) return {};
  const std::string type = model.task;  // the task plugins' names: squad, classification
  const auto tasks = host.entries(Kind::Task);
  if (std::none_of(tasks.begin(), tasks.end(), [&](const BuilderEntry* e) { return e->spec.name == type; })) return {};
  std::map<std::string, OptionValue> set;
  if (type == "classification") set["num_labels"] = model.num_labels;
  std::shared_ptr<Task> task = host.create<Task>(Kind::Task, type, host.options_for(Kind::Task, type, set));
  auto vocab = Vocab::load(model.vocab);
  const bool lower = model.do_lower_case >= 0 ? model.do_lower_case == 1 : !vocab->looks_cased();
  TextSetup setup{std::make_shared<const Tokenizer>(vocab, TokenizerOptions{lower}), model.limits.max_positions,
                  type == "classification" ? id2label(model.path, model.num_labels) : std::vector<std::string>{}};
  std::shared_ptr<TextHandler> handler = task->text_handler(setup);
  if (!handler) return {};
  const std::int64_t max_positions = model.limits.max_positions;
  TextEndpoint e;
  e.kind = handler->endpoint();
  e.prepare = [handler, task, max_positions, max_request_sequences](const std::string& body) {
    std::shared_ptr<TextQuery> query;
    try {
      query = handler->query(body);
    } catch (const std::exception& ex) {
      throw RequestError(400, ex.what());
    }
    if (const auto n = static_cast<std::int64_t>(query->sequences().size()); n > max_request_sequences)
      throw RequestError(400, "the request's text makes " + std::to_string(n) +
                                  " sequences (windows or list entries), more than --max-request-sequences " +
                                  std::to_string(max_request_sequences) + ": shorten the text or split the request");
    Sequences s = stack(query->sequences(), max_positions);
    std::function<std::string(const std::vector<OutputTensor>&)> answer = [query](const std::vector<OutputTensor>& o) {
      return query->answer(split(o, query->sequences()));
    };
    return std::make_pair(std::move(s), std::move(answer));
  };
  return {std::move(e)};
}

}  // namespace bertx::serve
