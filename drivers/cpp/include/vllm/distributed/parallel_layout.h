// Rank layout and process groups by stride arithmetic (BACKEND-DISTRIBUTED-TP, TP-1.1 to TP-1.9), and the
// thread-local current-TP accessors.
//
// Names follow the C++ port's include/vllm/distributed/parallel_layout.h (jefby/vllm.cpp: ParallelDims,
// RankGroup, ParallelAxis, AxisGroup, TpGroup, PpGroup, DpGroup, AllTpGroups, SetCurrentTensorParallel,
// CurrentTensorParallel, CurrentTpRank, CurrentTpWorldSize); behaviour follows the Python port
// impl/distributed/parallel_layout.py, which mirrors initialize_model_parallel in upstream
// vllm/distributed/parallel_state.py: ranks are laid out as arange(world).reshape(external_dp, dp, pp, pcp, tp),
// TP innermost, and each group kind is read off vLLM's transposes and reshapes.
#pragma once

#include <array>
#include <string>
#include <vector>

namespace vllm {
class TensorParallel;  // include/vllm/distributed/tensor_parallel.h
}

namespace vllm::distributed {

// Parallel sizes of one world (vLLM ParallelConfig's degrees). The world is external_dp*dp*pp*pcp*tp ranks;
// dcp (decode context parallel) groups ranks of each (pcp, tp) block, PCP first, and adds no ranks (TP-1.2).
struct ParallelDims {
  int tp = 1;           // tensor-parallel (innermost reshape axis)
  int pcp = 1;          // prefill context parallel
  int pp = 1;           // pipeline-parallel
  int dp = 1;           // data-parallel
  int external_dp = 1;  // external data-parallel (outermost)
  int dcp = 1;          // decode context parallel: divides tp when pcp == 1, else one of 1, pcp, tp*pcp

  int world_size() const { return external_dp * dp * pp * pcp * tp; }

  // Throws std::invalid_argument naming the field: every size >= 1, the dcp size rule of vLLM's ParallelConfig
  // (vllm/config/parallel.py), a world that fits an int.
  void Validate() const;
};

// The field names of ParallelDims in the order Validate checks them.
constexpr std::array<const char*, 6> kParallelDimsFields = {"tp", "pcp", "pp", "dp", "external_dp", "dcp"};

// Throws std::invalid_argument "ParallelDims.<name> must be an int >= 1, got <value>" when value < 1.
void CheckParallelDim(const char* name, long long value);

// A rank's index along each axis of the layout: rank = (((external_dp*DP + dp)*PP + pp)*PCP + pcp)*TP + tp.
struct RankCoords {
  int external_dp = 0;
  int dp = 0;
  int pp = 0;
  int pcp = 0;
  int tp = 0;
};

// Throws std::invalid_argument "rank=R is outside the world of W ranks; accepted range [0, W-1]".
int CheckRank(const ParallelDims& dims, long long rank);
RankCoords RankCoordsOf(const ParallelDims& dims, int rank);

// Group members start + b*block_stride + j*step for b < blocks, j < block_len, in that order: every group kind has
// this shape (the Python port's StridedRanks). step is 1 except for a DCP group over a whole (pcp, tp) block: tp
// blocks 1 apart, each of pcp ranks tp apart (vLLM's "DCP spans PCP first, then TP").
struct StridedRanks {
  int start = 0;
  int blocks = 1;
  int block_stride = 1;
  int block_len = 1;
  int step = 1;

  int size() const { return blocks * block_len; }
  int operator[](int index) const { return start + (index / block_len) * block_stride + (index % block_len) * step; }
  std::vector<int> ToVector() const;
};

// A rank's membership in one group: the global ranks of the group in group order, and the rank's position there.
struct RankGroup {
  std::vector<int> ranks;
  int local_rank = 0;

  int size() const { return static_cast<int>(ranks.size()); }
  int world_size() const { return size(); }
};

// Group kinds, in the order every rank creates them (TP-1.4).
enum class GroupKind { kTp, kDcp, kPcp, kPp, kDp, kEp };
constexpr std::array<GroupKind, 6> kGroupKinds = {GroupKind::kTp, GroupKind::kDcp, GroupKind::kPcp,
                                                  GroupKind::kPp, GroupKind::kDp, GroupKind::kEp};
const char* GroupKindName(GroupKind kind);
// "tp", "dcp", ...; throws std::invalid_argument "kind='xp' is not a group kind; accepted: tp, dcp, pcp, pp, dp, ep".
GroupKind ParseGroupKind(const std::string& name);
// ", "-joined kind names, for messages.
std::string GroupKindNames();

// (blocks, block_stride, block_len, step) of a `kind` group (TP-1.4 to TP-1.7).
StridedRanks KindShape(const ParallelDims& dims, GroupKind kind);

// The `kind` group holding `rank`, from the rank's strides alone, never the table (TP-1.8; Python rank_group).
RankGroup KindGroup(const ParallelDims& dims, int rank, GroupKind kind);
StridedRanks KindGroupRanks(const ParallelDims& dims, int rank, GroupKind kind, int* local_rank);

// Every `kind` group of the world, in vLLM's group order and member order (TP-1.4 to TP-1.7; Python group_ranks).
std::vector<std::vector<int>> GroupRanks(const ParallelDims& dims, GroupKind kind);

// ── The C++ port's axis helpers ────────────────────────────────────────────────────────────────────────────
// The axes of the reshape(external_dp, dp, pp, pcp, tp) layout, outer to inner.
enum class ParallelAxis { kExternalDp, kDp, kPp, kPcp, kTp };

// The group along `axis` holding `global_rank`: the ranks sharing every other axis index.
RankGroup AxisGroup(const ParallelDims& dims, int global_rank, ParallelAxis axis);
inline RankGroup TpGroup(const ParallelDims& dims, int global_rank) { return KindGroup(dims, global_rank, GroupKind::kTp); }
inline RankGroup PpGroup(const ParallelDims& dims, int global_rank) { return KindGroup(dims, global_rank, GroupKind::kPp); }
inline RankGroup DpGroup(const ParallelDims& dims, int global_rank) { return KindGroup(dims, global_rank, GroupKind::kDp); }
// Every TP group: all_ranks.view(-1, tp).
inline std::vector<std::vector<int>> AllTpGroups(const ParallelDims& dims) { return GroupRanks(dims, GroupKind::kTp); }

// ── Thread-local current TP handle (one thread per rank; vLLM's process-global get_tp_group()) ─────────────
// Makes `tp` this thread's current handle (nullptr clears it) and returns the previous one.
const TensorParallel* SetCurrentTensorParallel(const TensorParallel* tp);
// This thread's current handle; nullptr until the thread sets one (other threads' handles are not seen).
const TensorParallel* CurrentTensorParallel();
int CurrentTpRank();       // 0 when no handle is set
int CurrentTpWorldSize();  // 1 when no handle is set

}  // namespace vllm::distributed
