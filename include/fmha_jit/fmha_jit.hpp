// fmha-jit: a JIT kernel-generation dispatcher for fused multi-head attention.
// Umbrella header of the public API.
#pragma once

#include "fmha_jit/config.hpp"
#include "fmha_jit/device.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "fmha_jit/problem.hpp"
