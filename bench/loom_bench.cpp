// Training-step benchmark of the nn/optim layer: the workloads of shared/workloads.md, built
// from Loom's nn modules, one JSON line per workload (the contract of torch_workloads.py,
// which runs the same models in PyTorch):
//
//   loom-bench [--device cpu|cuda] [--steps N] [--threads N] [--amp bf16|fp16] [--flush-denormal]
//              [--float-gemm onednn|eigen] [--cuda-graph] [--deterministic off|on|both]
//              [--checkpoint-activations] [--checkpoint-blocks] [--checkpoint-keep-attention] [--layers N]
//              [--checkpoint-every K] [--profile DIR] [--batch N] [--seq-len N] [WORKLOAD ...]
//
//   seed-rnn        RNN(10→20, tanh) → last step → Linear(20,1), MSE        64 × 10
//   embed-mean      Embedding(10000,128) → mean over time → Linear(128,2)    64 × 256
//   lstm-sentiment  Embedding(20000,128) → LSTM(128→256) → last → Linear     64 × 256
//   lstm-2x512      Embedding(20000,512) → 2-layer LSTM(512→512) → last → Linear  64 × 100
//   transformer-small Embedding(20000,256) + positions → 2 post-norm encoder layers (d 256, 4 heads, ff 1024) → mean → Linear  32 × 128
//   transformer-1k  the Transformer example's model (examples/transformer_classification_model.h:
//                   d 64, 4 heads, ff 128, 2 pre-norm layers, dropout 0.1) at sequence 1,024  8 × 1024
//   lstm-sentiment-ddp  lstm-sentiment per rank, under DistributedDataParallel (run by loomrun; not in "all")
// (transformer-1k, too, runs only when named.)
//
// One step = zero_grad, forward, loss, backward, Adam(lr=1e-3) step on one fixed random
// batch; ms_per_step is the median of the measured steps after two warm-up steps.
// Fields: workload, framework, device, threads, steps, ms_per_step, tokens_per_s, loss (of
// the last step), peak_mem_bytes (high-water mark of live tensor storage allocated through
// Loom's allocator while the workload ran: parameters, gradients, Adam state, activations;
// left out where no allocator is registered yet), peak_rss_bytes (the process's peak resident
// set from getrusage: everything so far in this process, libraries included), load1 (the
// 1-minute load average when the workload ended: the machines are shared, so read figures
// beside it), flush_denormal and float_gemm (the CPU's float32 GEMM, Note [GEMM dispatch]),
// and under --amp bf16 on the CPU bf16_gemm (the bfloat16 GEMM's kernel, Note [bfloat16 GEMM]).
//
// --amp runs forward and loss under amp::AutocastGuard(device, dtype), as torch.autocast
// (fp16 adds a GradScaler), as shared/peers/torch_workloads.py does; the JSON line says which.
// --flush-denormal sets the CPU's flush-to-zero and denormals-are-zero modes on every thread
// (as torch.set_flush_denormal(True)). Off by default, as in PyTorch. The LSTM backward
// passes a gradient that decays over 256 steps into denormal floats, which make every GEMM
// that reads them many times slower (docs/benchmarks.md).
// --cuda-graph replays each step as a CUDA graph (train::GraphedStep: captured on the second
// warm-up step); "cuda_graph" in the JSON line says whether the measured steps were replays
// (false where capture was refused: the reason goes to stderr).
// --deterministic on runs every workload under loom::use_deterministic_algorithms(true) (Note
// [deterministic algorithms]); both runs each workload twice in a row, off then on, in one
// process: the mode's cost measured on the same binary, side by side. "deterministic" in the
// JSON line says which.
// --checkpoint-activations builds the Transformer workloads' encoders with checkpoint_layers
// (each layer's activations recomputed in backward, loom::checkpoint): against a run without,
// peak_mem_bytes shows the memory saved, ms_per_step the recomputation's cost.
// --checkpoint-blocks checkpoints each layer's two residual blocks (self-attention,
// feed-forward) as separate segments instead (checkpoint_blocks); with both flags, the blocks'
// checkpoints nest in each layer's. --layers N gives the Transformer workloads' encoders N
// layers instead of 2 (the ratio against depth).
// --checkpoint-keep-attention, with any of them, keeps each attention's output through the
// checkpoint instead of recomputing it (checkpoint_keep_attention).
// --checkpoint-every K builds the LSTM workloads' layers with RNNOptions::checkpoint_every(K)
// (activations recomputed in backward K time steps at a time); "checkpoint_every" in the
// JSON line says which (0: off).
// --float-gemm eigen runs the CPU's float32 products on Eigen instead of oneDNN (the default),
// for the comparison in docs/benchmarks.md.
// --batch N and --seq-len N replace every named workload's batch size and sequence length
// (the sizes above), as torch_workloads.py's flags of the same names: how a step's cost grows
// (bench/scaling.sh). The JSON line's batch and seq_len say what ran.
// --profile DIR records the measured steps with profiler::Profile (memory too) and writes, per
// workload, <workload>.<ms>.pt.trace.json (TensorBoard's profile plugin, Chrome, Perfetto), the
// .timeline.html page and the .key_averages.txt table into DIR; the table goes to stderr, and
// the JSON line gains profile_events_per_step, profile_named_fraction (the share of the steps'
// wall time inside named events, StepCoverage) and, on a GPU, profile_gpu_ms_per_step (the GPU
// time of a step's ops). Its ms_per_step is then the profiled steps' (docs/profiling.md measures
// the profiler's cost with it).
#include <cxxabi.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "bench/bench_util.h"
#include "core/allocator.h"
#include "core/cuda_emulation.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "loom.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/rnn.h"
#include "optim/adam.h"
#include "train/loop/graphed_step.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

