// Reducer: the gradient all-reduce of DistributedDataParallel (Note [gradient buckets]).
//
// Note [gradient buckets]
// The trainable parameters are grouped into buckets of one dtype and device: the first
// holds at most first_bucket_bytes (1 MiB), the rest bucket_cap_bytes (25 MiB) each, filled
// in reverse registration order (backward produces the last layers' gradients first). Each
// bucket owns one flat buffer. A post-accumulate-grad hook on every parameter copies its
// fresh gradient into its bucket's slot; when the last slot of a bucket is filled, the
// bucket's all-reduce (AVG over the group) is queued on the process group's thread while
// backward goes on computing earlier layers: communication overlaps computation. Buckets
// are launched strictly in index order on every rank (a ready bucket waits for the ones
// before it), so all ranks queue the same collectives in the same order. When the last
// bucket is launched (still inside backward) the reducer waits for all of them and copies
// the averages back into .grad(), so backward returns with synchronized gradients.
//
// After the first synchronized backward the buckets are rebuilt once, in the order the
// gradients became ready on rank 0 (broadcast, so every rank agrees), which makes a
// bucket's gradients arrive together.
//
// find_unused_parameters: after forward, the autograd graph is searched from the outputs;
// parameters it does not reach get no hook call, so they are marked ready at once with
// their current gradient (or zeros). A parameter that no rank used keeps an undefined
// .grad(), as in PyTorch. Without the option, a backward that leaves some parameters
// without gradient never finishes its reduction; the next forward says so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/process_group.h"

namespace loom::distributed {

struct ReducerOptions {
  int64_t first_bucket_bytes = int64_t(1) << 20;
  int64_t bucket_cap_bytes = int64_t(25) << 20;
  bool find_unused_parameters = false;
};

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  // params: the trainable parameters in registration order, with their names (for errors).
  // Call install_hooks() once the reducer is owned by a shared_ptr.
  Reducer(std::vector<std::pair<std::string, Tensor>> params, ProcessGroup& group, ReducerOptions options);
  void install_hooks();

  // Before a forward whose backward should synchronize: checks that the previous reduction
  // finished (ValueError otherwise) and rebuilds the buckets once if due. Collective: every
  // rank calls it at the same point.
  void prepare_for_forward();
  // After that forward: arms the hooks for one backward. outputs: every tensor the forward
  // returned (searched for unused parameters when find_unused_parameters is on).
  void prepare_for_backward(const std::vector<Tensor>& outputs);

  // The buckets as lists of parameter indices (registration order), for tests and docs.
  std::vector<std::vector<size_t>> bucket_indices() const;
  bool buckets_rebuilt() const { return rebuilt_; }
  // Buckets whose all-reduce this backward has queued so far.
  size_t buckets_launched() const { return next_bucket_; }

 private:
  struct Bucket {
    std::vector<size_t> params;   // indices into params_
    std::vector<int64_t> offset;  // each one's first element in flat
    Tensor flat;                  // (sum of numels,) of the bucket's dtype and device
    size_t pending = 0;           // slots not yet filled this backward
    std::shared_ptr<Work> work;
  };

  void build_buckets(const std::vector<size_t>& order, bool first_bucket_small);
  void mark_ready(size_t index);
  void launch_ready_buckets();
  void finalize();
  void reset_iteration();
  std::vector<std::string> unready_names() const;

  std::vector<std::pair<std::string, Tensor>> params_;
  ProcessGroup& group_;
  ReducerOptions options_;

  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> slot_of_;  // param index -> (bucket, position)

  // Per backward.
  bool expect_hooks_ = false;
  bool finalized_ = true;
  std::vector<bool> ready_;
  std::vector<float> used_;  // 1 where this rank produced a gradient (find_unused_parameters)
  size_t next_bucket_ = 0;
  std::vector<size_t> ready_order_;

  bool rebuilt_ = false;
  bool rebuild_due_ = false;
};

}  // namespace loom::distributed
