#include "status.h"

namespace grit {

const char* error_name(Error e) {
  switch (e) {
    case Error::kOk: return "ok";
    case Error::kMalformed: return "malformed";
    case Error::kUnknownKey: return "unknown_key";
    case Error::kDuplicateKey: return "duplicate_key";
    case Error::kMissingKey: return "missing_key";
    case Error::kUnknownToken: return "unknown_token";
    case Error::kNotAnAlias: return "not_an_alias";
    case Error::kInexpressible: return "inexpressible";
    case Error::kOutOfRange: return "out_of_range";
    case Error::kInconsistent: return "inconsistent";
    case Error::kBadValue: return "bad_value";
    case Error::kBadLength: return "bad_length";
    case Error::kPayloadLength: return "payload_length";
    case Error::kScaleCount: return "scale_count";
    case Error::kBadScale: return "bad_scale";
    case Error::kReservedCode: return "reserved_code";
    case Error::kPadding: return "padding";
    case Error::kNonFinite: return "non_finite";
  }
  return "unknown";
}

}  // namespace grit