using namespace loom;

namespace {

constexpr int kWarmupSteps = 2;

// ---- peak tensor memory ------------------------------------------------------------------

// Wraps the allocator of one device type and keeps the live and peak bytes of the storages it
// handed out. Installed once for the whole run, so every tensor of a workload is counted;
// costs one small heap record per storage.
class CountingAllocator final : public Allocator {
 public:
  explicit CountingAllocator(DeviceType type) : inner_(get_allocator(type)) {}

  DataPtr allocate(size_t nbytes, Device device) override {
    DataPtr inner = inner_->allocate(nbytes, device);
    if (!inner.get()) return inner;  // empty storages own nothing and are never freed
    void* ptr = inner.get();
    auto* record = new Record{std::move(inner), nbytes, this};
    const int64_t live = live_ += int64_t(nbytes);
    int64_t peak = peak_.load();
    while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
    }
    return DataPtr(ptr, record, &release, device);
  }

  // Starts a new high-water mark from the bytes live now; peak_since_reset() is then the
  // most that was live at once above that baseline.
  void reset_peak() {
    baseline_ = live_.load();
    peak_ = baseline_;
  }
  int64_t peak_since_reset() const { return peak_.load() - baseline_; }

 private:
  struct Record {
    DataPtr inner;  // frees the memory through the wrapped allocator when deleted
    size_t nbytes;
    CountingAllocator* owner;
  };
  static void release(void* ctx, void*) {
    auto* record = static_cast<Record*>(ctx);
    record->owner->live_ -= int64_t(record->nbytes);
    delete record;
  }

  Allocator* inner_;
  std::atomic<int64_t> live_{0}, peak_{0};
  int64_t baseline_ = 0;
};

// Installs the counter for `device`'s type (once; it lives as long as the process, so it
// outlives every tensor). Null when the device type has no allocator registered yet: then
// peak_mem_bytes is left out.
CountingAllocator* count_allocations(Device device) {
  static CountingAllocator* counters[2] = {nullptr, nullptr};
  CountingAllocator*& c = counters[size_t(device.type)];
  if (!c && get_allocator(device.type)) {
    c = new CountingAllocator(device.type);
    set_allocator(device.type, c);
  }
  return c;
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) * 1024;  // KiB on Linux
}

// Flush-to-zero and denormals-are-zero on this thread, and so on every worker: parallel_for
// runs its chunks with the caller's MXCSR (Note [a pool for a busy machine]).
void flush_denormals() {
#if defined(__SSE__)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
#else
  throw ValueError("--flush-denormal is only implemented for x86 (SSE) CPUs");
#endif
}

