// The thread world of include/vllm/distributed/thread_world.h: an abortable rendezvous shared by the ranks, and a
// Communicator per rank whose collectives exchange tensor addresses through it.
#include "vllm/distributed/thread_world.h"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace vllm::distributed {
namespace {

// Thrown inside a rank that was released from a collective because another rank failed; never leaves the world.
struct WorldAborted {};

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// The state the ranks of one RunOnRankThreads call share: a barrier that an abort releases, the slots through which
// a collective's tensors are exchanged, and the first failure.
class Rendezvous {
 public:
  explicit Rendezvous(int tp) : tp_(tp), posted_(static_cast<std::size_t>(tp)), names_(static_cast<std::size_t>(tp)) {}

  // Every rank's tensor for the collective `name`, once all ranks posted theirs. The caller must call Done() after
  // reading them, so that no rank frees its tensor while another still reads it.
  std::vector<const HostTensor*> Exchange(int rank, const char* name, const HostTensor* tensor) {
    posted_[static_cast<std::size_t>(rank)] = tensor;
    names_[static_cast<std::size_t>(rank)] = name;
    Wait(rank, name);
    for (int r = 1; r < tp_; ++r)
      if (names_[static_cast<std::size_t>(r)] != names_[0])
        throw std::runtime_error(std::string("the ranks ran different collectives: rank 0 ") + names_[0] + ", rank " +
                                 std::to_string(r) + " " + names_[static_cast<std::size_t>(r)]);
    return posted_;
  }

  void Done(int rank, const char* name) { Wait(rank, name); }

  void Abort(int rank, const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    AbortLocked(rank, message);
  }

  // A rank's function returned: ranks waiting in a collective now wait for nothing, so the world fails.
  void Finished(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_rank_ < 0) finished_rank_ = rank;
    if (arrived_ > 0)
      AbortLocked(rank, "returned while " + std::to_string(arrived_) + " rank(s) waited in " + waiting_name_ +
                            " (the ranks ran different collectives)");
  }

  bool failed(int& rank, std::string& message) const {
    std::lock_guard<std::mutex> lock(mutex_);
    rank = failed_rank_;
    message = failure_;
    return aborted_;
  }

 private:
  void AbortLocked(int rank, const std::string& message) {
    if (!aborted_) {
      aborted_ = true;
      failed_rank_ = rank;
      failure_ = message;
    }
    released_.notify_all();
  }

  void Wait(int rank, const char* name) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) throw WorldAborted{};
    if (finished_rank_ >= 0) {
      AbortLocked(finished_rank_, "returned while rank " + std::to_string(rank) + " went on to " + name +
                                      " (the ranks ran different collectives)");
      throw WorldAborted{};
    }
    const long generation = generation_;
    if (++arrived_ == tp_) {
      arrived_ = 0;
      ++generation_;
      released_.notify_all();
      return;
    }
    waiting_name_ = name;
    released_.wait(lock, [&] { return generation != generation_ || aborted_; });
    if (generation == generation_) throw WorldAborted{};
  }

  const int tp_;
  std::vector<const HostTensor*> posted_;
  std::vector<const char*> names_;
  mutable std::mutex mutex_;
  std::condition_variable released_;
  int arrived_ = 0;
  long generation_ = 0;
  std::string waiting_name_;
  int finished_rank_ = -1;
  bool aborted_ = false;
  int failed_rank_ = -1;
  std::string failure_;
};

// A normalised dim of `tensor`, as TensorParallel has already range-checked it.
std::size_t Axis(const HostTensor& tensor, int dim) { return static_cast<std::size_t>(dim < 0 ? dim + tensor.dim() : dim); }

