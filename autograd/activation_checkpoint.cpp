// loom::checkpoint (Note [non-reentrant checkpoint] in autograd/activation_checkpoint.h).
#include "autograd/activation_checkpoint.h"

#include <memory>
#include <string>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_tensor_hooks.h"
#include "core/generator.h"

namespace loom {
namespace {

// What the forward of one checkpointed segment left for its recomputation.
struct Frame {
  CheckpointFn fn;
  std::vector<SavedVariable> inputs;  // saved under the enclosing hooks: a nested frame's go to the outer one
  std::vector<bool> input_requires_grad;
  uint64_t rng_seed = 0, rng_offset = 0;
  autocast::Snapshot autocast;
  struct Meta {
    Shape shape;
    DType dtype;
  };
  std::vector<Meta> packed;       // each tensor the forward saved, in order
  std::vector<Tensor> recomputed;  // the same tensors from the recomputation (a slot empties when its pack goes)
  bool done = false;
  bool keep_attention = false;
  std::vector<std::vector<Tensor>> kept_attention;  // each attention's outputs, in order (keep_attention)
  size_t next_kept = 0;                              // the next one the recomputation (or a twin) takes
  // Nesting (Note [nested recomputation]): the checkpoints this frame's forward ran directly
  // inside it, in order; the next of them its recomputation runs again; and, for a frame
  // made by an enclosing frame's recomputation, the forward's frame it stands for.
  std::vector<std::weak_ptr<Frame>> children;
  size_t next_child = 0;
  std::shared_ptr<Frame> twin;

  void recompute();
  const Tensor& get(size_t index) {
    if (!done) recompute();
    LOOM_CHECK(recomputed[index].defined(), AutogradError,
               "checkpoint: a saved activation was used after it was freed (a second backward needs "
               "retain_graph=true in the first)");
    return recomputed[index];
  }
};

// A saved tensor of the forward: its index in the frame.
struct ForwardPack : SavedTensorPack {
  ForwardPack(std::shared_ptr<Frame> f, size_t i) : frame(std::move(f)), index(i) {}
  ~ForwardPack() override {
    if (index < frame->recomputed.size()) frame->recomputed[index] = Tensor();  // freed as backward goes
  }
  Tensor unpack() const override { return frame->get(index); }
  std::shared_ptr<Frame> frame;
  size_t index;
};

struct ForwardHooks : SavedTensorHooks {
  explicit ForwardHooks(std::shared_ptr<Frame> f) : frame(std::move(f)) {}
  std::shared_ptr<SavedTensorPack> pack(const Tensor& t) override {
    frame->packed.push_back({t.sizes(), t.dtype()});
    return std::make_shared<ForwardPack>(frame, frame->packed.size() - 1);
  }
  std::shared_ptr<Frame> frame;
};

// Thrown by the recomputation's last save, caught by Frame::recompute (not an error).
struct StopRecomputation {};

// The recomputation's graph is dropped when it ends; its saves only fill the frame.
struct HeldPack : SavedTensorPack {
  explicit HeldPack(Tensor t) : tensor(std::move(t)) {}
  Tensor unpack() const override { return tensor; }
  Tensor tensor;
};

struct RecomputeHooks : SavedTensorHooks {
  explicit RecomputeHooks(Frame& f) : frame(f) {}
  std::shared_ptr<SavedTensorPack> pack(const Tensor& t) override {
    const size_t k = frame.recomputed.size();
    LOOM_CHECK(k < frame.packed.size(), AutogradError, "checkpoint: the recomputation saved more tensors for backward (",
               k + 1, " so far) than the forward did (", frame.packed.size(), "): fn must run the same ops each time");
    const Frame::Meta& m = frame.packed[k];
    LOOM_CHECK(t.sizes() == m.shape && t.dtype() == m.dtype, AutogradError, "checkpoint: the recomputation differs from ",
               "the forward: saved tensor ", k, " is ", dtype_name(t.dtype()), " of shape ", shape_str(t.sizes()),
               ", the forward's was ", dtype_name(m.dtype), " of shape ", shape_str(m.shape));
    frame.recomputed.push_back(t.detach());
    // The last tensor backward needs: the rest of fn would only make outputs that are
    // dropped (memory at the peak of backward, and time), so it stops here, as PyTorch's
    // early stop does.
    if (frame.recomputed.size() == frame.packed.size()) throw StopRecomputation{};
    return std::make_shared<HeldPack>(frame.recomputed.back());
  }
  Frame& frame;
};

// The frame whose forward or recomputation runs on this thread (the innermost), for
// keep_attention.
thread_local Frame* current_frame = nullptr;
thread_local bool recomputing = false;

struct CurrentFrame {
  CurrentFrame(Frame* f, bool recompute) : frame(current_frame), was_recomputing(recomputing) {
    current_frame = f;
    recomputing = recompute;
  }
  ~CurrentFrame() {
    current_frame = frame;
    recomputing = was_recomputing;
  }
  Frame* frame;
  bool was_recomputing;
};

// Puts the default generator back as it was when the recomputation ends (or throws).
struct GeneratorRestore {
  uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  ~GeneratorRestore() { default_generator().set_state(seed, offset); }
};

void Frame::recompute() {
  std::vector<Tensor> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor x = inputs[i].unpack();  // an input changed in place since: AutogradError
    in.push_back(x.defined() ? x.detach().requires_grad_(input_requires_grad[i] && x.is_floating_point()) : x);
  }
  recomputed.clear();
  {
    const GeneratorRestore restore_generator;
    default_generator().set_state(rng_seed, rng_offset);
    const autocast::RestoreGuard same_autocast(autocast);
    const EnableGradGuard grad_mode;
    RecomputeHooks hooks(*this);
    const SavedTensorHooksGuard guard(&hooks);
    const CurrentFrame current(this, /*recompute=*/true);
    next_kept = 0;
    next_child = 0;
    try {
      fn(in);
    } catch (const StopRecomputation&) {
    } catch (...) {
      recomputed.clear();
      throw;
    }
  }
  if (recomputed.size() != packed.size()) {
    const size_t got = recomputed.size();
    recomputed.clear();
    throw AutogradError(detail::str("checkpoint: the recomputation saved ", got,
                                    " tensors for backward but the forward saved ", packed.size(),
                                    ": fn must run the same ops each time"));
  }
  done = true;
}

}  // namespace