// ---- the models (names of submodules as in torch_workloads.py) -------------------------------

// "Last step" of a batch_first output (B, T, H) -> (B, H).
Tensor last_step(const Tensor& output) { return output.select(1, output.size(1) - 1); }

struct SeedRNN : nn::Module {
  SeedRNN()
      : rnn(register_module("rnn", nn::RNN(nn::RNNOptions(10, 20).batch_first(true)))),
        fc(register_module("fc", nn::Linear(20, 1))) {}
  Tensor forward(const Tensor& x) { return fc(last_step(rnn(x).output)); }  // (B, T, 10) -> (B, 1)
  nn::RNN rnn;
  nn::Linear fc;
};

struct EmbedMean : nn::Module {
  EmbedMean()
      : emb(register_module("emb", nn::Embedding(10000, 128))), fc(register_module("fc", nn::Linear(128, 2))) {}
  Tensor forward(const Tensor& tokens) { return fc(emb(tokens).mean(1)); }  // (B, T) -> (B, 2)
  nn::Embedding emb;
  nn::Linear fc;
};

// --checkpoint-every K: the LSTM workloads recompute their activations K steps at a time.
int64_t checkpoint_every = 0;

struct LSTMClassifier : nn::Module {
  LSTMClassifier(int64_t vocab, int64_t dim, int64_t hidden, int64_t layers)
      : emb(register_module("emb", nn::Embedding(vocab, dim))),
        lstm(register_module("lstm", nn::LSTM(nn::RNNOptions(dim, hidden).num_layers(layers).batch_first(true)
                                                  .checkpoint_every(checkpoint_every)))),
        fc(register_module("fc", nn::Linear(hidden, 2))) {}
  Tensor forward(const Tensor& tokens) { return fc(last_step(lstm(emb(tokens)).output)); }  // (B, T) -> (B, 2)
  nn::Embedding emb;
  nn::LSTM lstm;
  nn::Linear fc;
};

// --checkpoint-activations: the Transformer workloads recompute each layer in backward.
// --checkpoint-blocks: each layer's two blocks instead. --layers: the encoders' depth.
bool checkpoint_activations = false, checkpoint_blocks = false, checkpoint_keep_attention = false;
int64_t encoder_layers = 2;

struct TransformerClassifier : nn::Module {
  // The defaults: transformer-small's post-norm encoder.
  TransformerClassifier(int64_t seq = 128, int64_t d = 256, int64_t ff = 1024, double dropout = 0.0,
                        bool norm_first = false)
      : emb(register_module("emb", nn::Embedding(20000, d))),
        pos(register_parameter("pos", randn({seq, d}) * 0.02)),
        enc(register_module("enc", nn::TransformerEncoder(nn::TransformerEncoderOptions(
                                                              nn::TransformerEncoderLayerOptions(d, 4)
                                                                  .dim_feedforward(ff)
                                                                  .dropout(dropout)
                                                                  .batch_first(true)
                                                                  .norm_first(norm_first),
                                                              encoder_layers)
                                                              .checkpoint_layers(checkpoint_activations)
                                                              .checkpoint_blocks(checkpoint_blocks)
                                                              .checkpoint_keep_attention(checkpoint_keep_attention)))),
        fc(register_module("fc", nn::Linear(d, 2))) {}
  Tensor forward(const Tensor& tokens) {  // (B, T) -> (B, 2)
    const Tensor x = emb(tokens) + pos;    // (B, T, d); emb's output is not held through the encoder
    return fc(enc(x).mean(1));
  }
  nn::Embedding emb;
  Tensor pos;  // (T, d) learned positions
  nn::TransformerEncoder enc;
  nn::Linear fc;
};

// A model on its device with its fixed batch: loss(inputs) runs the forward pass and the
// loss on the batch's tensors (inputs, or the static copies a CUDA graph replays).
struct Task {
  std::shared_ptr<nn::Module> model;
  std::vector<Tensor> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> loss;
};