// The product of `shape`'s dims in [begin, end).
std::size_t Extent(const std::vector<std::int64_t>& shape, std::size_t begin, std::size_t end) {
  std::size_t n = 1;
  for (std::size_t i = begin; i < end; ++i) n *= static_cast<std::size_t>(shape[i]);
  return n;
}

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(Rendezvous& rendezvous, int rank, int tp) : rendezvous_(rendezvous), rank_(rank), tp_(tp) {}

  TensorPtr AllReduce(const TensorPtr& tensor) override {
    const auto all = Collect("all_reduce", *tensor);
    auto out = std::make_shared<HostTensor>(Sum(all));
    rendezvous_.Done(rank_, "all_reduce");
    return out;
  }

  TensorPtr AllGather(const TensorPtr& tensor, int dim) override {
    const auto all = Collect("all_gather", *tensor);
    const std::size_t axis = Axis(*tensor, dim);
    auto out = std::make_shared<HostTensor>();
    out->shape = tensor->shape;
    out->shape[axis] *= tp_;
    const std::size_t outer = Extent(tensor->shape, 0, axis);
    const std::size_t chunk = Extent(tensor->shape, axis, tensor->shape.size());
    out->data.reserve(outer * chunk * static_cast<std::size_t>(tp_));
    for (std::size_t o = 0; o < outer; ++o)
      for (const HostTensor* part : all)
        out->data.insert(out->data.end(), part->data.begin() + static_cast<std::ptrdiff_t>(o * chunk),
                         part->data.begin() + static_cast<std::ptrdiff_t>((o + 1) * chunk));
    rendezvous_.Done(rank_, "all_gather");
    return out;
  }

  TensorPtr ReduceScatter(const TensorPtr& tensor, int dim) override {
    const std::size_t axis = Axis(*tensor, dim);
    if (tensor->shape[axis] % tp_ != 0)
      throw std::invalid_argument("reduce_scatter: dim " + std::to_string(dim) + " of a tensor of shape " +
                                  ShapeText(tensor->shape) + " is not divisible by tp=" + std::to_string(tp_));
    const auto all = Collect("reduce_scatter", *tensor);
    const HostTensor sum = Sum(all);
    rendezvous_.Done(rank_, "reduce_scatter");
    auto out = std::make_shared<HostTensor>();
    out->shape = sum.shape;
    out->shape[axis] /= tp_;
    const std::size_t outer = Extent(sum.shape, 0, axis);
    const std::size_t whole = Extent(sum.shape, axis, sum.shape.size());
    const std::size_t piece = whole / static_cast<std::size_t>(tp_);
    for (std::size_t o = 0; o < outer; ++o) {
      const auto begin = sum.data.begin() + static_cast<std::ptrdiff_t>(o * whole + static_cast<std::size_t>(rank_) * piece);
      out->data.insert(out->data.end(), begin, begin + static_cast<std::ptrdiff_t>(piece));
    }
    return out;
  }

  TensorPtr Broadcast(const TensorPtr& tensor, int src) override {
    const auto all = Collect("broadcast", *tensor);
    auto out = std::make_shared<HostTensor>(*all[static_cast<std::size_t>(src)]);
    rendezvous_.Done(rank_, "broadcast");
    return out;
  }

 private:
  // Every rank's tensor; each must have this rank's shape (the same check on every rank, so all throw alike).
  std::vector<const HostTensor*> Collect(const char* name, const HostTensor& tensor) {
    auto all = rendezvous_.Exchange(rank_, name, &tensor);
    for (int r = 0; r < tp_; ++r)
      if (all[static_cast<std::size_t>(r)]->shape != all[0]->shape)
        throw std::runtime_error(std::string(name) + ": rank " + std::to_string(r) + "'s tensor of shape " +
                                 ShapeText(all[static_cast<std::size_t>(r)]->shape) + " differs from rank 0's " +
                                 ShapeText(all[0]->shape));
    return all;
  }

  // The element-wise sum in rank order, so every rank computes the same bits.
  static HostTensor Sum(const std::vector<const HostTensor*>& all) {
    HostTensor sum = *all[0];
    for (std::size_t r = 1; r < all.size(); ++r)
      for (std::size_t i = 0; i < sum.data.size(); ++i) sum.data[i] += all[r]->data[i];
    return sum;
  }

  Rendezvous& rendezvous_;
  const int rank_;
  const int tp_;
};

void RunRank(Rendezvous& rendezvous, int rank, int tp, const std::function<void(const TensorParallel&)>& fn) {
  try {
    ThreadCommunicator communicator(rendezvous, rank, tp);
    RankGroup group;
    for (int r = 0; r < tp; ++r) group.ranks.push_back(r);
    group.local_rank = rank;
    const TensorParallel handle(group, &communicator);
    const ScopedTensorParallel current(&handle);
    fn(handle);
    rendezvous.Finished(rank);
  } catch (const WorldAborted&) {
    // released by another rank's failure, which the world reports
  } catch (const std::exception& e) {
    rendezvous.Abort(rank, e.what());
  } catch (...) {
    rendezvous.Abort(rank, "threw something that is not a std::exception");
  }
}

}  // namespace

void RunOnRankThreads(int tp, const std::function<void(const TensorParallel&)>& fn) {
  if (tp < 1) throw std::invalid_argument("a thread world needs tp >= 1 ranks, got tp=" + std::to_string(tp));
  Rendezvous rendezvous(tp);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(tp));
  for (int rank = 0; rank < tp; ++rank) {
    try {
      threads.emplace_back(RunRank, std::ref(rendezvous), rank, tp, std::cref(fn));
    } catch (const std::system_error& e) {
      rendezvous.Abort(rank, std::string("its thread could not start: ") + e.what());
      break;
    }
  }
  for (auto& thread : threads) thread.join();
  int rank = -1;
  std::string message;
  if (rendezvous.failed(rank, message))
    throw RankFailed(rank, "rank " + std::to_string(rank) + " of tp=" + std::to_string(tp) + " failed: " + message);
}

}  // namespace vllm::distributed