namespace detail {

void checkpoint_keep_attention(const std::vector<Tensor>& outputs) {
  if (current_frame && !recomputing && current_frame->keep_attention) {
    std::vector<Tensor> kept;
    for (const Tensor& t : outputs) kept.push_back(t.detach());
    current_frame->kept_attention.push_back(std::move(kept));
  }
}

std::vector<Tensor> checkpoint_kept_attention() {
  Frame* f = current_frame;
  if (!f) return {};
  if (recomputing) {
    if (f->next_kept >= f->kept_attention.size()) return {};
    return std::move(f->kept_attention[f->next_kept++]);  // the frame lets go: backward holds them now
  }
  // The forward of a nested checkpoint that an enclosing recomputation runs again: its twin's
  // outputs, shared (the twin's own recomputation takes them later). Ones its twin has let go
  // already are computed again.
  if (!f->twin || f->next_kept >= f->twin->kept_attention.size()) return {};
  std::vector<Tensor> kept = f->twin->kept_attention[f->next_kept++];
  for (const Tensor& t : kept)
    if (!t.defined()) return {};
  return kept;
}

}  // namespace detail

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options) {
  LOOM_CHECK(fn != nullptr, ValueError, "checkpoint: no function given");
  if (!GradMode::is_enabled()) return fn(inputs);  // nothing is saved: nothing to recompute
  auto frame = std::make_shared<Frame>();
  frame->fn = fn;
  for (const Tensor& x : inputs) {
    frame->inputs.emplace_back(x, "checkpoint");
    frame->input_requires_grad.push_back(x.defined() && x.requires_grad());
  }
  frame->rng_seed = default_generator().seed();
  frame->rng_offset = default_generator().offset();
  frame->autocast = autocast::snapshot();
  frame->keep_attention = options.keep_attention;
  if (Frame* parent = current_frame) {
    if (!recomputing) {
      parent->children.push_back(frame);
    } else if (parent->next_child < parent->children.size()) {
      frame->twin = parent->children[parent->next_child++].lock();
    }
  }
  ForwardHooks hooks(frame);
  const SavedTensorHooksGuard guard(&hooks);
  const CurrentFrame current(frame.get(), /*recompute=*/false);
  return fn(inputs);
}

}  // namespace loom