// Random token batch (B, T) in [0, vocab) and labels (B) in {0, 1}.
template <typename Model>
Task classifier(std::shared_ptr<Model> model, int64_t vocab, int64_t B, int64_t T, Device device) {
  model->to(device);
  const Tensor x = randint(0, vocab, {B, T}).to(device), y = randint(0, 2, {B}).to(device);
  return {model, {x, y}, [model](const std::vector<Tensor>& in) {
            return nn::functional::cross_entropy(model->forward(in[0]), in[1]);
          }};
}

struct Workload {
  const char* name;
  int64_t batch, seq;
  int default_steps;  // as torch_workloads.py
  std::function<Task(Device, int64_t batch, int64_t seq)> make;
  bool data_parallel = false;  // one rank of a loomrun job: batch and seq are per rank
  bool in_all = true;          // run when no workload is named
};

// lstm-sentiment-ddp: lstm-sentiment as one rank of DistributedDataParallel (gloo), under
// `loomrun --nproc-per-node N loom-bench --threads 1 lstm-sentiment-ddp`; each rank draws its
// own batch. Against N = 1 this measures the scaling (bench/ddp_scaling.sh).
Task data_parallel_classifier(Device device, int64_t batch, int64_t seq) {
  if (!distributed::is_initialized()) distributed::init_process_group(device.is_cuda() ? "nccl" : "gloo");
  auto model = std::make_shared<LSTMClassifier>(20000, 128, 256, 1);
  model->to(device);
  auto ddp = std::make_shared<nn::parallel::DistributedDataParallel<std::shared_ptr<LSTMClassifier>>>(model);
  manual_seed(1 + uint64_t(distributed::get_rank()));
  const Tensor x = randint(0, 20000, {batch, seq}).to(device), y = randint(0, 2, {batch}).to(device);
  return {model, {x, y}, [ddp](const std::vector<Tensor>& in) { return nn::functional::cross_entropy((*ddp)(in[0]), in[1]); }};
}

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> all = {
      {"seed-rnn", 64, 10, 200,
       [](Device device, int64_t B, int64_t T) {
         auto model = std::make_shared<SeedRNN>();
         model->to(device);
         const Tensor x = randn({B, T, 10}).to(device), y = randn({B, 1}).to(device);
         return Task{model, {x, y}, [model](const std::vector<Tensor>& in) {
                       return nn::functional::mse_loss(model->forward(in[0]), in[1]);
                     }};
       }},
      {"embed-mean", 64, 256, 50,
       [](Device device, int64_t B, int64_t T) { return classifier(std::make_shared<EmbedMean>(), 10000, B, T, device); }},
      {"lstm-sentiment", 64, 256, 5,
       [](Device device, int64_t B, int64_t T) {
         return classifier(std::make_shared<LSTMClassifier>(20000, 128, 256, 1), 20000, B, T, device);
       }},
      {"lstm-2x512", 64, 100, 3,
       [](Device device, int64_t B, int64_t T) {
         return classifier(std::make_shared<LSTMClassifier>(20000, 512, 512, 2), 20000, B, T, device);
       }},
      {"transformer-small", 32, 128, 10,
       [](Device device, int64_t B, int64_t T) {
         return classifier(std::make_shared<TransformerClassifier>(T), 20000, B, T, device);
       }},
      {"transformer-1k", 8, 1024, 3,
       [](Device device, int64_t B, int64_t T) {
         return classifier(std::make_shared<TransformerClassifier>(T, 64, 128, 0.1, /*norm_first=*/true), 20000, B, T,
                           device);
       },
       /*data_parallel=*/false, /*in_all=*/false},
      {"lstm-sentiment-ddp", 64, 256, 5, data_parallel_classifier, /*data_parallel=*/true, /*in_all=*/false},
  };
  return all;
}

// ---- running -----------------------------------------------------------------------------------

// The measured steps under a Profile: the first kWarmupSteps calls of step() are waited out, the
// next `steps` recorded, each a ProfilerStep#N.
std::unique_ptr<profiler::Profile> start_profile(const std::string& dir, int steps) {
  if (dir.empty()) return nullptr;
  return std::make_unique<profiler::Profile>(profiler::ProfileOptions{
      .profile_memory = true, .schedule = profiler::Schedule{.wait = kWarmupSteps, .active = steps}});
}

