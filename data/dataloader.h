// DataLoader: batches from a Dataset, optionally prefetched by background threads, as
// torch.utils.data.DataLoader.
//
//   auto collate = [](std::vector<data::TextExample> e) { return data::collate_text(std::move(e)); };
//   auto loader = data::make_data_loader(dataset, collate,
//                                        data::DataLoaderOptions(32).shuffle(true).num_workers(2));
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (data::TextBatch& batch : loader) { ... }   // each pass is the next epoch
//
// Note [workers and order]
// With num_workers = 0 the batches are made on the calling thread when asked for. With
// num_workers = N, N threads take batch numbers in order from a shared counter, each
// loads its batch (get + collate) and parks it in a reorder buffer; the consumer takes
// batch k only when it is there, so batches come out in sampler order whatever the
// number of workers and however long each takes. At most N * prefetch_factor batches are
// in flight. A worker's exception is carried to the consumer as a WorkerError at the
// batch it broke (with the original exception inside); the worker pool of an epoch is
// stopped when the epoch ends, when the next one starts, or when the loader goes away.
// Workers are threads, not processes: the dataset's get and the collate function must be
// safe to call concurrently (pure functions of their inputs are). Batch k goes to worker
// k % N, and each worker draws random numbers from its own generator, seeded as PyTorch
// seeds its workers (Note [worker seeds], data/worker_info.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/build_info.h"
#include "core/profiler.h"
#include "core/cuda.h"
#include "core/error.h"
#include "core/parallel.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/worker_info.h"

namespace loom::data {

struct DataLoaderOptions {
  explicit DataLoaderOptions(size_t batch_size = 1) : batch_size_(batch_size) {}
  DataLoaderOptions& batch_size(size_t n) { batch_size_ = n; return *this; }
  // A new order every epoch, from seed (Note [one seed, every epoch] in data/sampler.h).
  DataLoaderOptions& shuffle(bool s) { shuffle_ = s; return *this; }
  DataLoaderOptions& seed(uint64_t s) { seed_ = s; return *this; }
  DataLoaderOptions& drop_last(bool d) { drop_last_ = d; return *this; }
  DataLoaderOptions& num_workers(size_t n) { num_workers_ = n; return *this; }
  DataLoaderOptions& prefetch_factor(size_t n) { prefetch_factor_ = n; return *this; }
  // Page-locked batches for faster host-to-GPU copies (then batch.to(device, non_blocking)):
  // calls batch.pin_memory() in the worker when the batch type has one (Tensor, TextBatch,
  // WindowBatch do). Without a usable GPU it is ignored with a warning, as in PyTorch.
  DataLoaderOptions& pin_memory(bool p) { pin_memory_ = p; return *this; }
  // Seconds to wait for a worker's batch before throwing TimeoutError; 0 waits forever.
  // Only meaningful with workers (as in PyTorch, ignored when num_workers is 0).
  DataLoaderOptions& timeout(double seconds) { timeout_s_ = seconds; return *this; }
  // Called on each worker's thread as it starts, with its id, after its generator is seeded
  // (get_worker_info() says the rest), as PyTorch's worker_init_fn. Its exception fails the
  // worker's batches.
  DataLoaderOptions& worker_init_fn(std::function<void(size_t)> f) { worker_init_fn_ = std::move(f); return *this; }

  size_t batch_size_;
  bool shuffle_ = false, drop_last_ = false, pin_memory_ = false;
  uint64_t seed_ = 0;
  size_t num_workers_ = 0, prefetch_factor_ = 2;
  double timeout_s_ = 0;
  std::function<void(size_t)> worker_init_fn_;
};

// A worker failed to load a batch. what() names the worker, the batch and the original
// error's message; original() is that exception, to rethrow or inspect.
class WorkerError : public Error {
 public:
  WorkerError(const std::string& message, std::exception_ptr original)
      : Error(message), original_(std::move(original)) {}
  std::exception_ptr original() const { return original_; }
  [[noreturn]] void rethrow_original() const { std::rethrow_exception(original_); }

