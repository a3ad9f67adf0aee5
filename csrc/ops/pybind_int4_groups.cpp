// pybind11 bindings of the int4 row-group grade (csrc/grit/int4_groups.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "grit/int4_groups.h"

namespace py = pybind11;

namespace {

py::tuple err(const grit::Status& s) { return py::make_tuple(grit::error_name(s.code), s.message); }

const double* doubles(const py::buffer_info& info, const char* what) {
  if (info.format != py::format_descriptor<double>::format() || info.itemsize != 8)
    throw py::type_error(std::string(what) + " must be a contiguous float64 buffer, found format '" +
                         info.format + "'");
  return static_cast<const double*>(info.ptr);
}

}  // namespace

void bind_int4_groups(py::module_& m) {
  m.def("int4g_encode", [](py::buffer w, uint64_t rows, uint64_t cols, uint64_t group) -> py::tuple {
    py::buffer_info info = w.request();
    const double* p = doubles(info, "weights");
    if (static_cast<uint64_t>(info.size) != rows * cols)
      throw py::value_error("weights hold " + std::to_string(info.size) + " values, expected " +
                            std::to_string(rows * cols));
    std::vector<uint8_t> packed;
    std::vector<double> scales;
    grit::Status s;
    {
      py::gil_scoped_release nogil;
      s = grit::int4g_encode(p, rows, cols, group, &packed, &scales);
    }
    if (!s.ok()) return py::make_tuple(py::none(), py::none(), err(s));
    return py::make_tuple(py::bytes(reinterpret_cast<const char*>(packed.data()), packed.size()),
                          py::bytes(reinterpret_cast<const char*>(scales.data()), scales.size() * 8),
                          py::none());
  });
  m.def("int4g_decode", [](uint64_t rows, uint64_t cols, uint64_t group, py::buffer packed,
                           py::buffer scales) -> py::tuple {
    py::buffer_info pi = packed.request(), si = scales.request();
    const double* s = doubles(si, "scales");
    std::string out;
    uint64_t n = 0, g = 0;
    grit::Status st = grit::int4g_layout(rows, cols, group, &n, &g);
    if (st.ok()) {
      out.assign(n * sizeof(double), '\0');
      py::gil_scoped_release nogil;
      st = grit::int4g_decode(rows, cols, group, static_cast<const uint8_t*>(pi.ptr),
                              static_cast<uint64_t>(pi.size * pi.itemsize), s,
                              static_cast<uint64_t>(si.size), reinterpret_cast<double*>(&out[0]));
    }
    if (!st.ok()) return py::make_tuple(py::none(), err(st));
    return py::make_tuple(py::bytes(out), py::none());
  });
  // The group size of an "INT4G<g>" name, None when the text is not of that
  // form; ValueError when g is out of range. The ops parse names the same way.
  m.def("int4g_parse_name", [](const std::string& text) -> py::object {
    uint64_t group = 0;
    const grit::Status s = grit::int4g_parse_name(text.data(), text.size(), &group);
    if (s.code == grit::Error::kMalformed) return py::none();
    if (!s.ok()) throw py::value_error("grade '" + text + "': " + s.message);
    return py::int_(group);
  });
  m.def("int4g_grit_inexpressible", []() { return std::string(grit::int4g_grit_inexpressible()); });
}