// Writes the profile's files and table; the JSON fields that report it.
std::string finish_profile(profiler::Profile& prof, const std::string& dir, const Workload& w, int steps) {
  prof.stop();
  const std::string worker =
      w.data_parallel ? std::string(w.name) + "_rank" + std::to_string(distributed::get_rank()) : std::string(w.name);
  profiler::tensorboard_trace_handler(dir, worker)(prof);
  const profiler::KeyAverages averages = prof.key_averages();
  std::fprintf(stderr, "loom-bench: %s profile (%s)\n%s", w.name, dir.c_str(),
               averages.table({.sort_by = "self_cpu_time_total", .row_limit = 25}).c_str());
  size_t events = 0;
  for (const profiler::Event& e : prof.events().events) events += e.kind != profiler::EventKind::Step;
  char fields[200];
  const int n = std::snprintf(fields, sizeof fields, ",\"profile_events_per_step\":%.1f,\"profile_named_fraction\":%.4f",
                              double(events) / steps, averages.steps().fraction());
  if (averages.steps().gpu_ns > 0)
    std::snprintf(fields + n, sizeof fields - size_t(n), ",\"profile_gpu_ms_per_step\":%.3f",
                  double(averages.steps().gpu_ns) / 1e6 / steps);
  return fields;
}

// What the command line asks of every workload's run.
struct RunOptions {
  int steps = 0;  // 0: the workload's default
  bool flush_denormal = false;
  std::string amp;          // "", "bf16" or "fp16"
  bool cuda_graph = false;  // --cuda-graph
  std::string profile_dir;  // --profile DIR; empty: not profiled
  std::vector<bool> deterministic{false};  // --deterministic: the modes each workload runs under
  int64_t batch = 0, seq = 0;  // --batch, --seq-len; 0: the workload's own
};