 private:
  std::exception_ptr original_;
};

namespace detail {

inline std::string describe_exception(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

inline std::string describe_indices(const std::vector<size_t>& indices) {
  std::ostringstream os;
  for (size_t i = 0; i < indices.size() && i < 8; ++i) os << (i ? ", " : "") << indices[i];
  if (indices.size() > 8) os << ", ... (" << indices.size() << " in all)";
  return os.str();
}

// One epoch's batches being loaded: by the caller (no workers) or by a worker pool.
template <typename Example, typename Batch>
class EpochRun {
 public:
  using Load = std::function<Batch(const std::vector<size_t>&)>;

  // base_seed: the pass's (Note [worker seeds]); init: the worker_init_fn, or empty.
  EpochRun(Batches batches, Load load, size_t num_workers, size_t prefetch_factor, double timeout_s,
           uint64_t base_seed, std::function<void(size_t)> init)
      : state_(std::make_shared<State>()), timeout_s_(timeout_s) {
    state_->batches = std::move(batches);
    state_->load = std::move(load);
    state_->window = std::max<size_t>(1, num_workers * prefetch_factor);
    state_->workers = num_workers;
    state_->base_seed = base_seed;
    state_->init = std::move(init);
    for (size_t w = 0; w < num_workers; ++w)
      workers_.emplace_back([state = state_, w] { work(*state, w); });
  }

  ~EpochRun() {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->stop = true;
    }
    state_->space.notify_all();
    // After a timeout a worker may be stuck in the dataset: let it finish on its own (it
    // owns its share of the state), rather than hang the caller here.
    for (std::thread& t : workers_) timed_out_ ? t.detach() : t.join();
  }

  size_t size() const { return state_->batches.size(); }

  // Batch k, k = 0, 1, ... in order.
  Batch take(size_t k) {
    if (workers_.empty()) return state_->load(state_->batches[k]);
    State& s = *state_;
    std::unique_lock<std::mutex> lock(s.mutex);
    auto ready = [&] { return s.results.count(k) > 0; };
    if (timeout_s_ > 0) {
      if (!s.ready.wait_for(lock, std::chrono::duration<double>(timeout_s_), ready)) {
        timed_out_ = true;
        throw TimeoutError(::loom::detail::str(
            "DataLoader: timed out after ", timeout_s_, " s waiting for batch ", k, " of ",
            s.batches.size(), " (", workers_.size(), " workers; indices ",
            describe_indices(s.batches[k]), ")"));
      }
    } else {
      s.ready.wait(lock, ready);
    }
    auto node = s.results.extract(k);
    s.consumed = k + 1;
    lock.unlock();
    s.space.notify_all();
    if (auto* error = std::get_if<Failure>(&node.mapped())) {
      throw WorkerError(::loom::detail::str("DataLoader worker ", error->worker,
                                            " failed while loading batch ", k, " (indices ",
                                            describe_indices(s.batches[k]),
                                            "): ", describe_exception(error->exception)),
                        error->exception);
    }
    return std::move(std::get<Batch>(node.mapped()));
  }

 private:
  struct Failure {
    size_t worker;
    std::exception_ptr exception;
  };
  struct State {
    Batches batches;
    Load load;
    size_t window = 1;
    std::mutex mutex;
    std::condition_variable ready, space;  // consumer waits on ready, workers on space
    size_t workers = 0, consumed = 0;
    uint64_t base_seed = 0;
    std::function<void(size_t)> init;
    bool stop = false;
    std::map<size_t, std::variant<Batch, Failure>> results;  // the reorder buffer
  };

  // Worker `worker` loads batches worker, worker + N, ... in order (Note [worker seeds]).
  static void work(State& s, size_t worker) {
    SerialThreadGuard serial;  // the workers are the parallelism; kernels stay serial
    profiler::set_thread_name("DataLoader worker " + std::to_string(worker));
    const WorkerScope scope(worker, s.workers, s.base_seed);
    std::exception_ptr init_error;  // fails each of this worker's batches
    try {
      if (s.init) s.init(worker);
    } catch (...) {
      init_error = std::current_exception();
    }
    for (size_t k = worker;; k += s.workers) {
      {
        std::unique_lock<std::mutex> lock(s.mutex);
        s.space.wait(lock, [&] { return s.stop || k >= s.batches.size() || k < s.consumed + s.window; });
        if (s.stop || k >= s.batches.size()) return;
      }
      std::variant<Batch, Failure> result = Failure{worker, init_error};
      if (!init_error) {
        try {
          result = s.load(s.batches[k]);
        } catch (...) {
          result = Failure{worker, std::current_exception()};
        }
      }
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.results.emplace(k, std::move(result));
      }
      s.ready.notify_all();
    }
  }

