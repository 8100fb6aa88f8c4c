// A test fixture in the older style: torch/extension.h and a pybind11 module beside the
// TORCH_LIBRARY registration.
#include <torch/extension.h>

namespace extension_cpp {

at::Tensor mymul_cpu(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.sizes() == b.sizes());
  return a.contiguous() * b.contiguous();
}

TORCH_LIBRARY_IMPL(extension_cpp, CPU, m) {
  m.impl("mymul", &mymul_cpu);
}

}  // namespace extension_cpp

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("mymul", &extension_cpp::mymul_cpu, "a * b, bypassing the dispatcher");
}
