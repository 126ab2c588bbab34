// DataLoader workers seeded as PyTorch seeds them (Note [worker seeds], data/worker_info.h):
// a base seed drawn from the main generator per pass, worker i seeded base_seed + i,
// get_worker_info() and worker_init_fn; random augmentation in the workers the same run
// after run and different between workers and between epochs.
#include <mutex>
#include <set>

#include "data/dataloader.h"
#include "data/worker_info.h"
#include "test_util.h"

using namespace loom;
using namespace loom::data;

namespace {

// One example: its index, the worker that made it (-1: the main thread) and a random draw
// from the thread's default generator (the "augmentation").
struct Sample {
  size_t index;
  int worker;
  float noise;
};
using SampleBatch = std::vector<Sample>;
using SampleLoader = DataLoader<Sample, SampleBatch>;

std::shared_ptr<LambdaDataset<Sample>> augmenting_dataset(size_t n) {
  return std::make_shared<LambdaDataset<Sample>>(n, [](size_t i) {
    const std::optional<WorkerInfo> info = get_worker_info();
    return Sample{i, info ? int(info->id) : -1, rand({1}).item<float>()};
  });
}

// Every sample of `epochs` passes, in order.
std::vector<Sample> run(size_t workers, uint64_t seed, int epochs = 2) {
  manual_seed(seed);
  SampleLoader loader(augmenting_dataset(24), [](std::vector<Sample> s) { return s; },
                      DataLoaderOptions(3).shuffle(true).seed(7).num_workers(workers));
  std::vector<Sample> out;
  for (int e = 0; e < epochs; ++e)
    for (SampleBatch& b : loader) out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::vector<float> noise_of(const std::vector<Sample>& s) {
  std::vector<float> v;
  for (const Sample& x : s) v.push_back(x.noise);
  return v;
}

}  // namespace

TEST_CASE("DataLoader workers: random augmentation is the same run after run and differs across workers",
          "[data][loader][deterministic]") {
  for (size_t workers : {2, 3}) {
    INFO(workers << " workers");
    const std::vector<Sample> a = run(workers, 1), b = run(workers, 1);
    CHECK(noise_of(a) == noise_of(b));  // reproducible, however the threads were scheduled
    // Batch k came from worker k % N, as PyTorch deals batches out.
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].worker == int((i % 24) / 3 % workers));
    // Each worker's draws are its own: no two examples of a pass drew the same number.
    const std::vector<float> noise = noise_of(a);
    for (size_t e = 0; e < 2; ++e)
      CHECK(std::set<float>(noise.begin() + long(e * 24), noise.begin() + long(e * 24 + 24)).size() == 24);
    // A new base seed each pass: epoch 2's first draws differ from epoch 1's.
    CHECK(a[0].noise != a[24].noise);
    // The main generator's seed decides the workers' seeds.
    CHECK(noise_of(run(workers, 2)) != noise_of(a));
  }
}

TEST_CASE("DataLoader workers: worker i draws from base_seed + i, the base drawn from the main generator per pass",
          "[data][loader][deterministic]") {
  manual_seed(5);
  const uint64_t expected_base = data::detail::draw_base_seed();
  CHECK(expected_base < (uint64_t(1) << 63));
  std::mutex mutex;
  std::vector<std::pair<size_t, WorkerInfo>> infos;  // (the id worker_init_fn got, get_worker_info())
  manual_seed(5);
  const Generator& main = default_generator();
  const uint64_t offset_before = main.offset();
  SampleLoader loader(augmenting_dataset(9), [](std::vector<Sample> s) { return s; },
                      DataLoaderOptions(1).num_workers(3).worker_init_fn([&](size_t id) {
                        const std::lock_guard<std::mutex> lock(mutex);
                        infos.emplace_back(id, get_worker_info().value_or(WorkerInfo{99, 0, 0}));
                      }));
  std::vector<Sample> seen;
  for (SampleBatch& b : loader) seen.insert(seen.end(), b.begin(), b.end());
  CHECK(main.offset() == offset_before + 1);  // one draw for the pass, none by the workers
  REQUIRE(infos.size() == 3);
  for (const auto& [id, info] : infos) {
    CHECK(info.id == id);
    CHECK(info.num_workers == 3);
    CHECK(info.seed == expected_base + info.id);
    // Worker i's first example is example i: its draw is the first of a generator seeded base + i.
    manual_seed(info.seed);
    CHECK(seen[info.id].noise == rand({1}).item<float>());
  }
  CHECK_FALSE(get_worker_info().has_value());  // not a worker here

  // Without workers: the pass still draws its base seed (the main stream advances alike), and
  // the examples draw from the main generator.
  manual_seed(5);
  SampleLoader serial(augmenting_dataset(4), [](std::vector<Sample> s) { return s; }, DataLoaderOptions(2));
  std::vector<Sample> main_thread;
  for (SampleBatch& b : serial) main_thread.insert(main_thread.end(), b.begin(), b.end());
  manual_seed(5);
  (void)data::detail::draw_base_seed();
  for (const Sample& s : main_thread) {
    CHECK(s.worker == -1);
    CHECK(s.noise == rand({1}).item<float>());
  }
}

