// metrics.hpp - GLUE's metrics, with the definitions of the reference implementations (sklearn / scipy, as
// Hugging Face's glue_compute_metrics calls them): accuracy, binary F1 of class 1, Matthews correlation
// (multi-class form, = sklearn matthews_corrcoef), Pearson r, Spearman rho (Pearson of average ranks, ties
// share their mean rank). Undefined values (no positive predictions or gold for F1, a constant input for the
// correlations) are reported as 0, as sklearn does for F1 and Matthews. Pure C++ (no LibTorch).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tasks.hpp"

namespace bertx::glue {

double accuracy(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& gold);
double f1(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& gold, std::int64_t positive = 1);
// Micro-averaged F1 over every class but `negative` (ChemProt: "false" = no relation): 2 TP / (predicted
// non-negative + gold non-negative), a TP being a non-negative prediction equal to its gold class.
double micro_f1(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& gold,
                std::int64_t negative = 0);
double matthews(const std::vector<std::int64_t>& pred, const std::vector<std::int64_t>& gold);
double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);
// 1-based ranks; tied values get the mean of the ranks they span (scipy.stats.rankdata "average").
std::vector<double> average_ranks(const std::vector<double>& x);

// The task's metrics over labelled outcomes, per example set: {"accuracy", "f1"} for MRPC,
// {"accuracy", "accuracy_mm"} for MNLI (matched, mismatched). Unlabelled outcomes are ignored.
std::map<std::string, double> score(const TaskSpec& spec, const std::vector<Outcome>& outcomes);

}  // namespace bertx::glue
