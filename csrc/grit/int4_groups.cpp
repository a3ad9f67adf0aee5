#include "int4_groups.h"

#include <cmath>
#include <cstring>
#include <string>

namespace grit {
namespace {

int nibble_code(const uint8_t* packed, uint64_t i) {
  const int nib = (packed[i / 2] >> (4 * (i % 2))) & 0xF;
  return nib >= 8 ? nib - 16 : nib;
}

std::string at(uint64_t i, uint64_t cols) {
  return "row " + std::to_string(i / cols) + ", column " + std::to_string(i % cols);
}

// Whether any 4-bit code in the bytes is 8 (the reserved -8). Per 64-bit
// word: t = w ^ 0x88..88 has a zero nibble exactly where w holds 8, and
// (t - 0x11..11) & ~t & 0x88..88 is nonzero exactly when t has one (no
// borrow crosses a nonzero nibble below the lowest zero one).
bool any_nibble_8(const uint8_t* p, uint64_t len) {
  uint64_t found = 0;
  uint64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    const uint64_t t = w ^ 0x8888888888888888ull;
    found |= (t - 0x1111111111111111ull) & ~t & 0x8888888888888888ull;
  }
  for (; i < len; ++i) found |= (p[i] & 0x0F) == 8 || (p[i] & 0xF0) == 0x80;
  return found != 0;
}

// Whether some scale s has a non-finite 7*s (then a code may reconstruct
// to infinity). The scales are already known finite and positive.
bool any_group_may_overflow(const double* s, uint64_t n) {
  bool any = false;
  for (uint64_t i = 0; i < n; ++i) any |= !(7.0 * s[i] <= 1.7976931348623157e308);
  return any;
}

bool ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

Status int4g_parse_name(const char* text, size_t len, uint64_t* group) {
  size_t b = 0, e = len;
  while (b < e && ascii_space(text[b])) ++b;
  while (e > b && ascii_space(text[e - 1])) --e;
  static const char kPrefix[] = "int4g";
  const size_t np = sizeof(kPrefix) - 1;
  bool form = e - b > np;
  for (size_t i = 0; form && i < np; ++i) {
    const char c = text[b + i];
    form = (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) == kPrefix[i];
  }
  form = form && text[b + np] >= '1' && text[b + np] <= '9';
  for (size_t i = b + np; form && i < e; ++i) form = text[i] >= '0' && text[i] <= '9';
  if (!form) return Status::Fail(Error::kMalformed, "not an INT4G<g> grade name");
  uint64_t g = 0;
  for (size_t i = b + np; i < e; ++i) {
    g = g * 10 + static_cast<uint64_t>(text[i] - '0');
    if (g > (1ull << 62))
      return Status::Fail(Error::kOutOfRange, "the INT4G group size must be at most 2^62, found " +
                                                  std::string(text + b + np, e - b - np));
  }
  *group = g;
  return Status::Ok();
}

Status int4g_layout(uint64_t rows, uint64_t cols, uint64_t group, uint64_t* count,
                    uint64_t* groups) {
  if (rows == 0 || cols == 0)
    return Status::Fail(Error::kOutOfRange, "int4 groups need a non-empty matrix, found " +
                                                std::to_string(rows) + " x " + std::to_string(cols));
  if (group == 0) return Status::Fail(Error::kOutOfRange, "the group size must be positive, found 0");
  uint64_t n;
  if (__builtin_mul_overflow(rows, cols, &n) || n > (1ull << 62))
    return Status::Fail(Error::kOutOfRange, "matrix too large for int4 groups");
  *count = n;
  *groups = rows * ((cols + group - 1) / group);
  return Status::Ok();
}

Status int4g_code(double value, double scale, int* code) {
  if (!std::isfinite(value)) return Status::Fail(Error::kNonFinite, "a non-finite weight cannot be quantized");
  if (!std::isfinite(scale) || !(scale > 0.0))
    return Status::Fail(Error::kBadScale, "the scale must be finite and positive, found " + std::to_string(scale));
  // Divide, round half away from zero, then clamp (a finite ratio that
  // overflows to infinity still saturates).
  const double r = std::round(value / scale);
  *code = r < -7.0 ? -7 : (r > 7.0 ? 7 : static_cast<int>(r));
  return Status::Ok();
}

Status int4g_encode(const double* w, uint64_t rows, uint64_t cols, uint64_t group,
                    std::vector<uint8_t>* packed, std::vector<double>* scales) {
  uint64_t n, g;
  Status st = int4g_layout(rows, cols, group, &n, &g);
  if (!st.ok()) return st;
  std::vector<uint8_t> p((n + 1) / 2, 0);
  std::vector<double> s;
  s.reserve(g);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t c0 = 0; c0 < cols; c0 += group) {
      const uint64_t c1 = c0 + group < cols ? c0 + group : cols;
      double amax = 0.0;
      for (uint64_t c = c0; c < c1; ++c) {
        const double v = w[r * cols + c];
        if (!std::isfinite(v))
          return Status::Fail(Error::kNonFinite, "non-finite weight at " + at(r * cols + c, cols));
        amax = std::fmax(amax, std::fabs(v));
      }
      const double scale = amax == 0.0 ? 1.0 : amax / 7.0;
      if (!(scale > 0.0))
        return Status::Fail(Error::kBadScale, "group max " + std::to_string(amax) + " at row " +
                                                  std::to_string(r) + " underflows to a zero scale");
      s.push_back(scale);
      for (uint64_t c = c0; c < c1; ++c) {
        int q;
        st = int4g_code(w[r * cols + c], scale, &q);
        if (!st.ok()) return st;
        const uint64_t i = r * cols + c;
        p[i / 2] |= static_cast<uint8_t>((q & 0xF) << (4 * (i % 2)));
      }
    }
  }
  *packed = std::move(p);
  *scales = std::move(s);
  return Status::Ok();
}

