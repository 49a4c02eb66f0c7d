// Case inputs of the BACKEND-DISTRIBUTED-TP gates as the port's types, with the Python port's messages for the
// values it refuses (gates/rows/backend_distributed_tp/build.py: ParallelDims(**dims); subjects.py).
#pragma once

#include <string>

#include "driver/operation.h"
#include "vllm/distributed/parallel_layout.h"

namespace gates::tp {

// ParallelDims(**dims), validated (a TypeError-like refusal for a bool, float or str size).
vllm::distributed::ParallelDims parse_dims(const Value& dims);
// A rank of `dims`' world (rank_group's check_rank).
int parse_rank(const vllm::distributed::ParallelDims& dims, const Value& rank);
// A group kind (rank_group's and group_ranks' _members).
vllm::distributed::GroupKind parse_kind(const Value& kind);

// An int >= 1 that fits an int32, else the Python port's TypeError/ValueError text naming `name` (TP-4.8).
int positive_int(const std::string& name, const Value& v);

// The member `name` of a map input, or `fallback` when absent (a keyword argument with a default).
const Value& member(const Value& input, const char* name);
Value member_or(const Value& input, const char* name, Value fallback);

Value int_rows(const std::vector<std::vector<int>>& rows);
Value int_list(const std::vector<int>& items);

}  // namespace gates::tp
