// A test fixture in the style of pytorch/extension-cpp: Python.h, a PyInit__C stub that
// makes the library importable as a Python module, kernels and their registration.
#include <Python.h>

#include <ATen/Operators.h>
#include <torch/all.h>
#include <torch/library.h>

extern "C" {
/* Creates a dummy empty _C module that can be imported from Python.
   The import from Python will load the .so consisting of this file
   in this extension, so that the TORCH_LIBRARY static initializers
   below are run. */
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT,
      "_C", /* name of module */
      NULL, /* module documentation, may be NULL */
      -1,   /* size of per-interpreter state of the module */
      NULL, /* methods */
  };
  return PyModule_Create(&module_def);
}
}

namespace extension_cpp {

at::Tensor mymuladd_cpu(const at::Tensor& a, const at::Tensor& b, double c) {
  TORCH_CHECK(a.sizes() == b.sizes());
  TORCH_CHECK(a.dtype() == at::kFloat || a.dtype() == at::kDouble);
  TORCH_CHECK(b.dtype() == a.dtype());
  at::Tensor a_contig = a.contiguous();
  at::Tensor b_contig = b.contiguous();
  return a_contig * b_contig + c;
}

TORCH_LIBRARY(extension_cpp, m) {
  m.def("mymuladd(Tensor a, Tensor b, float c) -> Tensor");
  m.def("mymul(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(extension_cpp, CPU, m) {
  m.impl("mymuladd", &mymuladd_cpu);
}

}  // namespace extension_cpp
