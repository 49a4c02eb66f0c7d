// Rank layout by stride arithmetic; see include/vllm/distributed/parallel_layout.h.
// Mirrors impl/distributed/parallel_layout.py (the Python port) and upstream initialize_model_parallel
// (vllm/distributed/parallel_state.py).
#include "vllm/distributed/parallel_layout.h"

#include <climits>
#include <stdexcept>
#include <string>

namespace vllm::distributed {

void CheckParallelDim(const char* name, long long value) {
  if (value < 1)
    throw std::invalid_argument(std::string("ParallelDims.") + name + " must be an int >= 1, got " + std::to_string(value));
}

void ParallelDims::Validate() const {
  const int values[] = {tp, pcp, pp, dp, external_dp, dcp};
  for (std::size_t i = 0; i < kParallelDimsFields.size(); ++i) CheckParallelDim(kParallelDimsFields[i], values[i]);
  if (pcp == 1) {  // DCP reuses the TP ranks when PCP is disabled (vllm/config/parallel.py)
    if (tp % dcp != 0) {
      std::string divisors;
      for (int d = 1; d <= tp; ++d)
        if (tp % d == 0) divisors += (divisors.empty() ? "" : ", ") + std::to_string(d);
      throw std::invalid_argument("ParallelDims.dcp: tp_size=" + std::to_string(tp) + " must be divisible by dcp_size=" +
                                  std::to_string(dcp) + "; accepted dcp for tp=" + std::to_string(tp) + ": [" + divisors +
                                  "]");
    }
  } else {  // with PCP, DCP is off, the PCP axis, or the whole TP x PCP block
    const long long full = static_cast<long long>(tp) * pcp;
    if (dcp != 1 && dcp != pcp && dcp != full) {
      std::string valid = "1";
      if (pcp != 1) valid += ", " + std::to_string(pcp);
      if (full != pcp) valid += ", " + std::to_string(full);
      throw std::invalid_argument(
          "ParallelDims.dcp: When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full TP x PCP "
          "axis. Got TP=" + std::to_string(tp) + ", PCP=" + std::to_string(pcp) + ", DCP=" + std::to_string(dcp) +
          "; valid DCP sizes are [" + valid + "].");
    }
  }
  long long world = 1;
  for (int size : {external_dp, dp, pp, pcp, tp}) {
    world *= size;
    if (world > INT_MAX)
      throw std::invalid_argument("ParallelDims: world_size = external_dp*dp*pp*pcp*tp is over " + std::to_string(INT_MAX) +
                                  " ranks, more than this port counts");
  }
}

int CheckRank(const ParallelDims& dims, long long rank) {
  const int world = dims.world_size();
  if (rank < 0 || rank >= world)
    throw std::invalid_argument("rank=" + std::to_string(rank) + " is outside the world of " + std::to_string(world) +
                                " ranks; accepted range [0, " + std::to_string(world - 1) + "]");
  return static_cast<int>(rank);
}

RankCoords RankCoordsOf(const ParallelDims& dims, int rank) {
  int rest = CheckRank(dims, rank);
  RankCoords c;
  c.tp = rest % dims.tp;
  rest /= dims.tp;
  c.pcp = rest % dims.pcp;
  rest /= dims.pcp;
  c.pp = rest % dims.pp;
  rest /= dims.pp;
  c.dp = rest % dims.dp;
  c.external_dp = rest / dims.dp;
  return c;
}

std::vector<int> StridedRanks::ToVector() const {
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(size()));
  for (int b = 0; b < blocks; ++b)
    for (int j = 0; j < block_len; ++j) out.push_back(start + b * block_stride + j * step);
  return out;
}

const char* GroupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp: return "tp";
    case GroupKind::kDcp: return "dcp";
    case GroupKind::kPcp: return "pcp";
    case GroupKind::kPp: return "pp";
    case GroupKind::kDp: return "dp";
    case GroupKind::kEp: return "ep";
  }
  return "?";
}

std::string GroupKindNames() {
  std::string names;
  for (GroupKind kind : kGroupKinds) names += (names.empty() ? "" : ", ") + std::string(GroupKindName(kind));
  return names;
}

GroupKind ParseGroupKind(const std::string& name) {
  for (GroupKind kind : kGroupKinds)
    if (name == GroupKindName(kind)) return kind;
  throw std::invalid_argument("kind='" + name + "' is not a group kind; accepted: " + GroupKindNames());
}

StridedRanks KindShape(const ParallelDims& d, GroupKind kind) {
  StridedRanks s;  // start stays 0: the shape of the group holding rank 0
  switch (kind) {
    case GroupKind::kTp:  // view(-1, tp): consecutive chunks
      s.blocks = 1, s.block_stride = d.tp, s.block_len = d.tp;
      break;
    case GroupKind::kDcp:  // transpose(-1, -2).reshape(-1, dcp) when dcp > 1: over the (pcp, tp) block, PCP first
      if (d.pcp == 1 || d.dcp == 1)  // consecutive chunks, inside a TP group because dcp divides tp
        s.blocks = 1, s.block_stride = d.dcp, s.block_len = d.dcp;
      else if (d.dcp == d.pcp)  // the PCP group: one rank per pcp index, tp apart
        s.blocks = d.pcp, s.block_stride = d.tp, s.block_len = 1;
      else  // dcp == tp*pcp: the whole block, tp index outer (1 apart), pcp index inner (tp apart)
        s.blocks = d.tp, s.block_stride = 1, s.block_len = d.pcp, s.step = d.tp;
      break;
    case GroupKind::kPcp:  // one rank per pcp index, tp apart
      s.blocks = d.pcp, s.block_stride = d.tp, s.block_len = 1;
      break;
    case GroupKind::kPp:  // one rank per stage, tp*pcp apart
      s.blocks = d.pp, s.block_stride = d.tp * d.pcp, s.block_len = 1;
      break;
    case GroupKind::kDp:  // one rank per dp index, tp*pcp*pp apart
      s.blocks = d.dp, s.block_stride = d.tp * d.pcp * d.pp, s.block_len = 1;
      break;
    case GroupKind::kEp:  // the whole (pcp, tp) block of every dp index, within one pipeline stage
      s.blocks = d.dp, s.block_stride = d.tp * d.pcp * d.pp, s.block_len = d.tp * d.pcp;
      break;
  }
  return s;
}

