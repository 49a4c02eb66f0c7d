// An operation for tests/drivers/test_cpp_thread_world.py only (no gate names it): the thread world of
// vllm/distributed/thread_world.h with a failure planted on demand.
//   tp-thread-world-probe {tp, fail_rank: int | null, return_rank: int | null, gather_dim: int}
// Every rank r all-reduces [r + 1, 10 (r + 1)], then all-gathers its [2, 1] tensor [[r], [r + 0.5]] along
// gather_dim, and answers [reduced, gathered] (flat float lists with the gathered shape). fail_rank throws before
// its all-reduce; return_rank returns before it (the others are left waiting in it).
#include <stdexcept>
#include <string>

#include "driver/operation.h"
#include "ops/tp_input.h"
#include "vllm/distributed/thread_world.h"

namespace {

using gates::Value;

int optional_rank(const Value& input, const char* name) {
  const Value rank = gates::tp::member_or(input, name, Value());
  return rank.is_null() ? -1 : rank.get<int>();
}

Value probe(const Value& input) {
  const int tp = gates::tp::member(input, "tp").get<int>();
  const int fail_rank = optional_rank(input, "fail_rank");
  const int return_rank = optional_rank(input, "return_rank");
  const int gather_dim = gates::tp::member_or(input, "gather_dim", -1).get<int>();
  const auto results = vllm::distributed::RunOnRanks<Value>(tp, [&](const vllm::TensorParallel& handle) -> Value {
    const int r = handle.rank();
    if (r == fail_rank) throw std::runtime_error("the probe's planted failure on rank " + std::to_string(r));
    if (r == return_rank) return Value();
    const float one = static_cast<float>(r + 1);
    const vllm::TensorPtr reduced = handle.AllReduce(std::make_shared<vllm::HostTensor>(vllm::HostTensor{{2}, {one, 10 * one}}));
    const vllm::TensorPtr gathered = handle.AllGather(
        std::make_shared<vllm::HostTensor>(vllm::HostTensor{{2, 1}, {static_cast<float>(r), r + 0.5f}}), gather_dim);
    return Value::array({reduced->data, Value::object({{"shape", gathered->shape}, {"data", gathered->data}})});
  });
  return Value(results);
}

}  // namespace

GATES_OPERATION("tp-thread-world-probe", probe);
