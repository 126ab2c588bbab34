#include "optim/checkpoint.h"

#include "core/factories.h"
#include "core/generator.h"

namespace loom::optim {
namespace {

// Prefixes one state dict's keys into the file's flat namespace, or takes them back out.
template <typename Map>
void put(TensorMap& out, const std::string& prefix, const Map& state) {
  for (const auto& [k, v] : state) out[prefix + k] = v;
}

TensorMap take(const TensorMap& all, const std::string& prefix) {
  TensorMap out;
  for (const auto& [k, v] : all)
    if (k.rfind(prefix, 0) == 0) out[k.substr(prefix.size())] = v;
  return out;
}

int64_t scalar(const TensorMap& all, const std::string& key, const std::string& path) {
  auto it = all.find(key);
  if (it == all.end()) throw SerializationError("load_checkpoint: " + path + ": missing '" + key + "'");
  if (it->second.numel() != 1 || it->second.dtype() != kInt64)
    throw SerializationError("load_checkpoint: " + path + ": '" + key + "' is not an int64 scalar");
  return it->second.item<int64_t>();
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  LOOM_CHECK(c.model != nullptr, ValueError, "save_checkpoint: no model given");
  TensorMap all;
  put(all, "model.", c.model->state_dict());
  if (c.optimizer) put(all, "optimizer.", c.optimizer->state_dict());
  if (c.scheduler) put(all, "scheduler.", c.scheduler->state_dict());
  Generator& g = default_generator();
  all["meta.step"] = scalar_tensor(c.step, kInt64);
  all["meta.epoch"] = scalar_tensor(c.epoch, kInt64);
  all["meta.rng_seed"] = scalar_tensor(int64_t(g.seed()), kInt64);
  all["meta.rng_offset"] = scalar_tensor(int64_t(g.offset()), kInt64);
  save_safetensors(path, all, {{"format", "loom-checkpoint"}, {"version", "1"}});
}

TrainingState load_checkpoint(const std::string& path, const Checkpoint& c) {
  LOOM_CHECK(c.model != nullptr, ValueError, "load_checkpoint: no model given");
  SafetensorsFile f = load_safetensors(path);
  auto fmt = f.metadata.find("format");
  if (fmt == f.metadata.end() || fmt->second != "loom-checkpoint")
    throw SerializationError("load_checkpoint: " + path + " is not a Loom training checkpoint (no format metadata); "
                             "use load_weights for a plain weights file");
  // The meta entries first, so that a file without them changes nothing.
  const TrainingState state{scalar(f.tensors, "meta.step", path), scalar(f.tensors, "meta.epoch", path)};
  const uint64_t rng_seed = uint64_t(scalar(f.tensors, "meta.rng_seed", path));
  const uint64_t rng_offset = uint64_t(scalar(f.tensors, "meta.rng_offset", path));
  nn::StateDict model_state;
  for (auto& [k, v] : take(f.tensors, "model.")) model_state[k] = v;
  c.model->load_state_dict(model_state, /*strict=*/true);
  if (c.optimizer) c.optimizer->load_state_dict(take(f.tensors, "optimizer."));
  if (c.scheduler) c.scheduler->load_state_dict(take(f.tensors, "scheduler."));
  default_generator().set_state(rng_seed, rng_offset);
  return state;
}

void save_weights(const std::string& path, const nn::Module& model) {
  TensorMap all;
  put(all, "", model.state_dict());
  save_safetensors(path, all);
}

void load_weights(const std::string& path, nn::Module& model, bool strict) {
  SafetensorsFile f = load_safetensors(path);
  nn::StateDict state(f.tensors.begin(), f.tensors.end());
  model.load_state_dict(state, strict);
}

}  // namespace loom::optim
