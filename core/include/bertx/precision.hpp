// bertx/precision.hpp - the named precision choice of [train] precision and every --precision flag, without
// LibTorch (the config reader is torch-free); what each choice means is the ExecutionPolicy's (execution.hpp).
#pragma once
#include "bertx/options.hpp"

namespace bertx {

// The named choice ([train] precision, --precision): fp32 | tf32 (CUDA TF32 matmuls) | amp (fp16 autocast + loss
// scaling, CUDA) | amp-bf16 (bf16 autocast) | int8 (inference: int8 linears, dynamic activation quantization, CPU).
// The command-line flag also takes fp16 (= amp) and bf16 (= amp-bf16).
enum class Precision { Fp32, Tf32, Amp, AmpBf16, Int8 };
inline const EnumNames<Precision>& option_names(Precision) {
  static const EnumNames<Precision> n{{Precision::Fp32, "fp32"},
                                      {Precision::Tf32, "tf32"},
                                      {Precision::Amp, "amp"},
                                      {Precision::AmpBf16, "amp-bf16"},
                                      {Precision::Int8, "int8"}};
  return n;
}
inline bool mixed_precision(Precision p) { return p == Precision::Amp || p == Precision::AmpBf16; }

}  // namespace bertx
