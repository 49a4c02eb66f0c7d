// The `$tensor` value on the wire (protocol version 2, wire-v2 "The $tensor value"): decoding a tag against the
// message's buffers with every check of the contract, and encoding a tensor of a result into a tag and a buffer.
#include <initializer_list>
#include <string>
#include <utility>

#include "driver/framing.h"
#include "driver/plain.h"
#include "driver/plain_internal.h"

namespace gates {
namespace {

std::string wire_text(const Value& v) {
  std::string text = is_big_int_raw(v) ? big_int_text(v) : v.dump(-1, ' ', false, Value::error_handler_t::replace);
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

// The shape of a tag: a list of at most 64 ints >= 0 (JSON integers, not bools or floats).
std::vector<std::int64_t> tag_shape(const Value& shape) {
  auto refuse = [&] {
    throw TagRefused("$tensor shape " + wire_text(shape) + " is not a list of at most " + std::to_string(kMaxTensorDims) +
                     " ints >= 0");
  };
  if (!shape.is_array() || shape.size() > kMaxTensorDims) refuse();
  std::vector<std::int64_t> dims;
  for (const auto& dim : shape) {
    if (dim.is_number_unsigned() && dim.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX)) {
      dims.push_back(static_cast<std::int64_t>(dim.get<std::uint64_t>()));
    } else if (dim.is_number_integer() && !dim.is_number_unsigned() && dim.get<std::int64_t>() >= 0) {
      dims.push_back(dim.get<std::int64_t>());
    } else {
      refuse();
    }
  }
  return dims;
}

DType tag_dtype(const Value& dtype) {
  if (!dtype.is_string()) throw TagRefused("$tensor dtype of " + found(dtype) + ", not a string");
  auto known = dtype_named(dtype.get<std::string>());
  if (!known) throw TagRefused("$tensor dtype " + quote(dtype.get<std::string>()) + " is not one of " + dtype_names());
  return *known;
}

// The byte size of that dtype and shape within `cap`.
std::uint64_t tag_nbytes(DType dtype, const Value& shape_json, const std::vector<std::int64_t>& shape, std::uint64_t cap) {
  auto nbytes = tensor_nbytes(dtype, shape);
  if (!nbytes) throw TagRefused("$tensor shape " + wire_text(shape_json) + " of " + dtype_name(dtype) + " overflows 64 bits of bytes");
  if (*nbytes > cap)
    throw TagRefused("$tensor shape " + wire_text(shape_json) + " of " + dtype_name(dtype) + " is " + std::to_string(*nbytes) +
                     " bytes, over the limit of " + std::to_string(cap) + " buffer bytes per message (max_buffer_bytes)");
  return *nbytes;
}

void check_bool_bytes(const Bytes& bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] > 1)
      throw TagRefused("bool $tensor element " + std::to_string(i) + " is the byte " + std::to_string(bytes[i]) + ", not 0 or 1");
}

// The members of a tag's body, exactly `names` in any order.
void check_tag_members(const Value& body, const char* tag_form, std::initializer_list<const char*> names) {
  bool ok = body.is_object() && body.size() == names.size();
  for (const char* name : names) ok = ok && body.contains(name);
  if (ok) return;
  std::string members;
  if (body.is_object())
    for (auto it = body.begin(); it != body.end(); ++it) members += (members.empty() ? "" : ", ") + quote(it.key()).substr(0, 40);
  throw TagRefused(std::string("$tensor of ") + (body.is_object() ? "an object with keys [" + members + "]" : found(body)) +
                   ", not " + tag_form);
}

}  // namespace

BufferPool::BufferPool(std::vector<Bytes>* buffers, std::uint64_t max_buffer_bytes)
    : buffers_(buffers), used_(buffers ? buffers->size() : 0, false), max_buffer_bytes_(max_buffer_bytes) {}

