#include "distributed/reducer.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_set>

#include "autograd/autograd_meta.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"

namespace loom::distributed {

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> params, ProcessGroup& group, ReducerOptions options)
    : params_(std::move(params)), group_(group), options_(options) {
  if (options_.first_bucket_bytes <= 0 || options_.bucket_cap_bytes <= 0)
    throw ValueError(detail::str("DistributedDataParallel: bucket sizes must be positive, got first_bucket_bytes ",
                                 options_.first_bucket_bytes, " and bucket_cap_bytes ", options_.bucket_cap_bytes));
  std::vector<size_t> reverse_order(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) reverse_order[i] = params_.size() - 1 - i;
  build_buckets(reverse_order, true);
  ready_.assign(params_.size(), false);
  used_.assign(params_.size(), 0.f);
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = weak_from_this();
  for (size_t i = 0; i < params_.size(); ++i) {
    // The hook outlives a destroyed DDP wrapper (the parameter keeps it): it then does nothing.
    params_[i].second.register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto reducer = weak.lock(); reducer && reducer->expect_hooks_) reducer->mark_ready(i);
    });
  }
}

// Note [gradient buckets]: greedy fill in `order`, one open bucket per (dtype, device).
void Reducer::build_buckets(const std::vector<size_t>& order, bool first_bucket_small) {
  struct Open {
    std::vector<size_t> params;
    int64_t bytes = 0;
    int64_t limit = 0;
  };
  std::map<std::tuple<int, int, int>, Open> open;  // (dtype, device type, device index)
  std::vector<std::vector<size_t>> closed;
  for (size_t index : order) {
    const Tensor& p = params_[index].second;
    Device d = p.device();
    auto [it, fresh] = open.try_emplace({int(p.dtype()), int(d.type), int(d.index)});
    Open& b = it->second;
    if (fresh) b.limit = first_bucket_small ? options_.first_bucket_bytes : options_.bucket_cap_bytes;
    b.params.push_back(index);
    b.bytes += int64_t(p.nbytes());
    if (b.bytes >= b.limit) {
      closed.push_back(std::move(b.params));
      b = Open{{}, 0, options_.bucket_cap_bytes};
    }
  }
  for (auto& [key, b] : open)
    if (!b.params.empty()) closed.push_back(std::move(b.params));
  // Buckets in the order their first gradient is expected.
  std::vector<size_t> position(params_.size());
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = k;
  std::sort(closed.begin(), closed.end(),
            [&](const auto& a, const auto& b) { return position[a.front()] < position[b.front()]; });

  buckets_.clear();
  slot_of_.assign(params_.size(), {0, 0});
  for (auto& indices : closed) {
    Bucket bucket;
    int64_t numel = 0;
    for (size_t k = 0; k < indices.size(); ++k) {
      slot_of_[indices[k]] = {buckets_.size(), k};
      bucket.offset.push_back(numel);
      numel += params_[indices[k]].second.numel();
    }
    bucket.flat = zeros({numel}, params_[indices.front()].second.options());
    bucket.params = std::move(indices);
    buckets_.push_back(std::move(bucket));
  }
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

void Reducer::reset_iteration() {
  expect_hooks_ = false;
  finalized_ = true;
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(used_.begin(), used_.end(), 0.f);
  next_bucket_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
  }
}

std::vector<std::string> Reducer::unready_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) names.push_back("'" + params_[i].first + "'");
  return names;
}

