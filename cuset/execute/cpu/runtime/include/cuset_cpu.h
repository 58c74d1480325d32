// cuset CPU runtime: runs CUDA C++ programs (host code and kernels) on the
// CPU. Force-included (as a precompiled header) before every program; the
// CUDA headers a program includes are shims that include this file.
#pragma once
#define CUSET_CPU_RUNTIME 1

// The standard headers programs commonly use live in the precompiled header
// too, so that including them again costs nothing.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <assert.h>
#include <time.h>
#include <float.h>
#include <limits.h>
#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cstddef>
#include <climits>
#include <cfloat>
#include <cassert>
#include <ctime>
#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuset_rt/defs.h"
#include "cuset_rt/vector_types.h"
#include "cuset_rt/types.h"
#include "cuset_rt/core.h"
#include "cuset_rt/api.h"
#include "cuset_rt/launch.h"
#include "cuset_rt/device_math.h"
#include "cuset_rt/atomics.h"
#include "cuset_rt/warp.h"
#include "cuset_rt/half.h"
#include "cuset_rt/texture.h"
#include "cuset_rt/coop_groups.h"
#include "cuset_rt/volatile.h"
#include "cuset_rt/order_proof.h"
#include "cuset_rt/math_constants.h"