  std::shared_ptr<State> state_;
  std::vector<std::thread> workers_;
  double timeout_s_;
  bool timed_out_ = false;
};

}  // namespace detail

template <typename Example, typename Batch>
class DataLoader {
 public:
  using Collate = std::function<Batch(std::vector<Example>)>;

  // Batches of options.batch_size, in order or shuffled.
  DataLoader(std::shared_ptr<const Dataset<Example>> dataset, Collate collate,
             DataLoaderOptions options = DataLoaderOptions())
      : DataLoader(dataset, std::move(collate), nullptr, options) {}

  // Batches from a batch sampler (e.g. BucketBatchSampler); options.batch_size, shuffle and
  // drop_last must then be left at their defaults, as in PyTorch.
  DataLoader(std::shared_ptr<const Dataset<Example>> dataset, Collate collate,
             std::shared_ptr<const BatchSampler> batch_sampler,
             DataLoaderOptions options = DataLoaderOptions())
      : dataset_(std::move(dataset)), collate_(std::move(collate)),
        batch_sampler_(std::move(batch_sampler)), options_(options) {
    LOOM_CHECK(dataset_ != nullptr, ValueError, "DataLoader: dataset is null");
    LOOM_CHECK(collate_ != nullptr, ValueError, "DataLoader: collate function is empty");
    LOOM_CHECK(options_.prefetch_factor_ > 0, ValueError,
               "DataLoader: prefetch_factor must be positive, got 0");
    LOOM_CHECK(options_.timeout_s_ >= 0, ValueError,
               "DataLoader: timeout must be non-negative, got ", options_.timeout_s_);
    if (batch_sampler_) {
      LOOM_CHECK(options_.batch_size_ == 1 && !options_.shuffle_ && !options_.drop_last_,
                 ValueError,
                 "DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle "
                 "and drop_last (got batch_size=", options_.batch_size_, ", shuffle=",
                 options_.shuffle_, ", drop_last=", options_.drop_last_, ")");
    } else {
      std::shared_ptr<const Sampler> sampler;
      if (options_.shuffle_)
        sampler = std::make_shared<RandomSampler>(dataset_->size(), options_.seed_);
      else
        sampler = std::make_shared<SequentialSampler>(dataset_->size());
      batch_sampler_ = std::make_shared<ChunkBatchSampler>(sampler, options_.batch_size_,
                                                           options_.drop_last_);
    }
    if (options_.pin_memory_ && !cuda::is_available()) {  // as PyTorch: warn, then ignore
      std::cerr << "loom: DataLoader pin_memory ignored: "
                << (built_with_cuda() ? "no CUDA device found" : "Loom was built without CUDA") << "\n";
      options_.pin_memory_ = false;
    }
  }

