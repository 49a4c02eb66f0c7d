// Operations tp-handle-scenario (current-tp-handle gate) and tp-collective-call (collectives-forwarded, at the end).
// tp-handle-scenario: {scenario, tp = 1, rank = 0} runs a named scenario
// on a fresh thread and reports what it saw, as gates/rows/backend_distributed_tp/scenarios.py does with the
// Python port's handle API. "Seen" is [a handle is set, CurrentTpRank(), CurrentTpWorldSize()].
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "driver/operation.h"
#include "driver/pyrepr.h"
#include "ops/tp_input.h"
#include "vllm/distributed/loaded_model.h"
#include "vllm/distributed/parallel_layout.h"
#include "vllm/distributed/tensor_parallel.h"

namespace {

namespace vd = vllm::distributed;
using gates::Value;

// TensorParallel(rank_group(ParallelDims(tp=tp), rank, "tp")), the inputs checked as the Python port checks them.
std::unique_ptr<vllm::TensorParallel> make_handle(const Value& tp, const Value& rank) {
  const vd::ParallelDims dims = gates::tp::parse_dims(Value::object({{"tp", tp}}));
  const int r = gates::tp::parse_rank(dims, rank);
  return std::make_unique<vllm::TensorParallel>(vd::KindGroup(dims, r, vd::GroupKind::kTp));
}

Value seen() { return Value::array({vd::CurrentTensorParallel() != nullptr, vd::CurrentTpRank(), vd::CurrentTpWorldSize()}); }

// Runs `body` on a new thread (a rank thread); its exception is rethrown here.
Value on_thread(const std::function<Value()>& body) {
  Value result;
  std::exception_ptr error;
  std::thread thread([&] {
    try {
      result = body();
    } catch (...) {
      error = std::current_exception();
    }
  });
  thread.join();
  if (error) std::rethrow_exception(error);
  return result;
}

// A reusable barrier for `count` threads (C++17 has no std::barrier).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation != generation_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_;
  int arrived_ = 0;
  long generation_ = 0;
};

struct Args {
  Value tp;
  Value rank;
};

Value unset(const Args&) { return seen(); }

Value singleton(const Args&) {
  auto handle = make_handle(1, 0);
  auto x = std::make_shared<vllm::HostTensor>();
  x->shape = {2, 3};
  x->data = {0, 1, 2, 3, 4, 5};
  Value same = Value::object();
  same["all_reduce"] = handle->AllReduce(x) == x;
  same["all_gather"] = handle->AllGather(x, 0) == x;
  same["reduce_scatter"] = handle->ReduceScatter(x, -1) == x;
  same["broadcast"] = handle->Broadcast(x, 0) == x;
  Value current;
  {
    vd::ScopedTensorParallel scope(handle.get());
    current = seen();
  }
  Value out = Value::object();
  out["rank"] = handle->rank();
  out["world_size"] = handle->world_size();
  out["returns_input"] = same;
  out["current"] = current;
  return out;
}

Value sibling_thread(const Args& a) {
  auto handle = make_handle(a.tp, a.rank);
  vd::ScopedTensorParallel own_scope(handle.get());  // the scenario thread starts with none: clears on the way out
  Value sibling = on_thread(seen);
  Value out = Value::object();
  out["own"] = seen();
  out["sibling"] = sibling;
  return out;
}

