// What a rank loads of a layer; see include/vllm/model_executor/layers/sharded_weight.h.
#include "vllm/model_executor/layers/sharded_weight.h"

#include <stdexcept>
#include <string>

namespace vllm::model_executor {
namespace {

namespace vd = vllm::distributed;

std::string SpanText(const vd::Span& span) { return "[" + std::to_string(span.begin) + ", " + std::to_string(span.end) + ")"; }

// The source tensor `name` of `what`, whose dim `dim` holds `span` (and dim 1 `cols` for a weight).
const HostTensor& SourceOf(const ShardSources& sources, const std::string& what, const std::string& name, std::size_t dims,
                           const vd::Span& rows, const vd::Span* cols) {
  const auto found = sources.find(name);
  if (found == sources.end() || found->second == nullptr)
    throw std::logic_error(what + ": no source tensor '" + name + "' to load");
  const HostTensor& tensor = *found->second;
  const bool fits = tensor.shape.size() == dims && rows.begin >= 0 && rows.begin <= rows.end && rows.end <= tensor.shape[0] &&
                    (cols == nullptr || (cols->begin >= 0 && cols->begin <= cols->end && cols->end <= tensor.shape[1]));
  if (!fits)
    throw std::logic_error(what + ": rows " + SpanText(rows) + (cols ? " and columns " + SpanText(*cols) : std::string()) +
                           " do not lie inside source '" + name + "'");
  return tensor;
}

}  // namespace

LoadedWeight LoadWeight(const vd::WeightShard& shard, const ShardSources& sources) {
  LoadedWeight loaded{shard, {}};
  HostTensor& out = loaded.tensor;
  out.shape = {shard.out, shard.in};
  out.data.reserve(static_cast<std::size_t>(shard.out) * static_cast<std::size_t>(shard.in));
  for (const vd::WeightPart& part : shard.parts) {
    const HostTensor& source = SourceOf(sources, "LoadWeight " + shard.name, part.source, 2, part.rows, &part.cols);
    if (part.cols.end - part.cols.begin != shard.in)
      throw std::logic_error("LoadWeight " + shard.name + ": part " + part.source + " has " +
                             std::to_string(part.cols.end - part.cols.begin) + " columns, the shard " + std::to_string(shard.in));
    const std::size_t width = static_cast<std::size_t>(source.shape[1]);
    for (int row = part.rows.begin; row < part.rows.end; ++row) {
      const auto begin = source.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(row) * width);
      out.data.insert(out.data.end(), begin + part.cols.begin, begin + part.cols.end);
    }
  }
  out.data.resize(out.data.size() + static_cast<std::size_t>(shard.padding_rows) * static_cast<std::size_t>(shard.in), 0.0f);
  if (out.data.size() != static_cast<std::size_t>(shard.out) * static_cast<std::size_t>(shard.in))
    throw std::logic_error("LoadWeight " + shard.name + ": its parts and padding rows do not make " + std::to_string(shard.out) +
                           " rows");
  return loaded;
}

std::optional<LoadedBias> LoadBias(std::vector<vd::BiasPart> parts, const ShardSources& sources) {
  if (parts.empty()) return std::nullopt;
  LoadedBias loaded{std::move(parts), {}};
  for (const vd::BiasPart& part : loaded.parts) {
    const HostTensor& source = SourceOf(sources, "LoadBias", part.source, 1, part.rows, nullptr);
    loaded.tensor.data.insert(loaded.tensor.data.end(), source.data.begin() + part.rows.begin, source.data.begin() + part.rows.end);
  }
  loaded.tensor.shape = {static_cast<std::int64_t>(loaded.tensor.data.size())};
  return loaded;
}

void CheckLoadedFor(const TensorParallel& tp, int rank, int tp_size, const char* layer) {
  if (tp.rank() != rank || tp.tp_size() != tp_size)
    throw std::logic_error(std::string(layer) + " was loaded for rank " + std::to_string(rank) + " of tp=" +
                           std::to_string(tp_size) + ", run on rank " + std::to_string(tp.rank()) + " of tp=" +
                           std::to_string(tp.tp_size()));
}

}  // namespace vllm::model_executor
