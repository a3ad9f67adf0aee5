// The extension module torch_grit._C: one PYBIND11_MODULE, bindings
// registered by their own files. Op schemas live in csrc/ops/registry.cpp.
#include <pybind11/pybind11.h>

namespace py = pybind11;

void bind_contract(py::module_& m);
void bind_int4_groups(py::module_& m);
void bind_cpu_kernels(py::module_& m);

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_grit native core: the GRIT v1.1 contract";
  bind_contract(m);
  bind_int4_groups(m);
  bind_cpu_kernels(m);
}