void run(const Workload& w, Device device, const RunOptions& options) {
  const std::string& amp = options.amp;
  const bool flush_denormal = options.flush_denormal;
  const int steps = options.steps > 0 ? options.steps : w.default_steps;
  const int64_t batch = options.batch > 0 ? options.batch : w.batch, seq = options.seq > 0 ? options.seq : w.seq;
  CountingAllocator* memory = count_allocations(device);
  // cuBLAS's handle and workspace are made on the first GEMM: make them now, so that the
  // first workload is not charged for them (peak_mem_bytes counts the workload's tensors).
  if (device.is_cuda()) {
    const Tensor a = ones({2, 2}, TensorOptions().device(device));
    (void)matmul(a, a).sum().item<double>();
  }
  if (memory) memory->reset_peak();
  manual_seed(0);
  Task task = w.make(device, batch, seq);
  // Graphed, Adam keeps its step counts and learning rate on the device (capturable): the
  // replays would otherwise repeat the captured step's bias correction.
  optim::Adam adam(task.model->parameters(), optim::AdamOptions(1e-3).capturable(options.cuda_graph && device.is_cuda()));
  const std::optional<DType> amp_dtype =
      amp == "bf16" ? std::optional<DType>(kBFloat16) : amp == "fp16" ? std::optional<DType>(kFloat16) : std::nullopt;
  amp::GradScaler scaler({.enabled = amp == "fp16"});
  std::unique_ptr<profiler::Profile> prof = start_profile(options.profile_dir, steps);
  // --cuda-graph: the step is captured on the second warm-up step and replayed from then on
  // (train::GraphedStep); where it cannot be, it runs eagerly and says why on stderr.
  train::GraphedStep step(
      [&](const std::vector<Tensor>& in) {
        adam.zero_grad();
        Tensor l;
        {
          amp::AutocastGuard autocast(device, amp_dtype, /*enabled=*/amp_dtype.has_value());
          l = task.loss(in);
        }
        scaler.scale(l).backward();
        scaler.step(adam);
        scaler.update();
        return l;
      },
      train::GraphedStepOptions().with_enabled(options.cuda_graph).with_warmup_steps(kWarmupSteps - 1));
  double loss = 0;
  int calls = 0;
  const double seconds = bench::median_seconds(
      [&] {
        // A profiled step ends when the next begins (so the last one's writing is outside the timings).
        if (prof && calls++ > 0) prof->step();
        loss = step(task.inputs).item<double>();  // on CUDA this copy waits for the step's kernels
      },
      kWarmupSteps, steps);
  // The fields only some runs have: peak_mem_bytes, and the data-parallel ones.
  std::string optional_fields =
      memory ? ",\"peak_mem_bytes\":" + std::to_string(memory->peak_since_reset()) : std::string();
  if (prof) optional_fields += finish_profile(*prof, options.profile_dir, w, steps);
  // The bfloat16 GEMM kernel the step's autocast products ran on (Note [bfloat16 GEMM]).
  if (amp == "bf16" && device.is_cpu())
    optional_fields += std::string(",\"bf16_gemm\":\"") +
                       kernels::cpu::bf16_gemm_kernel_name(kernels::cpu::bf16_gemm_kernel()) + "\"";
  // A data-parallel step is every rank's: rank 0 reports, with the samples of all ranks.
  const int ranks = w.data_parallel ? distributed::get_world_size() : 1;
  if (w.data_parallel && distributed::get_rank() != 0) return;
  if (w.data_parallel) {
    optional_fields += ",\"ranks\":" + std::to_string(ranks) + ",\"per_rank_batch\":" + std::to_string(batch) +
                ",\"samples_per_s\":" + std::to_string(double(ranks * batch) / seconds);
  }
  std::printf(
      "{\"workload\":\"%s\",\"framework\":\"loom\",\"device\":\"%s\",\"threads\":%d,\"steps\":%d,"
      "\"ms_per_step\":%.3f,\"tokens_per_s\":%.1f,\"loss\":%.9f%s,\"peak_rss_bytes\":%lld,\"load1\":%.2f,"
      "\"flush_denormal\":%s,\"amp\":\"%s\",\"float_gemm\":\"%s\",\"cuda_graph\":%s,\"deterministic\":%s,"
      "\"checkpoint_activations\":%s,\"checkpoint_blocks\":%s,\"checkpoint_keep_attention\":%s,\"encoder_layers\":%lld,"
      "\"checkpoint_every\":%lld,\"batch\":%lld,\"seq_len\":%lld}\n",
      w.name, (device.str() + (device.is_cuda() && cuda::emulated() ? " (emulated on the host)" : "")).c_str(),
      get_num_threads(), steps, seconds * 1e3, double(ranks * batch * seq) / seconds,
      loss, optional_fields.c_str(), static_cast<long long>(peak_rss_bytes()), bench::load1(), flush_denormal ? "true" : "false",
      amp.empty() ? "off" : amp.c_str(), kernels::cpu::float_gemm_name(kernels::cpu::float_gemm()),
      step.last_replayed() ? "true" : "false", are_deterministic_algorithms_enabled() ? "true" : "false",
      checkpoint_activations ? "true" : "false", checkpoint_blocks ? "true" : "false",
      checkpoint_keep_attention ? "true" : "false",
      static_cast<long long>(encoder_layers), static_cast<long long>(checkpoint_every), static_cast<long long>(batch),
      static_cast<long long>(seq));
  std::fflush(stdout);
}

const Workload* find_workload(const std::string& name) {
  for (const Workload& w : workloads())
    if (name == w.name) return &w;
  return nullptr;
}

std::string known_workloads() {
  std::string s;
  for (const Workload& w : workloads()) s += (s.empty() ? "" : ", ") + std::string(w.name);
  return s;
}

// "DeviceError" for a loom::DeviceError.
std::string error_kind(const Error& e) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string s = status == 0 ? name : "Error";
  std::free(name);
  return s.substr(s.rfind(':') + 1);
}

[[noreturn]] void usage(const char* argv0, const std::string& problem) {
  std::fprintf(stderr,
               "loom-bench: %s\nusage: %s [--device cpu|cuda] [--steps N] [--threads N] [--amp bf16|fp16] [--flush-denormal]\n"
               "       [--float-gemm onednn|eigen] [--cuda-graph] [--deterministic off|on|both] [--checkpoint-activations]\n"
               "       [--checkpoint-blocks] [--checkpoint-keep-attention] [--layers N] [--checkpoint-every K]\n"
               "       [--profile DIR] [--batch N] [--seq-len N] [WORKLOAD ...]\n"
               "workloads: %s (default: all)\n",
               problem.c_str(), argv0, known_workloads().c_str());
  std::exit(2);
}

