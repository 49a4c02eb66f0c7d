// The C ABI header this port is compiled against: the repository's normative spec/include/vllm.h (the copy of the
// C++ port's include/vllm.h at ABI v16). Another header, e.g. a port checkout's own include/vllm.h, is chosen at
// build time with GATES_CPP_CXXFLAGS='-DGATES_VLLM_H="/abs/path/vllm.h"' (it must declare the v16 members).
#pragma once

#ifdef GATES_VLLM_H
#include GATES_VLLM_H
#else
#include "../../../../../spec/include/vllm.h"
#endif