void Reducer::prepare_for_forward() {
  if (!finalized_) {
    bool started = std::find(ready_.begin(), ready_.end(), true) != ready_.end();
    if (started) {
      std::vector<std::string> missing = unready_names();
      reset_iteration();
      std::string list;
      for (size_t k = 0; k < missing.size() && k < 10; ++k) list += (k ? ", " : "") + missing[k];
      if (missing.size() > 10) list += detail::str(" and ", missing.size() - 10, " more");
      throw ValueError(detail::str(
          "DistributedDataParallel: the previous backward finished its reduction only in part: ", missing.size(),
          " parameter(s) got no gradient (", list,
          "). Parameters the forward did not use need DistributedDataParallelOptions().find_unused_parameters(true)"));
    }
    reset_iteration();  // a forward whose backward never ran: nothing was reduced
  }
  if (rebuild_due_ && !rebuilt_) {
    // Rank 0's ready order, then any parameter it never saw (reverse registration order).
    std::vector<int64_t> order(ready_order_.begin(), ready_order_.end());
    std::vector<bool> seen(params_.size(), false);
    for (size_t i : ready_order_) seen[i] = true;
    for (size_t k = params_.size(); k-- > 0;)
      if (!seen[k]) order.push_back(int64_t(k));
    Tensor shared = from_vector(order).to(group_.device());
    group_.broadcast(shared, 0)->wait();
    std::vector<int64_t> agreed = shared.to_vector<int64_t>();
    std::vector<size_t> rebuilt(agreed.begin(), agreed.end());
    build_buckets(rebuilt, true);
    rebuilt_ = true;
    ready_order_.clear();
  }
}

void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  reset_iteration();
  if (buckets_.empty()) return;
  expect_hooks_ = true;
  finalized_ = false;
  if (!options_.find_unused_parameters) return;
  // The leaves the graph reaches, by their AccumulateGrad nodes.
  std::unordered_set<const TensorImpl*> reached;
  std::unordered_set<const Node*> visited;
  std::vector<std::shared_ptr<Node>> stack;
  for (const Tensor& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    if (Edge e = gradient_edge(out); e.valid()) stack.push_back(e.fn);
  }
  while (!stack.empty()) {
    std::shared_ptr<Node> node = std::move(stack.back());
    stack.pop_back();
    if (!visited.insert(node.get()).second) continue;
    if (auto* acc = dynamic_cast<AccumulateGrad*>(node.get())) reached.insert(acc->variable().impl());
    for (const Edge& e : node->next_edges())
      if (e.valid()) stack.push_back(e.fn);
  }
  for (size_t i = 0; i < params_.size(); ++i)
    if (!reached.count(params_[i].second.impl())) mark_ready(i);
}

void Reducer::mark_ready(size_t index) {
  const auto& [name, param] = params_[index];
  if (ready_[index]) {
    throw ValueError(detail::str("DistributedDataParallel: parameter '", name,
                                 "' received its gradient twice in one backward; a parameter may be reduced only "
                                 "once per forward (call the model again before another backward)"));
  }
  ready_[index] = true;
  if (!rebuilt_) ready_order_.push_back(index);
  auto [b, k] = slot_of_[index];
  Bucket& bucket = buckets_[b];
  NoGradGuard no_grad;
  Tensor slot = bucket.flat.narrow(0, bucket.offset[k], param.numel());
  // A parameter the graph did not reach may still hold a gradient from no_sync() steps.
  if (const Tensor& g = param.grad(); g.defined()) {
    slot.copy_(g.reshape({-1}));
    used_[index] = 1.f;
  } else {
    slot.zero_();
  }
  if (--bucket.pending == 0) launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& bucket = buckets_[next_bucket_++];
    bucket.work = group_.all_reduce(bucket.flat, ReduceOp::AVG);
  }
  if (next_bucket_ == buckets_.size()) finalize();
}

void Reducer::finalize() {
  expect_hooks_ = false;
  std::vector<float> used_anywhere(params_.size(), 1.f);
  try {
    if (options_.find_unused_parameters) {
      Tensor used = from_vector(used_).to(group_.device());
      group_.all_reduce(used, ReduceOp::MAX)->wait();
      used_anywhere = used.to_vector<float>();
    }
    for (Bucket& bucket : buckets_) bucket.work->wait();
  } catch (...) {
    reset_iteration();
    throw;
  }
  NoGradGuard no_grad;
  for (Bucket& bucket : buckets_) {
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      size_t index = bucket.params[k];
      if (used_anywhere[index] == 0.f) continue;  // no rank produced one: .grad() stays as it was
      const Tensor& param = params_[index].second;
      Tensor average = bucket.flat.narrow(0, bucket.offset[k], param.numel()).view(param.sizes());
      if (param.grad().defined()) param.mutable_grad().copy_(average);
      else param.mutable_grad() = average.clone();
    }
  }
  finalized_ = true;
  if (!rebuilt_) rebuild_due_ = true;
}

}  // namespace loom::distributed