StridedRanks KindGroupRanks(const ParallelDims& dims, int rank, GroupKind kind, int* local_rank) {
  CheckRank(dims, rank);
  StridedRanks s = KindShape(dims, kind);
  const int block = (rank / s.block_stride) % s.blocks;
  const int offset = (rank / s.step) % s.block_len;
  s.start = rank - block * s.block_stride - offset * s.step;
  if (local_rank) *local_rank = block * s.block_len + offset;
  return s;
}

RankGroup KindGroup(const ParallelDims& dims, int rank, GroupKind kind) {
  RankGroup group;
  group.ranks = KindGroupRanks(dims, rank, kind, &group.local_rank).ToVector();
  return group;
}

namespace {

// ranks[start:stop:step] of [0, world), appended.
void AppendSlice(std::vector<int>& out, int start, int stop, int step) {
  for (int r = start; r < stop; r += step) out.push_back(r);
}

}  // namespace

std::vector<std::vector<int>> GroupRanks(const ParallelDims& dims, GroupKind kind) {
  // vLLM's transposes move the group's own axis innermost and put TP in its place, so the groups are enumerated
  // over the remaining axes in that order; each group is one strided slice of the ranks, except a DCP group over a
  // whole (pcp, tp) block (dcp == tp*pcp), which is its block's PCP runs in tp order.
  const StridedRanks shape = KindShape(dims, kind);
  const int stride = shape.block_stride, length = shape.block_len;
  const int tp = dims.tp, pcp = dims.pcp, pp = dims.pp, world = dims.world_size();
  const int pp_stride = tp * pcp, dp_stride = tp * pcp * pp, edp_stride = dp_stride * dims.dp;
  std::vector<std::vector<int>> groups;
  auto add = [&groups](int start, int stop, int step) {
    groups.emplace_back();
    AppendSlice(groups.back(), start, stop, step);
  };
  if (kind == GroupKind::kDcp && pcp > 1 && dims.dcp > 1) {  // transpose(-1, -2): over (edp, dp, pp), PCP first
    if (dims.dcp == pcp) return GroupRanks(dims, GroupKind::kPcp);  // the PCP table
    for (int b = 0; b < world; b += pp_stride) {  // dcp == tp*pcp: each (pcp, tp) block, its PCP runs in tp order
      groups.emplace_back();
      for (int t = 0; t < tp; ++t) AppendSlice(groups.back(), b + t, b + pp_stride, tp);
    }
    return groups;
  }
  switch (kind) {
    case GroupKind::kTp:
    case GroupKind::kDcp:  // consecutive chunks in rank order
      for (int s = 0; s < world; s += length) add(s, s + length, 1);
      break;
    case GroupKind::kPcp:  // transpose(3, 4): over (edp, dp, pp), then tp
      for (int b = 0; b < world; b += pp_stride)
        for (int t = 0; t < tp; ++t) add(b + t, b + pp_stride, stride);
      break;
    case GroupKind::kPp:  // transpose(2, 4): over (edp, dp), then tp, then pcp
      for (int b = 0; b < world; b += dp_stride)
        for (int t = 0; t < tp; ++t)
          for (int c = 0; c < pcp; ++c) add(b + t + c * tp, b + dp_stride, stride);
      break;
    case GroupKind::kDp:  // transpose(1, 4): over edp, then tp, pp, pcp
      for (int b = 0; b < world; b += edp_stride)
        for (int t = 0; t < tp; ++t)
          for (int p = 0; p < pp; ++p)
            for (int c = 0; c < pcp; ++c) add(b + t + p * pp_stride + c * tp, b + edp_stride, stride);
      break;
    case GroupKind::kEp:  // transpose(1, 2): over (edp, pp); members are the (pcp, tp) block of every dp index
      for (int b = 0; b < world; b += edp_stride)
        for (int p = 0; p < pp; ++p) {
          groups.emplace_back();
          for (int s = b + p * pp_stride; s < b + edp_stride; s += stride) AppendSlice(groups.back(), s, s + length, 1);
        }
      break;
  }
  return groups;
}

RankGroup AxisGroup(const ParallelDims& d, int global_rank, ParallelAxis axis) {
  CheckRank(d, global_rank);
  int size = 1, stride = 1;
  switch (axis) {
    case ParallelAxis::kTp: size = d.tp, stride = 1; break;
    case ParallelAxis::kPcp: size = d.pcp, stride = d.tp; break;
    case ParallelAxis::kPp: size = d.pp, stride = d.tp * d.pcp; break;
    case ParallelAxis::kDp: size = d.dp, stride = d.tp * d.pcp * d.pp; break;
    case ParallelAxis::kExternalDp: size = d.external_dp, stride = d.tp * d.pcp * d.pp * d.dp; break;
  }
  const int index = (global_rank / stride) % size;
  RankGroup group;
  for (int i = 0; i < size; ++i) group.ranks.push_back(global_rank - index * stride + i * stride);
  group.local_rank = index;
  return group;
}

}  // namespace vllm::distributed
