// pybind11 bindings of the contract core's non-tensor objects. No torch
// header here: this file compiles in seconds and the facade in
// torch_grit/contract/ turns these low-level results into Python errors.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "grit/grit.h"
#include "grit/s8_linear.h"

namespace py = pybind11;

namespace {

// Text from the core as a Python str; bytes that are not UTF-8 (a C++ caller
// can pass any bytes) become U+FFFD instead of raising UnicodeDecodeError.
py::str text(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::tuple status_tuple(const grit::Status& s) {
  return py::make_tuple(grit::error_name(s.code), text(s.message), text(s.token), s.position);
}

// A plane argument: a buffer (bytes, numpy, memoryview) or None.
struct PlaneArg {
  py::buffer_info info;
  grit::Plane plane;
};

std::vector<PlaneArg> planes_from(const py::sequence& seq) {
  if (py::len(seq) > 4) throw py::value_error("a GRIT array has at most four planes");
  std::vector<PlaneArg> out(4);
  for (size_t i = 0; i < py::len(seq); ++i) {
    py::object o = seq[i];
    if (o.is_none()) continue;
    py::buffer b = py::reinterpret_borrow<py::buffer>(o);
    out[i].info = b.request();
    if (out[i].info.ndim > 1) {
      // Only contiguous buffers are accepted; the facade makes them so.
      ssize_t expect = out[i].info.itemsize;
      for (ssize_t d = out[i].info.ndim - 1; d >= 0; --d) {
        if (out[i].info.strides[d] != expect) throw py::value_error("plane buffers must be contiguous");
        expect *= out[i].info.shape[d];
      }
    } else if (out[i].info.ndim == 1 && out[i].info.strides[0] != out[i].info.itemsize) {
      throw py::value_error("plane buffers must be contiguous");
    }
    out[i].plane.data = static_cast<const uint8_t*>(out[i].info.ptr);
    out[i].plane.size = static_cast<uint64_t>(out[i].info.size * out[i].info.itemsize);
  }
  return out;
}

py::bytes id_bytes(const grit::Id128& id) {
  return py::bytes(reinterpret_cast<const char*>(id.data()), id.size());
}

grit::Descriptor desc_from(const py::bytes& b) {
  std::string s = b;
  if (s.size() != 64)
    throw py::value_error("a GRIT descriptor is exactly 64 bytes, found " + std::to_string(s.size()));
  return grit::from_bytes(reinterpret_cast<const uint8_t*>(s.data()));
}

py::bytes desc_bytes(const grit::Descriptor& d) {
  const grit::Bytes64 b = grit::to_bytes(d);
  return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

py::tuple check_tuple(const grit::CheckResult& r, const grit::Descriptor& d) {
  const char* field = r.field == grit::CheckField::kGradeFrame
                          ? grit::frame_field_name(r.frame_field)
                          : grit::check_field_name(r.field);
  return py::make_tuple(static_cast<int>(r.status), grit::check_status_name(r.status), field,
                        static_cast<int>(r.plane), r.expected, r.found,
                        r.ok() ? std::string("ok") : grit::describe(r, d));
}

}  // namespace

void bind_contract(py::module_& m) {
  py::class_<grit::Grade>(m, "_Grade")
      .def_readonly("canonical", &grit::Grade::canonical)
      .def_readonly("id", &grit::Grade::id)
      .def_readonly("has_l1", &grit::Grade::has_l1)
      .def_readonly("has_zp", &grit::Grade::has_zp)
      .def_readonly("has_sp", &grit::Grade::has_sp)
      .def_readonly("elem", &grit::Grade::elem)
      .def_readonly("scale0", &grit::Grade::scale0)
      .def_readonly("scale1", &grit::Grade::scale1)
      .def_readonly("zp", &grit::Grade::zp)
      .def_readonly("k0", &grit::Grade::k0)
      .def_readonly("k1", &grit::Grade::k1)
      .def_readonly("sp_n", &grit::Grade::sp_n)
      .def_readonly("sp_m", &grit::Grade::sp_m)
      .def("fields", [](const grit::Grade& g) {
        py::dict d;
        for (int k = 0; k < grit::kNumGradeKeys; ++k)
          if (!g.field[k].empty()) d[grit::grade_key_name(k)] = g.field[k];
        return d;
      })
      .def("projection", [](const grit::Grade& g) { return grit::decode_projection(g); })
      .def("plane_bytes", [](const grit::Grade& g, uint64_t numel) {
        uint64_t b[4];
        const grit::Status s = grit::grade_plane_bytes(g, numel, b);
        if (!s.ok()) throw py::value_error(s.message);
        return std::vector<uint64_t>(b, b + 4);
      });

  m.def("grade_parse", [](const std::string& text) -> py::tuple {
    grit::Grade g;
    const grit::Status s = grit::grade_parse(text, &g);
    if (!s.ok()) return py::make_tuple(py::none(), status_tuple(s));
    return py::make_tuple(g, py::none());
  });
  m.def("reference_grades", []() {
    size_t n;
    const grit::ReferenceGrade* r = grit::reference_grades(&n);
    py::list out;
    for (size_t i = 0; i < n; ++i) out.append(py::make_tuple(r[i].name, r[i].short_name, r[i].grade->canonical));
    return out;
  });

  py::class_<grit::Descriptor>(m, "_Descriptor")
      .def(py::init<>())
      .def_readwrite("magic", &grit::Descriptor::magic)
      .def_readwrite("hdr_bytes", &grit::Descriptor::hdr_bytes)
      .def_readwrite("version", &grit::Descriptor::version)
      .def_readwrite("n_levels", &grit::Descriptor::n_levels)
      .def_readwrite("flags", &grit::Descriptor::flags)
      .def_readwrite("elem", &grit::Descriptor::elem)
      .def_readwrite("scale0", &grit::Descriptor::scale0)
      .def_readwrite("scale1", &grit::Descriptor::scale1)
      .def_readwrite("zp_fmt", &grit::Descriptor::zp_fmt)
      .def_readwrite("group_axis", &grit::Descriptor::group_axis)
      .def_readwrite("k0", &grit::Descriptor::k0)
      .def_readwrite("k1", &grit::Descriptor::k1)
      .def_readwrite("sp_n", &grit::Descriptor::sp_n)
      .def_readwrite("sp_m", &grit::Descriptor::sp_m)
      .def_readwrite("sp_meta_fmt", &grit::Descriptor::sp_meta_fmt)
      .def_readwrite("sp_order", &grit::Descriptor::sp_order)
      .def_readwrite("container", &grit::Descriptor::container)
      .def_readwrite("frame_rsvd", &grit::Descriptor::frame_rsvd)
      .def_readwrite("note", &grit::Descriptor::note)
      .def_readwrite("placement_data", &grit::Descriptor::placement_data)
      .def_readwrite("placement_scale", &grit::Descriptor::placement_scale)
      .def_readwrite("placement_meta", &grit::Descriptor::placement_meta)
      .def_readwrite("grade_id", &grit::Descriptor::grade_id)
      .def("to_bytes", [](const grit::Descriptor& d) { return desc_bytes(d); })
      .def_static("from_bytes", [](const py::bytes& b) { return desc_from(b); })
      .def("copy", [](const grit::Descriptor& d) { return grit::Descriptor(d); });

  m.def("descriptor_for", [](const grit::Grade& g, py::object pd, py::object ps, py::object pm,
                             int group_axis, uint32_t note) {
    grit::Placements p = grit::default_placements(g);
    if (!pd.is_none()) p.data = pd.cast<uint64_t>();
    if (!ps.is_none()) p.scale = ps.cast<uint64_t>();
    if (!pm.is_none()) p.meta = pm.cast<uint64_t>();
    return grit::descriptor_for(g, p, static_cast<int16_t>(group_axis), note);
  });
  m.def("gid", [](const grit::Descriptor& d, const std::string& canonical, const std::vector<int64_t>& shape) {
    return id_bytes(grit::gid_of(d, canonical, shape.data(), shape.size()));
  });
  m.def("crockford32", [](const py::bytes& b) {
    std::string s = b;
    if (s.size() != 16) throw py::value_error("a gid is 16 bytes");
    grit::Id128 id;
    std::memcpy(id.data(), s.data(), 16);
    return grit::crockford32(id);
  });
  m.def("digest", [](const py::sequence& planes) {
    auto args = planes_from(planes);
    grit::Plane p[4];
    for (int i = 0; i < 4; ++i) p[i] = args[i].plane;
    grit::Id128 id;
    {
      py::gil_scoped_release nogil;
      id = grit::digest_of(p);
    }
    return id_bytes(id);
  });
  m.def("explain", [](const grit::Descriptor& a, const grit::Descriptor& b) { return grit::explain(a, b); });
  m.def("expected_plane_bytes", [](const grit::Descriptor& d, const std::vector<int64_t>& shape) -> py::tuple {
    grit::PlaneSizes ps;
    const grit::CheckResult r = grit::expected_plane_bytes(d, shape.data(), shape.size(), &ps);
    if (!r.ok()) return py::make_tuple(py::none(), check_tuple(r, d));
    return py::make_tuple(std::vector<uint64_t>(ps.bytes, ps.bytes + 4), py::none());
  });
  m.def("check_lengths", [](const grit::Descriptor& d, const std::vector<int64_t>& shape,
                            const std::vector<uint64_t>& lens, const grit::Grade* grade) {
    if (lens.size() != 4) throw py::value_error("four plane lengths");
    return check_tuple(grit::check_level1(d, shape.data(), shape.size(), lens.data(), grade), d);
  }, py::arg("desc"), py::arg("shape"), py::arg("lengths"), py::arg("grade").none(true));
  m.def("check_planes", [](const grit::Descriptor& d, const std::vector<int64_t>& shape,
                           const py::sequence& planes, int level, py::object digest,
                           const grit::Grade* grade) {
    auto args = planes_from(planes);
    grit::Plane p[4];
    for (int i = 0; i < 4; ++i) p[i] = args[i].plane;
    grit::Id128 want;
    const grit::Id128* wp = nullptr;
    if (!digest.is_none()) {
      std::string s = digest.cast<py::bytes>();
      if (s.size() != 16) throw py::value_error("an expected digest is 16 bytes");
      std::memcpy(want.data(), s.data(), 16);
      wp = &want;
    }
    grit::CheckResult r;
    {
      py::gil_scoped_release nogil;
      r = grit::check(d, shape.data(), shape.size(), p, level, wp, grade);
    }
    return check_tuple(r, d);
  }, py::arg("desc"), py::arg("shape"), py::arg("planes"), py::arg("level"), py::arg("digest").none(true),
     py::arg("grade").none(true));

  m.def("decode", [](const grit::Grade& g, const py::sequence& planes, uint64_t numel) -> py::tuple {
    auto args = planes_from(planes);
    grit::Plane p[4];
    for (int i = 0; i < 4; ++i) p[i] = args[i].plane;
    std::string out(numel * sizeof(float), '\0');
    grit::Status s;
    {
      py::gil_scoped_release nogil;
      s = grit::decode(g, p, numel, reinterpret_cast<float*>(&out[0]));
    }
    if (!s.ok()) return py::make_tuple(py::none(), status_tuple(s));
    return py::make_tuple(py::bytes(out), py::none());
  });
  m.def("decode_bounds", [](const grit::Grade& g, const py::sequence& planes, uint64_t numel) -> py::tuple {
    auto args = planes_from(planes);
    grit::Plane p[4];
    for (int i = 0; i < 4; ++i) p[i] = args[i].plane;
    std::string lo(numel * sizeof(float), '\0'), hi(numel * sizeof(float), '\0');
    grit::Status s;
    {
      py::gil_scoped_release nogil;
      s = grit::decode_bounds(g, p, numel, reinterpret_cast<float*>(&lo[0]), reinterpret_cast<float*>(&hi[0]));
    }
    if (!s.ok()) return py::make_tuple(py::none(), py::none(), status_tuple(s));
    return py::make_tuple(py::bytes(lo), py::bytes(hi), py::none());
  });
  m.def("decode_factors", [](const grit::Grade& g, const py::sequence& planes, uint64_t numel) -> py::tuple {
    auto args = planes_from(planes);
    grit::Plane p[4];
    for (int i = 0; i < 4; ++i) p[i] = args[i].plane;
    const uint64_t groups = g.k0 ? numel / g.k0 : 0;
    std::string e(numel * sizeof(float), '\0'), S(groups * sizeof(float), '\0');
    grit::Status s;
    {
      py::gil_scoped_release nogil;
      uint64_t cursor = 0;
      s = grit::decode_factors_range(g, p, numel, 0, numel, &cursor, reinterpret_cast<float*>(&e[0]),
                                     reinterpret_cast<float*>(&S[0]));
    }
    if (!s.ok()) return py::make_tuple(py::none(), py::none(), status_tuple(s));
    return py::make_tuple(py::bytes(e), py::bytes(S), py::none());
  });
  m.def("decode_terms", [](const grit::Grade& g, const py::sequence& planes, uint64_t numel) -> py::tuple {
    auto args = planes_from(planes);
    grit::Plane p[4];
    for (int i = 0; i < 4; ++i) p[i] = args[i].plane;
    const uint64_t groups = g.k0 ? numel / g.k0 : 0;
    std::string e(numel * sizeof(float), '\0'), S(groups * sizeof(float), '\0'), z(S), Z(S);
    grit::Status s;
    {
      py::gil_scoped_release nogil;
      uint64_t cursor = 0;
      s = grit::decode_terms_range(g, p, numel, 0, numel, &cursor, reinterpret_cast<float*>(&e[0]),
                                   reinterpret_cast<float*>(&S[0]), reinterpret_cast<float*>(&z[0]),
                                   reinterpret_cast<float*>(&Z[0]));
    }
    if (!s.ok()) return py::make_tuple(py::none(), status_tuple(s));
    return py::make_tuple(py::make_tuple(py::bytes(e), py::bytes(S), py::bytes(z), py::bytes(Z)), py::none());
  });
  m.def("s8_law", [](const grit::Grade& g) -> py::tuple {
    grit::s8::Law L;
    const grit::Status s = grit::s8::s8_law(g, &L);
    if (!s.ok()) return py::make_tuple(py::none(), status_tuple(s));
    py::dict d;
    d["k0"] = L.k0;
    d["kb"] = L.kb;
    d["qe"] = L.qe;
    d["zero"] = L.zero == grit::s8::kZpShared ? "shared" : (L.zero == grit::s8::kZpOffset ? "offset" : "none");
    return py::make_tuple(d, py::none());
  });
  m.def("encode", [](const grit::Grade& g, py::buffer values) -> py::tuple {
    py::buffer_info info = values.request();
    if (info.format != py::format_descriptor<float>::format() || info.itemsize != 4)
      throw py::type_error("encode takes a contiguous float32 buffer, found format '" + info.format + "'");
    grit::EncodedPlanes ep;
    grit::Status s;
    {
      py::gil_scoped_release nogil;
      s = grit::encode(g, static_cast<const float*>(info.ptr), static_cast<uint64_t>(info.size), &ep);
    }
    if (!s.ok()) return py::make_tuple(py::none(), status_tuple(s));
    py::list out;
    for (auto& p : ep.plane) out.append(py::bytes(reinterpret_cast<const char*>(p.data()), p.size()));
    return py::make_tuple(out, py::none());
  });

  m.def("formats", []() {
    size_t n;
    const grit::FormatRow* r = grit::registered_formats(&n);
    py::list out;
    for (size_t i = 0; i < n; ++i) out.append(py::make_tuple(r[i].name, r[i].word));
    return out;
  });
  m.def("fmt_decode", [](uint16_t word, uint32_t code) { return grit::fmt_decode(word, code); });
  m.def("placement_name", &grit::placement_name);
  m.def("placements", []() {
    size_t n;
    const grit::PlacementRow* r = grit::well_known_placements(&n);
    py::list out;
    for (size_t i = 0; i < n; ++i) out.append(py::make_tuple(r[i].name, r[i].word));
    return out;
  });
  m.def("placement_known", &grit::placement_known);
}
