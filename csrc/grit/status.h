// Typed results for the contract core. csrc/grit throws nothing: every
// fallible call returns a Status (or a CheckResult, see check.h) so a C++
// user without exceptions, a fuzzer and the torch boundary all see the same
// failure classes.
#pragma once

#include <string>
#include <utility>

namespace grit {

enum class Error {
  kOk = 0,
  kMalformed,       // grammar broken: missing "grit1(", a field without '='
  kUnknownKey,      // a grade key v1 does not define
  kDuplicateKey,
  kMissingKey,      // e, k0, s0 and esr have no default
  kUnknownToken,    // a value no alias table knows
  kNotAnAlias,      // a spelling deliberately refused (e4m3fnuz, b16, u4b)
  kInexpressible,   // a real format the v1 grammar cannot carry (NF4, IQ*, FNUZ)
  kOutOfRange,      // a number outside what the field can hold
  kInconsistent,    // fields that contradict each other (k1 without s1, ...)
  kBadValue,        // an encoder input it refuses (non-finite range, bad count)
  kBadLength,       // a buffer of the wrong size
  // Readers of stored int4 groups (seed 001), one class per refusal:
  kPayloadLength,   // packed code bytes != ceil(N/2)
  kScaleCount,      // scales != R * ceil(C/g)
  kBadScale,        // a scale that is not finite and > 0
  kReservedCode,    // the nibble 8 (code -8), which the format reserves
  kPadding,         // a non-zero high nibble after an odd code count
  kNonFinite,       // a non-finite weight or reconstruction
};

const char* error_name(Error e);

struct Status {
  Error code = Error::kOk;
  std::string message;   // says what was expected, what was found, where
  std::string token;     // the offending token, when there is one
  long position = -1;    // byte offset of the token in the caller's text

  bool ok() const { return code == Error::kOk; }
  static Status Ok() { return Status{}; }
  static Status Fail(Error c, std::string msg, std::string tok = {}, long pos = -1) {
    Status s;
    s.code = c;
    s.message = std::move(msg);
    s.token = std::move(tok);
    s.position = pos;
    return s;
  }
};

}  // namespace grit
