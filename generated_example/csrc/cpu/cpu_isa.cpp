// Which SIMD level the kernels of this library run (user-owned, not generated).
//
// A C function, so that tests and users can ask the built library without an
// op: ctypes.CDLL(str(example_ops._library.LIBRARY_PATH)).example_cpu_isa() -> b"avx512"
// (with restype c_char_p).
// EXAMPLE_CPU_ISA / EXAMPLE_FORCE_SCALAR cap it (Note [Run-time ISA dispatch]).
#include "kernel_utils.h"

extern "C" __attribute__((visibility("default"))) const char* example_cpu_isa() {
  return example::kutil::isa_name(example::kutil::cpu_isa());
}
