// distill.hpp - knowledge distillation inside the ordinary trainer: a frozen teacher (any model folder or
// checkpoint bertx loads, its task head included) beside the run's model, the student. Each micro-batch the teacher
// encodes it without gradients, the student encodes it with gradients, the run's task runs its heads on both
// (Task::heads), and the loss is a weighted sum of
//   hard:      the task's own loss on the labels
//   soft:      KL(softmax(teacher / T) || softmax(student / T)) * T^2 on each head output (Hinton et al. 2015);
//              mean squared error for a regression output (one value a row)
//   hidden:    sum over the student's layers i of MSE(student layer i, teacher layer layer_map[i]) (TinyBERT)
//   attention: the same over attention scores q k^T / sqrt(d), masked keys counted as 0 (TinyBERT)
//   embedding: MSE of the embedding outputs (TinyBERT)
// so accumulation, precisions, data parallel, checkpoints and resume, the run store and sweeps apply unchanged.
// A student narrower than its teacher has its hidden states (embedding output included) mapped to the teacher's width
// by one learned linear layer, TinyBERT's W_h: `fit_dense` (its checkpoint name there), a module of the student's, so
// the optimizer trains it and checkpoints / resume keep it; model folders that load the student ignore it.
// The [distill] section sets the teacher and weights; TinyBERT's two stages are two phases (intermediate layers,
// then prediction layer from phase 1's weights), as pre-training's are (experiments/distill).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "bertx/model.hpp"
#include "bertx/task.hpp"
#include "host/distill_options.hpp"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace bertx {

class PluginHost;

namespace distill {

// Rows where mask (N) is true (all rows when undefined) of student / teacher (N, C): KL(teacher || student) at
// temperature T times T^2, averaged over rows; with C = 1, the mean squared error. Float32 scalar.
at::Tensor soft_loss(const at::Tensor& student, const at::Tensor& teacher, double temperature,
                     const at::Tensor& mask = at::Tensor());
// Mean squared error over every element (float32).
at::Tensor mse(const at::Tensor& student, const at::Tensor& teacher);
// scores (B, h, S, S) with attention_mask (B, S): MSE with the masked keys' scores taken as 0 on both sides.
at::Tensor attention_mse(const at::Tensor& student, const at::Tensor& teacher, const at::Tensor& attention_mask);
// The teacher layer (1-based) of each student layer: `map` checked (length Ls, values in 1..Lt), or the uniform
// map i * Lt / Ls when empty. Throws naming [distill] `key`.
std::vector<std::int64_t> layer_map(const std::vector<double>& map, std::int64_t student_layers,
                                    std::int64_t teacher_layers, const std::string& key);

}  // namespace distill

// The teacher and the loss: built by set_up_training when [distill] teacher is set.
class Distiller {
 public:
  // Loads the teacher (eval mode, no gradients, on `device`), attaches the task's heads to it (they must be in
  // its checkpoint when soft_weight > 0) and checks the student against it (head counts for the attention loss).
  // A student of another hidden size with hidden_weight or embedding_weight > 0 gets the projection `fit_dense`
  // (student width -> teacher width, BERT's initialisation from the run's seed). Throws naming [distill] and the
  // folder.
  Distiller(const PluginHost& host, const DistillOptions& options, Task& task, Model& student,
            const at::Device& device);
  // The student's initial layers from the teacher's (init_layers): embeddings, the chosen layers, pooler, heads.
  void init_student(Model& student) const;
  // One micro-batch: the weighted loss, the task's metrics plus hard_loss and one kd_<name>_loss per weighted term.
  StepOutput step(Task& task, Model& student, const Batch& batch);
  const std::string& teacher_folder() const { return options_.teacher; }
  std::int64_t teacher_parameters() const;
  // "fit_dense 384 -> 768" when the student has the learned projection, "" when not.
  std::string projection() const;

 private:
  DistillOptions options_;
  std::shared_ptr<Model> teacher_;
  std::vector<std::int64_t> map_;           // teacher layer (1-based) of student layer i + 1
  std::shared_ptr<torch::nn::Module> fit_;  // the student's `fit_dense` (weight (Ht, Hs), bias (Ht)); null: same width
  // A student hidden state (..., Hs) in the teacher's width (..., Ht): through fit_ when there is one.
  at::Tensor to_teacher_width(const at::Tensor& student_states) const;
};

}  // namespace bertx
