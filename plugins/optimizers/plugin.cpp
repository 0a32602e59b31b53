// plugin.cpp - the `optimizers` plugin: registers adamw, bertadam, lamb and nvlamb with the host. Each
// factory reads its typed options once into a config struct (see optimizers.hpp) and builds the optimizer.
#include "bertx/optimizer.hpp"
#include "bertx/plugin.hpp"
#include "optimizers.hpp"

namespace {

void register_optimizers(bertx::Registry& registry) {
  using namespace bertx::optim;
  bertx::add_optimizer(registry, "adamw", "AdamW (torch.optim.AdamW) with global gradient-norm clipping",
                       adamw_schema(), [](const bertx::Options& o) { return make_adamw(adamw_config(o)); });
  bertx::add_optimizer(registry, "bertadam",
                       "BertAdam (NVIDIA BERT fine-tuning): no bias correction, per-tensor gradient clipping",
                       bertadam_schema(), [](const bertx::Options& o) { return make_bertadam(bertadam_config(o)); });
  bertx::add_optimizer(registry, "lamb",
                       "LAMB (cybertronai pytorch-lamb): trust ratio on every tensor, no bias correction",
                       lamb_schema(), [](const bertx::Options& o) { return make_lamb(lamb_config(o)); });
  bertx::add_optimizer(registry, "nvlamb",
                       "NVLAMB (apex FusedLAMB, NVIDIA BERT pre-training): global-norm scaling, bias-corrected moments",
                       nvlamb_schema(), [](const bertx::Options& o) { return make_nvlamb(nvlamb_config(o)); });
}

}  // namespace

BERTX_PLUGIN("optimizers", "0.1.0", "AdamW, BertAdam, LAMB and NVLAMB optimizers for BERT", register_optimizers)