int positive_int(const char* flag, const char* value, const char* argv0) {
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*value == '\0' || *end != '\0' || n < 1 || n > 1000000)
    usage(argv0, std::string(flag) + " expects a positive integer, got '" + value + "'");
  return int(n);
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cpu";
  int threads = 0;
  RunOptions options;
  std::vector<const Workload*> selected;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--device" && has_value) {
      device_name = argv[++i];
    } else if (arg == "--steps" && has_value) {
      options.steps = positive_int("--steps", argv[++i], argv[0]);
    } else if (arg == "--threads" && has_value) {
      threads = positive_int("--threads", argv[++i], argv[0]);
    } else if (arg == "--amp" && has_value) {
      options.amp = argv[++i];
      if (options.amp != "bf16" && options.amp != "fp16")
        usage(argv[0], "--amp expects bf16 or fp16, got '" + options.amp + "'");
    } else if (arg == "--flush-denormal") {
      options.flush_denormal = true;
    } else if (arg == "--deterministic" && has_value) {
      const std::string m = argv[++i];
      if (m != "off" && m != "on" && m != "both") usage(argv[0], "--deterministic expects off, on or both, got '" + m + "'");
      options.deterministic = m == "both" ? std::vector<bool>{false, true} : std::vector<bool>{m == "on"};
    } else if (arg == "--checkpoint-activations") {
      checkpoint_activations = true;
    } else if (arg == "--checkpoint-every" && has_value) {
      checkpoint_every = positive_int("--checkpoint-every", argv[++i], argv[0]);
    } else if (arg == "--checkpoint-blocks") {
      checkpoint_blocks = true;
    } else if (arg == "--checkpoint-keep-attention") {
      checkpoint_keep_attention = true;
    } else if (arg == "--layers" && has_value) {
      encoder_layers = positive_int("--layers", argv[++i], argv[0]);
    } else if (arg == "--cuda-graph") {
      options.cuda_graph = true;
    } else if (arg == "--float-gemm" && has_value) {
      const std::string g = argv[++i];
      if (g != "onednn" && g != "eigen") usage(argv[0], "--float-gemm expects onednn or eigen, got '" + g + "'");
      kernels::cpu::force_float_gemm(g == "eigen" ? kernels::cpu::FloatGemm::Eigen : kernels::cpu::FloatGemm::OneDnn);
    } else if (arg == "--batch" && has_value) {
      options.batch = positive_int("--batch", argv[++i], argv[0]);
    } else if (arg == "--seq-len" && has_value) {
      options.seq = positive_int("--seq-len", argv[++i], argv[0]);
    } else if (arg == "--profile" && has_value) {
      options.profile_dir = argv[++i];
    } else if (arg == "-h" || arg == "--help") {
      usage(argv[0], "the training-step benchmarks of shared/workloads.md");
    } else if (const Workload* w = find_workload(arg)) {
      selected.push_back(w);
    } else {
      usage(argv[0], "unknown argument or workload '" + arg + "'");
    }
  }
  if (selected.empty())
    for (const Workload& w : workloads())
      if (w.in_all) selected.push_back(&w);  // the DDP one runs under loomrun, transformer-1k by name

  try {
    const Device device(device_name);
    // (LOOM_EMULATE_CUDA=1 lets a CPU build run the cuda path, to test it: CPU speeds.)
    LOOM_CHECK(!device.is_cuda() || built_with_cuda() || cuda::emulated(), DeviceError, "--device ", device_name,
               ": Loom was built without CUDA support (configure with -DLOOM_ENABLE_CUDA=ON or the 'cuda' preset)");
    if (threads > 0) set_num_threads(threads);
    if (options.flush_denormal) flush_denormals();
    for (const Workload* w : selected) {
      for (bool mode : options.deterministic) {
        use_deterministic_algorithms(mode);
        run(*w, device, options);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "loom-bench: %s: %s\n", error_kind(e).c_str(), e.what());
    return 1;
  }
  return 0;
}
