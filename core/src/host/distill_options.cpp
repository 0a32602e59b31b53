// distill_options.cpp - the [distill] fields and their range checks (distill_options.hpp).
#include "host/distill_options.hpp"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "bertx/error.hpp"

namespace bertx {

namespace {

const Fields<DistillOptions>& distill_fields() {
  using D = DistillOptions;
  static const Fields<DistillOptions> f{
      field("teacher", &D::teacher,
            "the teacher: a model folder or checkpoint bertx loads, with the run's task head; \"\" = no distillation"),
      field("temperature", &D::temperature, "temperature T of the soft targets (the soft loss is scaled by T^2)"),
      field("hard_weight", &D::hard_weight, "weight of the task's own loss on the labels"),
      field("soft_weight", &D::soft_weight, "weight of KL(teacher || student) on the task head's outputs"),
      field("hidden_weight", &D::hidden_weight, "weight of the hidden-state MSE summed over the mapped layers"),
      field("attention_weight", &D::attention_weight, "weight of the attention-score MSE summed over mapped layers"),
      field("embedding_weight", &D::embedding_weight, "weight of the embedding-output MSE"),
      field("layer_map", &D::layer_map,
            "teacher layer (1-based) each student layer learns from; [] = uniform (student i <- teacher i*Lt/Ls)"),
      field("init_layers", &D::init_layers,
            "teacher layers (1-based) the student's layers start from, with its embeddings, pooler and heads "
            "(DistilBERT); [] = the student's own initialisation"),
  };
  return f;
}

}  // namespace

Schema distill_schema() { return distill_fields().schema(); }

DistillOptions distill_options_from(const Options& o) {
  const DistillOptions d = distill_fields().read(o);
  if (!(d.temperature > 0))
    throw Error(o.where() + " temperature: must be > 0, got " + fmt::format("{}", d.temperature));
  for (const auto& [key, w] : {std::pair<const char*, double>{"hard_weight", d.hard_weight},
                               {"soft_weight", d.soft_weight},
                               {"hidden_weight", d.hidden_weight},
                               {"attention_weight", d.attention_weight},
                               {"embedding_weight", d.embedding_weight}})
    if (!(w >= 0) || !std::isfinite(w))
      throw Error(o.where() + " " + key + ": must be a finite weight >= 0, got " + fmt::format("{}", w));
  if (!d.teacher.empty() &&
      d.hard_weight + d.soft_weight + d.hidden_weight + d.attention_weight + d.embedding_weight == 0)
    throw Error(o.where() + ": every loss weight is 0 (hard, soft, hidden, attention, embedding): nothing to train");
  return d;
}

}  // namespace bertx
