// Test helper: a grade given by reference name ("MXFP4") or grade string,
// and its exact integer law; false (with the reason in the test log) when
// the text does not parse or the grade has no exact law.
#pragma once

#include <gtest/gtest.h>

#include "grit/exact_linear.h"
#include "grit/grade.h"

inline bool exact_law_of(const char* text, grit::Grade* g, grit::exact::Law* law) {
  if (const auto* ref = grit::reference_grade(text)) {
    *g = *ref->grade;
  } else if (!grit::grade_parse(text, g).ok()) {
    ADD_FAILURE() << text << " does not parse";
    return false;
  }
  const grit::Status s = grit::exact::exact_law(*g, law);
  if (!s.ok()) ADD_FAILURE() << text << " has no exact law: " << s.message;
  return s.ok();
}