  // Batches per epoch, as len(loader).
  size_t size() const { return batch_sampler_->num_batches(); }
  const Dataset<Example>& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }

  // The epoch the next pass (begin()) will load; set it to resume a run at that epoch's
  // order.
  uint64_t epoch() const { return epoch_; }
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  // The next pass (begin()) starts at batch k of its epoch's order, the first k neither
  // loaded nor yielded: a run resumed mid-epoch goes on with the batches it had not seen
  // (torchdata's StatefulDataLoader counts the same). Once: the pass after starts at 0.
  // base_seed: the interrupted pass's (base_seed() then), which the resumed one takes
  // instead of drawing a new one, so the main generator — restored from the same
  // checkpoint, after that draw — goes on exactly as in a run never interrupted.
  void set_start_batch(size_t k, std::optional<uint64_t> base_seed = std::nullopt) {
    LOOM_CHECK(k <= size(), ValueError, "DataLoader.set_start_batch: batch ", k, " of an epoch of ", size(),
               " batches");
    start_batch_ = k;
    resumed_base_seed_ = base_seed;
  }
  // The base seed of the pass begun last (Note [worker seeds]); 0 before the first.
  uint64_t base_seed() const { return base_seed_; }

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;

    Iterator() = default;
    Batch& operator*() { return *current_; }
    Batch* operator->() { return &*current_; }
    Iterator& operator++() {
      ++index_;
      fetch();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

   private:
    friend class DataLoader;
    explicit Iterator(detail::EpochRun<Example, Batch>* run) : run_(run) { fetch(); }
    void fetch() {
      current_.reset();
      if (run_ && index_ < run_->size()) {
        // The time the loop waits for its next batch (PyTorch's name for it, which tools
        // such as TensorBoard's profile plugin count as DataLoader time).
        const profiler::ScopedEvent event("enumerate(DataLoader)#DataLoader.__next__", profiler::EventKind::Annotation);
        current_.emplace(run_->take(index_));
      }
    }
    detail::EpochRun<Example, Batch>* run_ = nullptr;
    size_t index_ = 0;
    std::optional<Batch> current_;
  };

  // Starts the next epoch (stopping any earlier pass that is still loading).
  Iterator begin() {
    run_.reset();
    // Drawn with or without workers, as PyTorch does; a resumed pass takes its old one.
    base_seed_ = resumed_base_seed_ ? *resumed_base_seed_ : detail::draw_base_seed();
    Batches batches = batch_sampler_->batches(epoch_++);
    batches.erase(batches.begin(), batches.begin() + int64_t(std::min(start_batch_, batches.size())));
    start_batch_ = 0;
    resumed_base_seed_.reset();
    run_ = std::make_unique<detail::EpochRun<Example, Batch>>(
        std::move(batches), loader_function(), options_.num_workers_, options_.prefetch_factor_,
        options_.timeout_s_, base_seed_, options_.worker_init_fn_);
    return Iterator(run_.get());
  }
  std::default_sentinel_t end() const { return {}; }

 private:
  typename detail::EpochRun<Example, Batch>::Load loader_function() const {
    return [dataset = dataset_, collate = collate_, pin = options_.pin_memory_,
            n = dataset_->size()](const std::vector<size_t>& indices) {
      const profiler::ScopedEvent event("DataLoader.load_batch", profiler::EventKind::Annotation);
      std::vector<Example> examples;
      examples.reserve(indices.size());
      for (size_t i : indices) {
        LOOM_CHECK(i < n, IndexError, "DataLoader: sampler produced index ", i,
                   " for a dataset of size ", n);
        examples.push_back(dataset->get(i));
      }
      Batch batch = collate(std::move(examples));
      if constexpr (requires(Batch& b) { b = b.pin_memory(); }) {
        if (pin) batch = batch.pin_memory();
      }
      return batch;
    };
  }

  std::shared_ptr<const Dataset<Example>> dataset_;
  Collate collate_;
  std::shared_ptr<const BatchSampler> batch_sampler_;
  DataLoaderOptions options_;
  uint64_t epoch_ = 0;
  size_t start_batch_ = 0;
  std::optional<uint64_t> resumed_base_seed_;  // set_start_batch's, for the next pass only
  uint64_t base_seed_ = 0;
  std::unique_ptr<detail::EpochRun<Example, Batch>> run_;
};

// Deduces the example and batch types: make_data_loader(dataset, collate, options).
template <typename D, typename C>
auto make_data_loader(std::shared_ptr<D> dataset, C collate,
                      DataLoaderOptions options = DataLoaderOptions()) {
  using Example = typename D::ExampleType;
  using Batch = std::invoke_result_t<C, std::vector<Example>>;
  return DataLoader<Example, Batch>(std::shared_ptr<const Dataset<Example>>(std::move(dataset)),
                                    std::move(collate), options);
}

template <typename D, typename C>
auto make_data_loader(std::shared_ptr<D> dataset, C collate,
                      std::shared_ptr<const BatchSampler> batch_sampler,
                      DataLoaderOptions options = DataLoaderOptions()) {
  using Example = typename D::ExampleType;
  using Batch = std::invoke_result_t<C, std::vector<Example>>;
  return DataLoader<Example, Batch>(std::shared_ptr<const Dataset<Example>>(std::move(dataset)),
                                    std::move(collate), std::move(batch_sampler), options);
}

}  // namespace loom::data
