// pybind11 bindings of the CPU kernel dispatch (kernels/cpu/packed_linear_cpu.h):
// which instruction-set variant runs, a test hook to switch it, and each
// variant's decoder on its own, so tests can prove it bit-exact.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "grit/grit.h"
#include "kernels/cpu/bf16_amx.h"
#include "kernels/cpu/bf16_dpbf16.h"
#include "kernels/cpu/nibble_tiles.h"
#include "kernels/cpu/packed_linear_cpu.h"
#include "kernels/cpu/s8_tile.h"

namespace py = pybind11;

namespace {

grit::cpu::Isa isa_arg(const std::string& name) {
  grit::cpu::Isa isa;
  if (!grit::cpu::isa_parse(name.c_str(), &isa))
    throw py::value_error("unknown CPU kernel variant '" + name + "'; expected scalar, avx2, avx512 or avx512_bf16");
  if (!grit::cpu::isa_supported(isa))
    throw py::value_error("this CPU cannot run the " + name + " kernels");
  return isa;
}

}  // namespace

void bind_cpu_kernels(py::module_& m) {
  m.def("cpu_isa", []() {
    grit::cpu::Isa isa;
    const grit::Status s = grit::cpu::active_isa(&isa);
    if (!s.ok()) throw py::value_error(s.message);
    return std::string(grit::cpu::isa_name(isa));
  }, "The CPU kernel variant packed_linear runs: scalar, avx2, avx512 or avx512_bf16.");

  m.def("cpu_isas_supported", []() {
    std::vector<std::string> out;
    for (auto i : grit::cpu::kAllIsas)
      if (grit::cpu::isa_supported(i)) out.push_back(grit::cpu::isa_name(i));
    return out;
  });

  m.def("_set_cpu_isa", [](const std::string& name) {
    grit::cpu::Isa prev;
    const grit::Status s = grit::cpu::set_active_isa(isa_arg(name), &prev);
    if (!s.ok()) throw py::value_error(s.message);
    return std::string(grit::cpu::isa_name(prev));
  }, "Tests only: run another CPU kernel variant from now on; returns the previous one.");

  m.def("_cpu_set_pair_gemm", [](int mode) { return grit::cpu::set_pair_gemm(mode); },
        "Tests only: 1 forces the avx512_bf16 pair path on for batches > 1, 0 off, -1 the CPU vendor's "
        "choice (AMD on); returns the previous setting.");
  m.def("_cpu_set_s8_amx", [](int mode) { return grit::cpu::set_s8_amx(mode); },
        "Tests only: 1 runs packed_linear_s8's AMX kernel at every batch where the CPU and grade allow it, "
        "0 never, -1 from 16 batch rows up (the default); returns the previous setting.");
  m.def("_cpu_s8_amx_ready", []() { return grit::cpu::s8_amx_ready(); },
        "Whether this CPU has AMX-INT8 and the OS lets this process use it (packed_linear_s8's AMX kernel).");
  m.def("_cpu_s8_amx_calls", []() { return grit::cpu::s8_amx_calls(); },
        "Tests only: how many weight tiles packed_linear_s8's AMX kernel has run.");
  m.def("_cpu_set_bf16_amx", [](int mode) { return grit::cpu::set_bf16_amx(mode); },
        "Tests only: 0 runs packed_linear_bf16's scalar copy of the law, 1 or -1 (the default) its tile "
        "multiplies where the CPU allows them, else vdpbf16ps where it allows that, 2 vdpbf16ps even where "
        "AMX is ready; returns the previous setting.");
  m.def("_cpu_bf16_amx_ready", []() { return grit::cpu::bf16_amx_ready(); },
        "Whether this CPU has AMX-BF16, the OS lets this process use it, and its tile multiply follows the "
        "bf16 law's order (checked once): packed_linear_bf16's fast kernel.");
  m.def("_cpu_bf16_amx_calls", []() { return grit::cpu::bf16_amx_calls(); },
        "Tests only: how many multiplies packed_linear_bf16's kernels have run on AMX tiles.");
  m.def("_cpu_bf16_dp_ready", []() { return grit::cpu::bf16_dp_ready(); },
        "Whether this CPU has AVX512_BF16 and its vdpbf16ps follows the bf16 law's order (checked once): "
        "packed_linear_bf16's kernel where there is no AMX.");
  m.def("_cpu_bf16_dp_calls", []() { return grit::cpu::bf16_dp_calls(); },
        "Tests only: how many multiplies packed_linear_bf16's kernels have run on vdpbf16ps.");
  m.def("_cpu_pair_path_calls", []() { return grit::cpu::pair_path_calls(); },
        "Tests only: how many times the avx512_bf16 pair path has run (per thread and call).");

  m.def("cpu_sparse_quads_regular", [](py::buffer meta) {
    const py::buffer_info info = meta.request();
    if (info.itemsize != 1 || info.ndim != 1 || (info.ndim == 1 && info.strides[0] != 1))
      throw py::value_error("cpu_sparse_quads_regular: a contiguous 1-D buffer of bytes is needed");
    return grit::cpu::sparse_quads_regular(static_cast<const uint8_t*>(info.ptr), static_cast<uint64_t>(info.size));
  }, "Whether every 2:4 quad of a position plane (aux) names two distinct positions: what the CPU tile "
     "layout of an I8S24 weight needs (tile_nibbles refuses other planes).");
  m.def("cpu_fast_kind", [](const grit::Grade& g) {
    return std::string(grit::cpu::fast_kind_name(grit::cpu::fast_kind_of(g)));
  }, "The fast decoder packed_linear uses for a grade ('reference' when none).");

  // The rows of W as one variant's decoder produces them: (bytes of n*k
  // float32, fell_back). fell_back: the decoder refused these planes (the
  // op then runs the reference).
  m.def("_cpu_decode", [](const std::string& isa_name, const grit::Grade& g, const py::sequence& planes,
                          int64_t n, int64_t k) -> py::tuple {
    const grit::cpu::Isa isa = isa_arg(isa_name);
    if (py::len(planes) != 4) throw py::value_error("planes: expected 4 buffers");
    std::vector<py::buffer_info> infos;
    grit::cpu::PackedWeight w;
    w.grade = &g;
    w.n = n;
    w.k = k;
    for (int i = 0; i < 4; ++i) {
      infos.push_back(planes[i].cast<py::buffer>().request());
      w.planes[i].data = static_cast<const uint8_t*>(infos.back().ptr);
      w.planes[i].size = static_cast<uint64_t>(infos.back().size * infos.back().itemsize);
    }
    uint64_t want[4];
    grit::Status s = grit::grade_plane_bytes(g, static_cast<uint64_t>(n * k), want);
    if (!s.ok()) throw py::value_error(s.message);
    for (int i = 0; i < 4; ++i)
      if (w.planes[i].size != want[i])
        throw py::value_error("plane " + std::to_string(i) + ": expected " + std::to_string(want[i]) +
                              " bytes, found " + std::to_string(w.planes[i].size));
    std::string out(static_cast<size_t>(n * k) * sizeof(float), '\0');
    bool fallback = false;
    {
      py::gil_scoped_release nogil;
      grit::cpu::LinearPlan plan;
      grit::cpu::make_plan(w, &plan);
      s = grit::cpu::kernels_for(isa).decode_tiles(plan, 0, grit::cpu::linear_tile_count(n),
                                                   reinterpret_cast<float*>(&out[0]), &fallback);
    }
    if (!s.ok()) throw py::value_error(s.message);
    return py::make_tuple(py::bytes(out), fallback);
  });
}
