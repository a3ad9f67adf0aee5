// torch_grit's contract core: GRIT v1.1 in torch-free C++17.
#pragma once

#include "check.h"
#include "decode.h"
#include "descriptor.h"
#include "encode.h"
#include "fnv.h"
#include "format.h"
#include "grade.h"
#include "int4_groups.h"
#include "linear_law.h"
#include "placement.h"
#include "status.h"
