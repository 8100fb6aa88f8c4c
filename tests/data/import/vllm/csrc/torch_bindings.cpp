// A bindings excerpt in the style of a large serving project: one registration
// block, the library variable named `ops`, schemas split over concatenated literals.
#include "ops.h"
#include "registration.h"

#include <torch/library.h>

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  // Activation ops
  // Activation function used in SwiGLU.
  ops.def("silu_and_mul(Tensor! result, Tensor input) -> ()");
  ops.impl("silu_and_mul", torch::kCPU, &silu_and_mul);

  // Layernorm
  // Apply Root Mean Square (RMS) Normalization to the input tensor.
  ops.def(
      "rms_norm(Tensor! result, Tensor input, Tensor weight, float epsilon) -> "
      "()");
  ops.impl("rms_norm", torch::kCPU, &rms_norm);

  /* Quantization: the scale is written when given. */
  ops.def(
      "scaled_copy(Tensor! result, Tensor input, Tensor!? scale, SymInt block) "
      "-> ()");
  ops.impl("scaled_copy", torch::kCPU, &scaled_copy);
}