Status int4g_validate_lengths(uint64_t rows, uint64_t cols, uint64_t group, uint64_t packed_len,
                              uint64_t n_scales) {
  uint64_t n, g;
  Status st = int4g_layout(rows, cols, group, &n, &g);
  if (!st.ok()) return st;
  if (packed_len != (n + 1) / 2)
    return Status::Fail(Error::kPayloadLength, "packed codes: expected " + std::to_string((n + 1) / 2) +
                                                   " bytes, found " + std::to_string(packed_len));
  if (n_scales != g)
    return Status::Fail(Error::kScaleCount, "scales: expected " + std::to_string(g) + " (" +
                                                std::to_string(rows) + " rows x " +
                                                std::to_string((cols + group - 1) / group) +
                                                " groups), found " + std::to_string(n_scales));
  return Status::Ok();
}

Status int4g_validate_layout(uint64_t rows, uint64_t cols, uint64_t group, const uint8_t* packed,
                             uint64_t packed_len, uint64_t n_scales) {
  Status st = int4g_validate_lengths(rows, cols, group, packed_len, n_scales);
  if (!st.ok()) return st;
  if ((rows * cols) % 2 == 1 && (packed[packed_len - 1] & 0xF0) != 0)
    return Status::Fail(Error::kPadding, "the final high nibble is padding and must be 0, found 0x" +
                                             std::to_string((packed[packed_len - 1] >> 4) & 0xF));
  return Status::Ok();
}

Status int4g_validate(uint64_t rows, uint64_t cols, uint64_t group, const uint8_t* packed,
                      uint64_t packed_len, const double* scales, uint64_t n_scales) {
  Status st = int4g_validate_layout(rows, cols, group, packed, packed_len, n_scales);
  if (!st.ok()) return st;
  const uint64_t g = n_scales;
  for (uint64_t i = 0; i < g; ++i)
    if (!std::isfinite(scales[i]) || !(scales[i] > 0.0))
      return Status::Fail(Error::kBadScale, "scale " + std::to_string(i) +
                                                " must be finite and positive, found " +
                                                std::to_string(scales[i]));
  // Reserved codes and non-finite reconstructions. A group whose fl(7*s) is
  // finite cannot overflow (|q| <= 7, rounding is monotone), so one pass
  // over the bytes and one over the scales clear a valid payload; only when
  // either finds something does the element walk name the first offender.
  if (!any_nibble_8(packed, packed_len) && !any_group_may_overflow(scales, g)) return Status::Ok();
  const uint64_t per_row = (cols + group - 1) / group;
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t gi = 0; gi < per_row; ++gi) {
      const double s = scales[r * per_row + gi];
      const uint64_t c0 = gi * group, c1 = cols - c0 < group ? cols : c0 + group;
      for (uint64_t c = c0; c < c1; ++c) {
        const uint64_t i = r * cols + c;
        const int q = nibble_code(packed, i);
        if (q == -8) return Status::Fail(Error::kReservedCode, "reserved code -8 (nibble 8) at " + at(i, cols));
        if (!std::isfinite(q * s))
          return Status::Fail(Error::kNonFinite, "non-finite reconstruction at " + at(i, cols));
      }
    }
  }
  return Status::Ok();
}

Status int4g_decode(uint64_t rows, uint64_t cols, uint64_t group, const uint8_t* packed,
                    uint64_t packed_len, const double* scales, uint64_t n_scales, double* out) {
  Status st = int4g_validate(rows, cols, group, packed, packed_len, scales, n_scales);
  if (!st.ok()) return st;
  int4g_decode_rows(rows, cols, group, packed, scales, 0, rows, out);
  return Status::Ok();
}

void int4g_decode_rows(uint64_t rows, uint64_t cols, uint64_t group, const uint8_t* packed,
                       const double* scales, uint64_t row_begin, uint64_t row_end, double* out) {
  (void)rows;
  const uint64_t per_row = (cols + group - 1) / group;
  for (uint64_t r = row_begin; r < row_end; ++r) {
    const double* s = scales + r * per_row;
    double* o = out + (r - row_begin) * cols;
    for (uint64_t gi = 0; gi < per_row; ++gi) {
      const uint64_t c0 = gi * group, c1 = cols - c0 < group ? cols : c0 + group;
      for (uint64_t c = c0; c < c1; ++c) o[c] = nibble_code(packed, r * cols + c) * s[gi];
    }
  }
}

const char* int4g_grit_inexpressible() {
  return "INT4G stores binary64 scales and lets a row end in a short group; GRIT v1's widest "
         "scale format is binary32 and its size equations need the row length to be a multiple "
         "of k0, so this grade cannot be exported as a GRIT descriptor without altering it";
}

}  // namespace grit
