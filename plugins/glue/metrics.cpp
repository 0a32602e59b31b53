// metrics.cpp - accuracy, F1, Matthews, Pearson, Spearman (see metrics.hpp for the reference definitions).
#include "metrics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bertx/error.hpp"

namespace bertx::glue {

namespace {

void same_size(std::size_t a, std::size_t b, const char* what) {
  if (a != b)
    throw Error(std::string(what) + ": " + std::to_string(a) + " predictions but " + std::to_string(b) +
                " gold values");
}

}  // namespace

double accuracy(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& gold) {
  same_size(pred.size(), gold.size(), "accuracy");
  if (pred.empty()) return 0.0;
  std::size_t hits = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) hits += pred[i] == gold[i];
  return static_cast<double>(hits) / static_cast<double>(pred.size());
}

double f1(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& gold, std::int64_t positive) {
  same_size(pred.size(), gold.size(), "f1");
  double tp = 0, fp = 0, fn = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const bool p = pred[i] == positive, g = gold[i] == positive;
    tp += p && g;
    fp += p && !g;
    fn += !p && g;
  }
  const double denominator = 2 * tp + fp + fn;
  return denominator > 0 ? 2 * tp / denominator : 0.0;
}

// Gorodkin's R_K: (c s - sum_k p_k t_k) / sqrt((s^2 - sum p_k^2)(s^2 - sum t_k^2)); c = correct, s = samples,
// p_k / t_k = times class k was predicted / is true. For two classes it is (TP TN - FP FN) / sqrt(...).
double micro_f1(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& gold, std::int64_t negative) {
  same_size(pred.size(), gold.size(), "micro_f1");
  double tp = 0, predicted = 0, actual = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    predicted += pred[i] != negative;
    actual += gold[i] != negative;
    tp += pred[i] != negative && pred[i] == gold[i];
  }
  return predicted + actual > 0 ? 2 * tp / (predicted + actual) : 0.0;
}

double matthews(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& gold) {
  same_size(pred.size(), gold.size(), "matthews");
  std::map<std::int64_t, double> p, t;
  double c = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    p[pred[i]] += 1;
    t[gold[i]] += 1;
    c += pred[i] == gold[i];
  }
  const double s = static_cast<double>(pred.size());
  double pt = 0, pp = 0, tt = 0;
  for (const auto& [k, n] : p) {
    pp += n * n;
    if (auto it = t.find(k); it != t.end()) pt += n * it->second;
  }
  for (const auto& [k, n] : t) tt += n * n;
  const double denominator = std::sqrt((s * s - pp) * (s * s - tt));
  return denominator > 0 ? (c * s - pt) / denominator : 0.0;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  same_size(x.size(), y.size(), "pearson");
  if (x.size() < 2) return 0.0;
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0.0;
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mean = (static_cast<double>(i + 1) + static_cast<double>(j + 1)) / 2;  // ranks i+1 .. j+1
    for (std::size_t k = i; k <= j; ++k) rank[order[k]] = mean;
    i = j + 1;
  }
  return rank;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  same_size(x.size(), y.size(), "spearman");
  return pearson(average_ranks(x), average_ranks(y));
}

std::map<std::string, double> score(const TaskSpec& spec, const std::vector<Outcome>& outcomes) {
  std::map<std::string, double> out;
  for (std::size_t s = 0; s < spec.set_suffixes.size(); ++s) {
    std::vector<std::int64_t> pred, gold;
    std::vector<double> value, gold_value;
    for (const Outcome& o : outcomes) {
      if (o.set != static_cast<std::int64_t>(s) || !o.labelled) continue;
      pred.push_back(o.label);
      gold.push_back(o.gold);
      value.push_back(o.value);
      gold_value.push_back(o.gold_value);
    }
    if (pred.empty()) continue;
    for (const std::string& m : spec.metrics) {
      double v = 0;
      if (m == "accuracy")
        v = accuracy(pred, gold);
      else if (m == "f1")
        v = f1(pred, gold);
      else if (m == "micro_f1")
        v = micro_f1(pred, gold);
      else if (m == "mcc")
        v = matthews(pred, gold);
      else if (m == "pearson")
        v = pearson(value, gold_value);
      else if (m == "spearman")
        v = spearman(value, gold_value);
      else
        throw Error("GLUE task " + spec.name + ": unknown metric '" + m + "' (table bug)");
      out[m + spec.set_suffixes[s]] = v;
    }
  }
  return out;
}

}  // namespace bertx::glue