TEST_CASE("DataLoader workers: a failing worker_init_fn fails that worker's batches", "[data][loader]") {
  SampleLoader loader(augmenting_dataset(6), [](std::vector<Sample> s) { return s; },
                      DataLoaderOptions(1).num_workers(2).worker_init_fn([](size_t id) {
                        LOOM_CHECK(id != 1, ValueError, "worker_init_fn: no GPU for worker ", id);
                      }));
  size_t before = 0;
  try {
    for (SampleBatch& b : loader) {
      (void)b;
      ++before;
    }
    FAIL("expected a WorkerError");
  } catch (const WorkerError& e) {
    CHECK(std::string(e.what()).find("no GPU for worker 1") != std::string::npos);
    CHECK(std::string(e.what()).find("batch 1") != std::string::npos);
  }
  CHECK(before == 1);  // batch 0, from worker 0
}

TEST_CASE("DataLoader: a pass resumed mid-epoch takes the interrupted pass's base seed and draws none",
          "[data][loader][deterministic]") {
  // An uninterrupted pass over 8 batches of 1 (no workers: the examples draw from the main
  // generator), and one stopped after 3 batches whose generator and base seed a checkpoint
  // kept: the resumed pass yields the same draws for the 5 batches left.
  manual_seed(11);
  SampleLoader whole(augmenting_dataset(8), [](std::vector<Sample> s) { return s; }, DataLoaderOptions(1));
  std::vector<Sample> reference;
  for (SampleBatch& b : whole) reference.insert(reference.end(), b.begin(), b.end());
  const uint64_t base = whole.base_seed(), end_offset = default_generator().offset();

  manual_seed(11);
  SampleLoader first(augmenting_dataset(8), [](std::vector<Sample> s) { return s; }, DataLoaderOptions(1));
  size_t taken = 0;
  for (SampleBatch& b : first) {
    (void)b;
    if (++taken == 3) break;
  }
  CHECK(first.base_seed() == base);
  const uint64_t saved_seed = default_generator().seed(), saved_offset = default_generator().offset();  // checkpointed

  SampleLoader resumed(augmenting_dataset(8), [](std::vector<Sample> s) { return s; }, DataLoaderOptions(1));
  default_generator().set_state(saved_seed, saved_offset);
  resumed.set_start_batch(3, base);
  std::vector<Sample> rest;
  for (SampleBatch& b : resumed) rest.insert(rest.end(), b.begin(), b.end());
  CHECK(resumed.base_seed() == base);
  REQUIRE(rest.size() == 5);
  for (size_t i = 0; i < rest.size(); ++i) {
    CHECK(rest[i].index == reference[3 + i].index);
    CHECK(rest[i].noise == reference[3 + i].noise);
  }
  CHECK(default_generator().offset() == end_offset);  // the 5 examples' draws, no base seed drawn

  // Without the old seed the resumed pass draws a new one: the draws shift (what broke resumes).
  default_generator().set_state(saved_seed, saved_offset);
  SampleLoader redrawn(augmenting_dataset(8), [](std::vector<Sample> s) { return s; }, DataLoaderOptions(1));
  redrawn.set_start_batch(3);
  std::vector<Sample> shifted;
  for (SampleBatch& b : redrawn) shifted.insert(shifted.end(), b.begin(), b.end());
  CHECK(shifted[0].noise != reference[3].noise);
}
