#include "optim/checkpoint.h"

#include <set>

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

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  throw SerializationError("load_checkpoint: " + path + ": " + why);
}

int64_t scalar(const TensorMap& all, const std::string& key, const std::string& path) {
  auto it = all.find(key);
  if (it == all.end()) bad_file(path, "missing '" + key + "'");
  if (it->second.dim() != 0 || it->second.dtype() != kInt64)
    bad_file(path, "'" + key + "' is not an int64 scalar (got " + dtype_name(it->second.dtype()) + " of shape " +
                       shape_str(it->second.sizes()) + ")");
  return it->second.item<int64_t>();
}

// A meta entry that counts something (steps, epochs, the generator's Philox blocks): in
// [0, 2^62], as the optimizers' counts (a negative one is a state no run reaches).
int64_t count(const TensorMap& all, const std::string& key, const std::string& path) {
  const int64_t v = scalar(all, key, path);
  if (v < 0 || v > kMaxStateCount)
    bad_file(path, "'" + key + "' must be a count in [0, 2^62], got " + std::to_string(v));
  return v;
}

// Runs check, turning a ValueError about one part's state into a SerializationError that
// names the file and the part's keys.
template <typename F>
auto check_part(const std::string& path, const std::string& prefix, F&& check) {
  try {
    return check();
  } catch (const ValueError& e) {
    bad_file(path, "the entries '" + prefix + "*': " + e.what());
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  LOOM_CHECK(c.model != nullptr, ValueError, "save_checkpoint: no model given");
  TensorMap all;
  put(all, "model.", c.model->state_dict());
  if (c.optimizer) put(all, "optimizer.", c.optimizer->state_dict());
  if (c.scheduler) put(all, "scheduler.", c.scheduler->state_dict());
  if (c.scaler) put(all, "scaler.", c.scaler->state_dict());
  if (c.extra) put(all, "extra.", *c.extra);
  Generator& g = default_generator();
  all["meta.step"] = scalar_tensor(c.step, kInt64);
  all["meta.epoch"] = scalar_tensor(c.epoch, kInt64);
  all["meta.rng_seed"] = scalar_tensor(int64_t(g.seed()), kInt64);
  all["meta.rng_offset"] = scalar_tensor(int64_t(g.offset()), kInt64);
  save_safetensors(path, all, {{"format", "loom-checkpoint"}, {"version", "1"}});
}

// Note [all-or-nothing restore]
// A checkpoint restores several objects, and a bad entry in any of them must leave every
// one as it was. So everything is read and checked first: the keys, the meta entries, the
// optimizer's state (Optimizer::check_state_dict), the scheduler's
// (Scheduler::check_state_dict), the gradient scaler's (GradScaler::check_state_dict) and the
// extra entries' (Checkpoint::check_extra). Then the model is loaded, whose load_state_dict checks
// every key and shape before it copies a tensor; then the rest, which can no longer fail.
TrainingState load_checkpoint(const std::string& path, const Checkpoint& c) {
  LOOM_CHECK(c.model != nullptr, ValueError, "load_checkpoint: no model given");
  SafetensorsFile f = load_safetensors(path);
  auto fmt = f.metadata.find("format");
  if (fmt == f.metadata.end() || fmt->second != "loom-checkpoint")
    throw SerializationError("load_checkpoint: " + path + " is not a Loom training checkpoint (no format metadata); "
                             "use load_weights for a plain weights file");
  static const std::set<std::string> kMeta{"meta.step", "meta.epoch", "meta.rng_seed", "meta.rng_offset"};
  for (const auto& [key, t] : f.tensors)
    if (!key.starts_with("model.") && !key.starts_with("optimizer.") && !key.starts_with("scheduler.") &&
        !key.starts_with("scaler.") && !key.starts_with("extra.") && !kMeta.count(key))
      bad_file(path, "unexpected entry '" + key + "' (a checkpoint holds model.*, optimizer.*, scheduler.*, scaler.*, extra.* and " +
                         "meta.step, meta.epoch, meta.rng_seed, meta.rng_offset)");
  auto version = f.metadata.find("version");
  if (version == f.metadata.end() || version->second != "1")
    bad_file(path, "metadata 'version' must be \"1\", got " +
                       (version == f.metadata.end() ? std::string("none") : "\"" + version->second + "\""));
  const TrainingState state{count(f.tensors, "meta.step", path), count(f.tensors, "meta.epoch", path)};
  // Any seed is one: a uint64 stored as the int64 of the same bits.
  const uint64_t rng_seed = uint64_t(scalar(f.tensors, "meta.rng_seed", path));
  const uint64_t rng_offset = uint64_t(count(f.tensors, "meta.rng_offset", path));
  Optimizer::LoadedState optimizer_state;
  const StateDict optimizer_entries = take(f.tensors, "optimizer.");
  if (c.optimizer)
    optimizer_state = check_part(path, "optimizer.", [&] { return c.optimizer->check_state_dict(optimizer_entries); });
  const StateDict scheduler_state = take(f.tensors, "scheduler.");
  if (c.scheduler) check_part(path, "scheduler.", [&] { c.scheduler->check_state_dict(scheduler_state); });
  amp::GradScaler::LoadedState scaler_state;
  if (c.scaler)
    scaler_state = check_part(path, "scaler.", [&] { return c.scaler->check_state_dict(take(f.tensors, "scaler.")); });
  const StateDict extra_state = take(f.tensors, "extra.");
  if (c.extra && c.check_extra) check_part(path, "extra.", [&] { c.check_extra(extra_state); });

  nn::StateDict model_state;
  for (auto& [k, v] : take(f.tensors, "model.")) model_state[k] = v;
  c.model->load_state_dict(model_state, /*strict=*/true);
  if (c.optimizer) c.optimizer->apply_state_dict(std::move(optimizer_state));
  if (c.scheduler) c.scheduler->load_state_dict(scheduler_state);  // checked above
  if (c.scaler) c.scaler->apply_state_dict(scaler_state);
  if (c.extra) {
    c.extra->clear();
    for (auto& [k, v] : extra_state) (*c.extra)[k] = v;
  }
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
