// Cost of the boundary check in C++: ns per level-1 check for each reference
// grade (descriptor in hand, and parsed from its 64 bytes on every call), and
// the level-2 digest throughput. A benchmark, not a test: the numbers depend
// on the machine and its load. benchmarks/bench_check.py reads `--json`.
//
//   bench_check_cpp           markdown table | what | median | unit |
//   bench_check_cpp --json    one JSON object {"level1_ns_mxfp4": ..., "digest_gbps": ...}
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "grit/check.h"
#include "grit/descriptor.h"
#include "grit/grade.h"

namespace {

using Clock = std::chrono::steady_clock;

// Every result lands here, so no call can be dropped as dead code.
volatile uint64_t g_sink = 0;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ns per call of `fn(n)`, which runs the operation n times. n is
// calibrated so that one sample takes about `target_s`; the clock is read
// only around whole samples, never inside the loop.
template <class Fn>
double ns_per_call(Fn fn, double target_s = 0.3, int repeats = 5) {
  uint64_t n = 1000;
  for (;;) {
    const auto t0 = Clock::now();
    fn(n);
    const double dt = seconds_since(t0);
    if (dt >= target_s) break;
    const double grow = dt <= 0 ? 10.0 : std::max(2.0, target_s / dt * 1.2);
    n = static_cast<uint64_t>(static_cast<double>(n) * std::min(grow, 100.0));
  }
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    fn(n);
    samples.push_back(seconds_since(t0) * 1e9 / static_cast<double>(n));
  }
  return median(samples);
}

struct Case {
  grit::Descriptor desc;
  grit::Bytes64 bytes;
  uint64_t lens[4];
};

Case make_case(const char* grade_name, const int64_t* dims, size_t rank) {
  const grit::ReferenceGrade* ref = grit::reference_grade(grade_name);
  if (ref == nullptr) {
    std::fprintf(stderr, "bench_check: no reference grade %s\n", grade_name);
    std::exit(1);
  }
  Case c;
  c.desc = grit::descriptor_for(*ref->grade, grit::default_placements(*ref->grade));
  c.bytes = grit::to_bytes(c.desc);
  grit::PlaneSizes ps;
  grit::expected_plane_bytes(c.desc, dims, rank, &ps);
  std::copy(ps.bytes, ps.bytes + 4, c.lens);
  // Time the path that runs every step (the success path), not an early exit.
  const grit::CheckResult r = grit::check_level1(c.desc, dims, rank, c.lens);
  if (!r.ok()) {
    std::fprintf(stderr, "bench_check: %s reference descriptor fails: %s\n", grade_name,
                 grit::describe(r, c.desc).c_str());
    std::exit(1);
  }
  return c;
}

// Accumulating status and field keeps every call's result live.
uint64_t fold(const grit::CheckResult& r) {
  return static_cast<uint64_t>(r.status) * 64u + static_cast<uint64_t>(r.field);
}

double bench_level1(const Case& c, const int64_t* dims, size_t rank) {
  // Read through a volatile pointer each call so that, even under LTO, the
  // compiler cannot prove the input constant and hoist the check out.
  const grit::Descriptor* volatile dp = &c.desc;
  return ns_per_call([&](uint64_t n) {
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; ++i) acc += fold(grit::check_level1(*dp, dims, rank, c.lens));
    g_sink = g_sink + acc;
  });
}

double bench_from_bytes(const Case& c, const int64_t* dims, size_t rank) {
  const uint8_t* volatile bp = c.bytes.data();
  return ns_per_call([&](uint64_t n) {
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; ++i)
      acc += fold(grit::check_level1(grit::from_bytes(bp), dims, rank, c.lens));
    g_sink = g_sink + acc;
  });
}

// The planes of an MXFP4 8192x15360 weight: 60 MiB data + 3.75 MiB scales,
// random bytes (FNV's cost does not depend on the values, but zero pages
// could be shared copy-on-write and flatter the memory traffic).
double bench_digest_gbps(uint64_t* total_bytes) {
  const int64_t dims[2] = {8192, 15360};
  const Case c = make_case("MXFP4", dims, 2);
  uint64_t total = 0;
  for (uint64_t len : c.lens) total += len;
  std::vector<uint8_t> buf(total);
  uint64_t x = 0x9E3779B97F4A7C15ull;  // splitmix64: fast, and deterministic across runs
  for (size_t i = 0; i < buf.size(); i += 8) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(&buf[i], &z, std::min<size_t>(8, buf.size() - i));
  }
  grit::Plane planes[4];
  uint64_t off = 0;
  for (int i = 0; i < 4; ++i) {
    planes[i].data = buf.data() + off;
    planes[i].size = c.lens[i];
    off += c.lens[i];
  }
  std::vector<double> gbps;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    const grit::Id128 d = grit::digest_of(planes);
    const double dt = seconds_since(t0);
    g_sink = g_sink + d[0];
    gbps.push_back(static_cast<double>(total) / dt / 1e9);
  }
  *total_bytes = total;
  return median(gbps);
}

struct Row {
  std::string key, what;
  double value;
  const char* unit;
};

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      std::fprintf(stderr, "usage: %s [--json]\n", argv[0]);
      return 2;
    }
  }

  const int64_t dims[2] = {4096, 4096};
  std::vector<Row> rows;
  const char* const grades[][2] = {{"MXFP4", "mxfp4"}, {"Q4KS", "q4ks"}, {"NVF4", "nvf4"},
                                   {"I8S24", "i8s24"}};
  for (const auto& g : grades) {
    const Case c = make_case(g[0], dims, 2);
    rows.push_back({std::string("level1_ns_") + g[1],
                    std::string("level-1 check, GRADE_") + g[0] + ", 4096x4096",
                    bench_level1(c, dims, 2), "ns"});
  }
  const Case mx = make_case("MXFP4", dims, 2);
  rows.push_back({"level1_ns_from_bytes_mxfp4", "from_bytes + level-1 check, GRADE_MXFP4",
                  bench_from_bytes(mx, dims, 2), "ns"});
  uint64_t total = 0;
  const double gbps = bench_digest_gbps(&total);
  char what[96];
  std::snprintf(what, sizeof what, "level-2 digest_of, %.2f MiB of planes",
                static_cast<double>(total) / (1 << 20));
  rows.push_back({"digest_gbps", what, gbps, "GB/s"});

  if (json) {
    std::printf("{");
    for (size_t i = 0; i < rows.size(); ++i)
      std::printf("%s\"%s\": %.3f", i ? ", " : "", rows[i].key.c_str(), rows[i].value);
    std::printf("}\n");
  } else {
    std::printf("| what | median | unit |\n|---|---|---|\n");
    for (const Row& r : rows) std::printf("| %s | %.3f | %s |\n", r.what.c_str(), r.value, r.unit);
  }
  return 0;
}
