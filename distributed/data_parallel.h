// nn::parallel::DistributedDataParallel: PyTorch's DDP for Loom modules (docs/distributed.md).
//
//   loom::distributed::init_process_group("gloo");          // under loomrun
//   auto ddp = nn::parallel::DistributedDataParallel(model);  // broadcasts rank 0's weights
//   optim::Adam opt(ddp.parameters(), ...);
//   Tensor loss = criterion(ddp(x), y);  // x: this rank's share of the batch
//   loss.backward();                     // gradients all-reduced (averaged) during backward
//   opt.step();                          // every rank takes the same step
//
// Construction checks that every rank holds the same parameter and buffer names, shapes
// and dtypes (a ValueError names the first difference and the ranks), then copies rank 0's
// parameters and buffers to all. Each forward first broadcasts rank 0's buffers
// (broadcast_buffers), and, when grad mode is on and outside no_sync(), arms the Reducer
// (distributed/reducer.h, Note [gradient buckets]) for the backward that follows.
//
// Every rank must call forward and backward the same number of times, in step, as PyTorch
// requires; the process group must outlive the wrapper.
#pragma once

#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "distributed/init.h"
#include "distributed/reducer.h"
#include "nn/module.h"

namespace loom::nn::parallel {

struct DistributedDataParallelOptions {
  double bucket_cap_mb_ = 25;  // the later buckets; the first is 1 MiB, as PyTorch's
  bool find_unused_parameters_ = false;
  bool broadcast_buffers_ = true;

  DistributedDataParallelOptions& bucket_cap_mb(double mb) { bucket_cap_mb_ = mb; return *this; }
  DistributedDataParallelOptions& find_unused_parameters(bool on) { find_unused_parameters_ = on; return *this; }
  DistributedDataParallelOptions& broadcast_buffers(bool on) { broadcast_buffers_ = on; return *this; }
};

// What does not depend on the wrapped module's type.
class DataParallelBase {
 public:
  DataParallelBase(std::shared_ptr<Module> module, distributed::ProcessGroup& group,
                   const DistributedDataParallelOptions& options);

  // While alive, forwards do not arm the reducer: gradients accumulate locally, and the
  // next synchronized backward all-reduces the sum (gradient accumulation).
  class NoSync {
   public:
    explicit NoSync(DataParallelBase& ddp) : ddp_(&ddp), previous_(ddp.sync_) { ddp.sync_ = false; }
    ~NoSync() { if (ddp_) ddp_->sync_ = previous_; }
    NoSync(NoSync&& o) noexcept : ddp_(std::exchange(o.ddp_, nullptr)), previous_(o.previous_) {}
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    DataParallelBase* ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }
  bool require_backward_grad_sync() const { return sync_; }

  std::vector<Tensor> parameters() const { return module_->parameters(); }
  NamedTensors named_parameters() const { return module_->named_parameters(); }
  distributed::ProcessGroup& process_group() const { return group_; }
  const distributed::Reducer& reducer() const { return *reducer_; }

 protected:
  void before_forward();
  void after_forward(const std::vector<Tensor>& outputs);

 private:
  void check_same_model_on_every_rank() const;
  void broadcast_from_rank0(const NamedTensors& tensors) const;

  std::shared_ptr<Module> module_;
  distributed::ProcessGroup& group_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<distributed::Reducer> reducer_;
  bool sync_ = true;
};

namespace detail {
// Every tensor of a forward's result (a tensor, pair, tuple, vector, or an RNNOutput /
// RNNState), where find_unused_parameters starts its search.
inline void collect_outputs(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
inline void collect_outputs(const std::vector<Tensor>& ts, std::vector<Tensor>& out) {
  out.insert(out.end(), ts.begin(), ts.end());
}
template <typename A, typename B>
void collect_outputs(const std::pair<A, B>& p, std::vector<Tensor>& out) {
  collect_outputs(p.first, out);
  collect_outputs(p.second, out);
}
template <typename... Ts>
void collect_outputs(const std::tuple<Ts...>& t, std::vector<Tensor>& out) {
  std::apply([&](const auto&... e) { (collect_outputs(e, out), ...); }, t);
}
template <typename T>
void collect_outputs(const T& result, std::vector<Tensor>& out) {
  if constexpr (requires { result.output; }) collect_outputs(result.output, out);
  if constexpr (requires { result.h_n; }) collect_outputs(result.h_n, out);
  if constexpr (requires { result.c_n; }) collect_outputs(result.c_n, out);
  if constexpr (requires { result.h; }) collect_outputs(result.h, out);
  if constexpr (requires { result.c; }) collect_outputs(result.c, out);
}

// The Module behind a holder (nn::Linear, a TORCH_MODULE-style holder) or a shared_ptr.
template <typename M>
std::shared_ptr<Module> module_of(const M& m) {
  if constexpr (requires { m.ptr(); }) return m.ptr();
  else return m;
}
}  // namespace detail

// M: a module holder (ddp(x) calls it, forward hooks included) or a std::shared_ptr to a
// Module subclass with forward (ddp(x) calls forward).
template <typename M>
class DistributedDataParallel : public DataParallelBase {
 public:
  explicit DistributedDataParallel(M module, distributed::ProcessGroup& group,
                                   const DistributedDataParallelOptions& options = {})
      : DataParallelBase(detail::module_of(module), group, options), module_(std::move(module)) {}
  // Over the default group (distributed::init_process_group).
  explicit DistributedDataParallel(M module, const DistributedDataParallelOptions& options = {})
      : DistributedDataParallel(std::move(module), distributed::default_group(), options) {}

  template <typename... Args>
  auto operator()(Args&&... args) {
    before_forward();
    auto result = call(std::forward<Args>(args)...);
    std::vector<Tensor> outputs;
    detail::collect_outputs(result, outputs);
    after_forward(outputs);
    return result;
  }
  template <typename... Args>
  auto forward(Args&&... args) {
    return (*this)(std::forward<Args>(args)...);
  }

  // The wrapped model (ddp.module in PyTorch): train()/eval(), state_dict, checkpoints.
  M& module() { return module_; }
  const M& module() const { return module_; }

 private:
  template <typename... Args>
  auto call(Args&&... args) {
    if constexpr (requires { module_.ptr(); }) return module_(std::forward<Args>(args)...);
    else return module_->forward(std::forward<Args>(args)...);
  }

  M module_;
};

}  // namespace loom::nn::parallel