Bytes BufferPool::take(std::uint64_t index, std::uint64_t nbytes, const std::string& tensor) {
  if (count() == 0) throw TagRefused("$tensor names buffer " + std::to_string(index) + " but the message has no buffers");
  if (index >= count())
    throw TagRefused("$tensor names buffer " + std::to_string(index) + " of a message with " + std::to_string(count()) + " buffers");
  if (used_[index]) throw TagRefused("$tensor names buffer " + std::to_string(index) + ", which an earlier $tensor already uses");
  Bytes& bytes = (*buffers_)[index];
  if (bytes.size() != nbytes)
    throw TagRefused("$tensor of " + tensor + " is " + std::to_string(nbytes) + " bytes but buffer " + std::to_string(index) +
                     " has " + std::to_string(bytes.size()));
  used_[index] = true;
  return std::move(bytes);
}

long BufferPool::first_unused() const {
  for (std::size_t i = 0; i < used_.size(); ++i)
    if (!used_[i]) return static_cast<long>(i);
  return -1;
}

Value decode_tensor(const Value& body, BufferPool& pool) {
  check_tag_members(body, "{\"dtype\": D, \"shape\": [...], \"buffer\": i}", {"dtype", "shape", "buffer"});
  DType dtype = tag_dtype(body["dtype"]);
  std::vector<std::int64_t> shape = tag_shape(body["shape"]);
  std::uint64_t nbytes = tag_nbytes(dtype, body["shape"], shape, pool.max_buffer_bytes());
  const Value& index = body["buffer"];
  if (!index.is_number_integer() || (!index.is_number_unsigned() && index.get<std::int64_t>() < 0))
    throw TagRefused("$tensor buffer " + wire_text(index) + " is not an int >= 0");
  Bytes bytes = pool.take(index.get<std::uint64_t>(), nbytes, std::string(dtype_name(dtype)) + " " + shape_text(shape));
  if (dtype == DType::Bool) check_bool_bytes(bytes);
  return tensor_value(Tensor(dtype, std::move(shape), std::move(bytes)));
}

void encode_tensor(const Value& body, std::string& out, BufferSink& sink) {
  if (sink.buffers == nullptr) throw TagRefused("a tensor, which the --lines mode cannot carry (it has no buffers)");
  check_tag_members(body, "a tensor (dtype, shape and the bytes as tensor_value() makes them)", {"dtype", "shape", "data"});
  DType dtype = tag_dtype(body["dtype"]);
  std::vector<std::int64_t> shape = tag_shape(body["shape"]);
  std::uint64_t nbytes = tag_nbytes(dtype, body["shape"], shape, sink.max_buffer_bytes);
  const Value& data = body["data"];
  if (!data.is_binary() || !data.get_binary().has_subtype() || data.get_binary().subtype() != kTensorSubtype)
    throw TagRefused("$tensor data of " + found(data) + ", not a tensor's bytes");
  const Bytes& bytes = data.get_binary();
  if (bytes.size() != nbytes)
    throw TagRefused("a " + std::string(dtype_name(dtype)) + " tensor of shape " + shape_text(shape) + " holding " +
                     std::to_string(bytes.size()) + " bytes, not " + std::to_string(nbytes));
  if (dtype == DType::Bool) check_bool_bytes(bytes);
  if (sink.buffers->size() >= kMaxBuffers)
    throw TagRefused("a tensor past the limit of " + std::to_string(kMaxBuffers) + " tensors (buffers) per message");
  if (nbytes > sink.max_buffer_bytes - sink.total)
    throw TagRefused("a tensor of " + std::to_string(nbytes) + " bytes that brings the message's buffers to " +
                     std::to_string(sink.total + nbytes) + " bytes, over the limit of " + std::to_string(sink.max_buffer_bytes) +
                     " (max_buffer_bytes)");
  sink.total += nbytes;
  out += "{\"$tensor\":{\"dtype\":\"";
  out += dtype_name(dtype);
  out += "\",\"shape\":[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  out += "],\"buffer\":" + std::to_string(sink.buffers->size()) + "}}";
  sink.buffers->push_back(&bytes);
}

}  // namespace gates