Value rank_threads(const Args& a) {
  const vd::ParallelDims dims = gates::tp::parse_dims(Value::object({{"tp", a.tp}}));
  const int tp = dims.tp;
  Barrier barrier(tp);
  std::vector<Value> observed(static_cast<std::size_t>(tp));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(tp));
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<vllm::TensorParallel> handle;
      try {
        handle = make_handle(tp, r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
      vd::SetCurrentTensorParallel(handle.get());
      barrier.wait();  // every rank's handle is set before any is read
      observed[r] = seen();
      barrier.wait();
      vd::SetCurrentTensorParallel(nullptr);
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
  Value out = Value::array();
  for (auto& v : observed) out.push_back(std::move(v));
  return out;
}

struct LookupError : std::exception {
  const char* what() const noexcept override { return "raised inside the scope"; }
};

Value scope_restores(const Args& a) {
  const vd::ParallelDims dims = gates::tp::parse_dims(Value::object({{"tp", a.tp}}));
  auto outer = make_handle(a.tp, a.rank);
  auto inner = make_handle(a.tp, (gates::tp::parse_rank(dims, a.rank) + 1) % dims.tp);
  vd::ScopedTensorParallel outer_scope(outer.get());
  Value out = Value::object();
  {
    vd::ScopedTensorParallel scope(inner.get());
    out["inside"] = seen();
  }
  out["after"] = seen();
  try {
    vd::ScopedTensorParallel scope(inner.get());
    throw LookupError();
  } catch (const LookupError&) {
  }
  out["after_raise"] = seen();
  {
    vd::ScopedTensorParallel scope(nullptr);
    out["cleared"] = seen();
  }
  out["restored"] = seen();
  return out;
}

Value loaded_model(const Args& a) {
  auto handle = make_handle(a.tp, a.rank);
  const vllm::LoadedModel plain;
  const vllm::LoadedModel sharded(handle.get());
  Value active;
  {
    auto scope = sharded.Activate();
    active = seen();
  }
  Value out = Value::object();
  out["default_handle_set"] = plain.tensor_parallel() != nullptr;
  out["default"] = Value::array({plain.tp_rank(), plain.tp_world_size()});
  out["sharded"] = Value::array({sharded.tp_rank(), sharded.tp_world_size()});
  out["active"] = active;
  out["after"] = seen();
  return out;
}

Value no_communicator(const Args& a) {
  auto handle = make_handle(a.tp, a.rank);
  auto ones = std::make_shared<vllm::HostTensor>();
  ones->shape = {2};
  ones->data = {1, 1};
  try {
    handle->AllReduce(ones);
  } catch (const gates::Raised&) {
    throw;
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw gates::Raised("runtime-error", e.what());
  }
  // A one-rank group hands the tensor back, which is not plain data (the Python port's reply is not-plain too).
  throw std::runtime_error("result is not plain data: a tensor at result");
}

const std::map<std::string, Value (*)(const Args&)>& scenarios() {
  static const std::map<std::string, Value (*)(const Args&)> table = {
      {"loaded-model", loaded_model},   {"no-communicator", no_communicator}, {"rank-threads", rank_threads},
      {"scope-restores", scope_restores}, {"sibling-thread", sibling_thread}, {"singleton", singleton},
      {"unset", unset}};
  return table;
}

Value handle_scenario(const Value& input) {
  const Value& name = gates::tp::member(input, "scenario");
  auto it = name.is_string() ? scenarios().find(name.get<std::string>()) : scenarios().end();
  if (it == scenarios().end()) {
    std::string known;
    for (const auto& entry : scenarios()) known += (known.empty() ? "" : ", ") + gates::py_str_repr(entry.first);
    throw std::invalid_argument("unknown scenario " + gates::py_repr(name) + "; known: [" + known + "]");
  }
  const Args args{gates::tp::member_or(input, "tp", 1), gates::tp::member_or(input, "rank", 0)};
  // A fresh thread, so that no handle of the caller's thread leaks in.
  return on_thread([&] { return it->second(args); });
}

// tp-collective-call {tp, rank = 0, collective, shape, arg?}: one collective of the handle, its communicator a
// recorder (gates/rows/backend_distributed_tp/tp_collective_call.py): what was handed on, and what came back.
class Recorder : public vllm::Communicator {
 public:
  struct Call {
    std::string collective;
    vllm::TensorPtr tensor;
    std::vector<int> args;
  };
  std::vector<Call> calls;
  vllm::TensorPtr answer = std::make_shared<vllm::HostTensor>(vllm::HostTensor{{1}, {-1.0f}});

  vllm::TensorPtr AllReduce(const vllm::TensorPtr& t) override { return record("all_reduce", t, {}); }
  vllm::TensorPtr AllGather(const vllm::TensorPtr& t, int dim) override { return record("all_gather", t, {dim}); }
  vllm::TensorPtr ReduceScatter(const vllm::TensorPtr& t, int dim) override { return record("reduce_scatter", t, {dim}); }
  vllm::TensorPtr Broadcast(const vllm::TensorPtr& t, int src) override { return record("broadcast", t, {src}); }

 private:
  vllm::TensorPtr record(const char* name, const vllm::TensorPtr& t, std::vector<int> args) {
    calls.push_back({name, t, std::move(args)});
    return answer;
  }
};

Value collective_call(const Value& input) {
  const vd::ParallelDims dims = gates::tp::parse_dims(Value::object({{"tp", gates::tp::member(input, "tp")}}));
  const int rank = gates::tp::parse_rank(dims, gates::tp::member_or(input, "rank", 0));
  const Value& collective = gates::tp::member(input, "collective");
  const std::string name = collective.is_string() ? collective.get<std::string>() : "";
  if (name != "all_reduce" && name != "all_gather" && name != "reduce_scatter" && name != "broadcast")
    throw std::invalid_argument("collective=" + gates::py_repr(collective) +
                                " is not a collective; accepted: all_reduce, all_gather, reduce_scatter, broadcast");
  const Value& shape = gates::tp::member(input, "shape");
  vllm::TensorPtr tensor;  // null shape: no tensor
  if (!shape.is_null()) {
    tensor = std::make_shared<vllm::HostTensor>();
    std::int64_t count = 1;
    for (const auto& extent : shape) {
      tensor->shape.push_back(extent.get<std::int64_t>());
      count *= tensor->shape.back();
    }
    tensor->data.assign(static_cast<std::size_t>(count), 0.0f);
  }
  const Value arg = gates::tp::member_or(input, "arg", Value());
  Recorder recorder;
  const vllm::TensorParallel handle(vd::KindGroup(dims, rank, vd::GroupKind::kTp), &recorder);
  vllm::TensorPtr result;
  if (name == "all_reduce") result = handle.AllReduce(tensor);
  if (name == "all_gather") result = arg.is_null() ? handle.AllGather(tensor) : handle.AllGather(tensor, arg.get<int>());
  if (name == "reduce_scatter")
    result = arg.is_null() ? handle.ReduceScatter(tensor) : handle.ReduceScatter(tensor, arg.get<int>());
  if (name == "broadcast") result = arg.is_null() ? handle.Broadcast(tensor) : handle.Broadcast(tensor, arg.get<int>());
  if (recorder.calls.size() > 1)
    throw std::runtime_error("the communicator was called " + std::to_string(recorder.calls.size()) + " times");
  Value out = Value::object();
  out["forwarded"] = Value();
  if (!recorder.calls.empty()) {
    const Recorder::Call& call = recorder.calls.front();
    Value args = Value::array();
    for (int a : call.args) args.push_back(a);
    out["forwarded"] = Value::object({{"collective", call.collective}, {"args", args},
                                      {"tensor", call.tensor == tensor ? "input" : "other"}});
  }
  out["returned"] = result == tensor ? "input" : result == recorder.answer ? "communicator" : "other";
  return out;
}

}  // namespace

GATES_OPERATION("tp-handle-scenario", handle_scenario);
GATES_OPERATION("tp-collective-call", collective_call);
