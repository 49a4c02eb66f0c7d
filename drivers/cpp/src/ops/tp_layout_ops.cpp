// Operations of the BACKEND-DISTRIBUTED-TP layout gates (gate.yaml: group-table, rank-group-every-rank,
// parallel-dims-validation, gloo-collectives), answering what the Python bindings return:
//   group-ranks      {dims, kind} -> group_ranks(ParallelDims(**dims), kind)                 (build.py)
//   rank-groups      {dims, kind} -> [[members, local_rank] for every rank]                  (subjects.py)
//   layout-query     {dims, rank, kind} -> {world_size, ranks, local_rank}                   (subjects.py)
//   parallel-dims-accepts {dims} -> true, or ParallelDims' refusal                          (subjects.py)
//   rank-group-lookups {dims, rank, kind} -> the group's members read as a sequence: items at -n..n-1, [::-1],
//                    [1::2], and membership and index of every rank of the world       (rank_group_lookups.py)
//   predict-gloo-observations {layouts: [dims...]} -> per layout, per rank,
//                    {kind: [members, local_rank, sum(members)]} for every kind               (subjects_gloo.py)
#include <algorithm>
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

Value rank_group_lookups(const Value& input) {
  const vd::ParallelDims dims = gates::tp::parse_dims(gates::tp::member(input, "dims"));
  const int rank = gates::tp::parse_rank(dims, gates::tp::member(input, "rank"));
  const vd::RankGroup group = vd::KindGroup(dims, rank, gates::tp::parse_kind(gates::tp::member(input, "kind")));
  const std::vector<int>& members = group.ranks;
  const int size = group.size();
  std::vector<int> at, reversed(members.rbegin(), members.rend()), odd;
  for (int i = -size; i < size; ++i) at.push_back(members[(i + size) % size]);
  for (int i = 1; i < size; i += 2) odd.push_back(members[i]);
  Value contains = Value::array(), position = Value::array();
  for (int r = 0; r < dims.world_size(); ++r) {
    const auto found = std::find(members.begin(), members.end(), r);
    contains.push_back(found != members.end());
    position.push_back(found == members.end() ? Value() : Value(static_cast<int>(found - members.begin())));
  }
  Value out = Value::object();
  out["members"] = gates::tp::int_list(members);
  out["equals_members"] = true;  // the group is its member list
  out["length"] = size;
  out["at"] = gates::tp::int_list(at);
  out["refuses_past_ends"] = true;  // the member list has no index past its ends
  out["reversed"] = gates::tp::int_list(reversed);
  out["odd"] = gates::tp::int_list(odd);
  out["contains"] = std::move(contains);
  out["position"] = std::move(position);
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
GATES_OPERATION("rank-group-lookups", rank_group_lookups);
GATES_OPERATION("predict-gloo-observations", predict_gloo_observations);
