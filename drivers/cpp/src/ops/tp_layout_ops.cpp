// Operations of the BACKEND-DISTRIBUTED-TP layout gates (gate.yaml: group-table, rank-group-every-rank,
// parallel-dims-validation, gloo-collectives), answering what the Python bindings return:
//   group-ranks      {dims, kind} -> group_ranks(ParallelDims(**dims), kind)                 (build.py)
//   rank-groups      {dims, kind} -> [[members, local_rank] for every rank]                  (subjects.py)
//   layout-query     {dims, rank, kind} -> {world_size, ranks, local_rank}                   (subjects.py)
//   parallel-dims-accepts {dims} -> true, or ParallelDims' refusal                          (subjects.py)
//   predict-gloo-observations {layouts: [dims...]} -> per layout, per rank,
//                    {kind: [members, local_rank, sum(members)]} for every kind               (subjects_gloo.py)
#include <string>

#include "driver/operation.h"
#include "ops/tp_input.h"
#include "vllm/distributed/parallel_layout.h"

namespace {

namespace vd = vllm::distributed;
using gates::Value;

Value group_ranks(const Value& input) {
  const vd::ParallelDims dims = gates::tp::parse_dims(gates::tp::member(input, "dims"));
  return gates::tp::int_rows(vd::GroupRanks(dims, gates::tp::parse_kind(gates::tp::member(input, "kind"))));
}

Value rank_groups(const Value& input) {
  const vd::ParallelDims dims = gates::tp::parse_dims(gates::tp::member(input, "dims"));
  const vd::GroupKind kind = gates::tp::parse_kind(gates::tp::member(input, "kind"));
  Value out = Value::array();
  for (int rank = 0; rank < dims.world_size(); ++rank) {
    vd::RankGroup group = vd::KindGroup(dims, rank, kind);
    out.push_back(Value::array({gates::tp::int_list(group.ranks), group.local_rank}));
  }
  return out;
}

Value layout_query(const Value& input) {
  const vd::ParallelDims dims = gates::tp::parse_dims(gates::tp::member(input, "dims"));
  const int rank = gates::tp::parse_rank(dims, gates::tp::member(input, "rank"));
  const vd::RankGroup group = vd::KindGroup(dims, rank, gates::tp::parse_kind(gates::tp::member(input, "kind")));
  Value out = Value::object();
  out["world_size"] = dims.world_size();
  out["ranks"] = gates::tp::int_list(group.ranks);
  out["local_rank"] = group.local_rank;
  return out;
}

Value parallel_dims_accepts(const Value& input) {
  gates::tp::parse_dims(gates::tp::member(input, "dims"));  // validates, throwing the refusal
  return true;
}

Value predict_gloo_observations(const Value& input) {
  const Value& layouts = gates::tp::member(input, "layouts");
  if (!layouts.is_array()) throw std::invalid_argument("layouts must be a list of ParallelDims mappings");
  std::vector<vd::ParallelDims> all;
  for (const auto& dims : layouts) all.push_back(gates::tp::parse_dims(dims));
  Value out = Value::array();
  for (const auto& dims : all) {
    Value per_rank = Value::array();
    for (int rank = 0; rank < dims.world_size(); ++rank) {
      Value seen = Value::object();
      for (vd::GroupKind kind : vd::kGroupKinds) {
        vd::RankGroup group = vd::KindGroup(dims, rank, kind);
        long long sum = 0;
        for (int member : group.ranks) sum += member;
        seen[vd::GroupKindName(kind)] = Value::array({gates::tp::int_list(group.ranks), group.local_rank, sum});
      }
      per_rank.push_back(std::move(seen));
    }
    out.push_back(std::move(per_rank));
  }
  return out;
}

}  // namespace

GATES_OPERATION("group-ranks", group_ranks);
GATES_OPERATION("rank-groups", rank_groups);
GATES_OPERATION("layout-query", layout_query);
GATES_OPERATION("parallel-dims-accepts", parallel_dims_accepts);
GATES_OPERATION("predict-gloo-observations", predict_gloo_observations);
