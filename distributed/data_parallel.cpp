#include "distributed/data_parallel.h"

#include <algorithm>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/factories.h"

namespace loom::nn::parallel {

namespace {

// One line per parameter, then per buffer: what must agree between ranks.
std::vector<std::string> describe(const Module& module) {
  std::vector<std::string> lines;
  auto add = [&](const char* kind, const NamedTensors& tensors) {
    for (const auto& [name, t] : tensors) {
      std::ostringstream os;
      os << kind << " '" << name << "' " << shape_str(t.sizes()) << " " << dtype_name(t.dtype());
      lines.push_back(os.str());
    }
  };
  add("parameter", module.named_parameters());
  add("buffer", module.named_buffers());
  return lines;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);) lines.push_back(line);
  return lines;
}

}  // namespace

DataParallelBase::DataParallelBase(std::shared_ptr<Module> module, distributed::ProcessGroup& group,
                                   const DistributedDataParallelOptions& options)
    : module_(std::move(module)), group_(group), options_(options) {
  if (!module_) throw ValueError("DistributedDataParallel: the module is null");
  if (!(options.bucket_cap_mb_ > 0))
    throw ValueError(loom::detail::str("DistributedDataParallel: bucket_cap_mb must be positive, got ", options.bucket_cap_mb_));
  check_same_model_on_every_rank();
  broadcast_from_rank0(module_->named_parameters());
  broadcast_from_rank0(module_->named_buffers());

  NamedTensors trainable;
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) trainable.emplace_back(name, p);
  distributed::ReducerOptions reducer_options;
  reducer_options.bucket_cap_bytes = int64_t(options.bucket_cap_mb_ * 1024 * 1024);
  reducer_options.first_bucket_bytes = std::min(reducer_options.first_bucket_bytes, reducer_options.bucket_cap_bytes);
  reducer_options.find_unused_parameters = options.find_unused_parameters_;
  reducer_ = std::make_shared<distributed::Reducer>(std::move(trainable), group_, reducer_options);
  reducer_->install_hooks();
}

// Every rank's description, gathered as int32 character codes (padded to the longest),
// compared line by line with rank 0's: all ranks see the same data and throw the same error.
void DataParallelBase::check_same_model_on_every_rank() const {
  const int world = group_.size();
  if (world == 1) return;
  std::string text;
  for (const std::string& line : describe(*module_)) text += line + "\n";

  const Device device = group_.device();  // NCCL's tensors live on this rank's GPU
  Tensor length = from_vector(std::vector<int64_t>{int64_t(text.size())}).to(device);
  std::vector<Tensor> lengths;
  for (int r = 0; r < world; ++r) lengths.push_back(zeros({1}, TensorOptions(kInt64).device(device)));
  group_.all_gather(lengths, length)->wait();
  std::vector<int64_t> sizes;  // each rank's text length
  for (const Tensor& l : lengths) sizes.push_back(l.to_vector<int64_t>()[0]);
  const int64_t longest = *std::max_element(sizes.begin(), sizes.end());

  std::vector<int32_t> codes(size_t(longest), 0);
  std::copy(text.begin(), text.end(), codes.begin());
  std::vector<Tensor> texts;
  for (int r = 0; r < world; ++r) texts.push_back(zeros({longest}, TensorOptions(kInt32).device(device)));
  group_.all_gather(texts, from_vector(codes, {longest}).to(device))->wait();

  std::vector<std::vector<std::string>> lines;
  for (int r = 0; r < world; ++r) {
    std::vector<int32_t> c = texts[size_t(r)].to_vector<int32_t>();
    std::string s(c.begin(), c.begin() + sizes[size_t(r)]);
    lines.push_back(split_lines(s));
  }
  size_t most = 0;
  for (const auto& l : lines) most = std::max(most, l.size());
  auto line_of = [&](int r, size_t i) { return i < lines[size_t(r)].size() ? lines[size_t(r)][i] : "nothing"; };
  for (size_t i = 0; i < most; ++i) {
    for (int r = 1; r < world; ++r) {
      if (line_of(r, i) == line_of(0, i)) continue;
      throw ValueError(loom::detail::str("DistributedDataParallel: the model differs between ranks at entry ", i,
                                   " of its parameters and buffers: rank 0 has ", line_of(0, i), ", rank ", r,
                                   " has ", line_of(r, i), " (every rank must build the same model)"));
    }
  }
}

void DataParallelBase::broadcast_from_rank0(const NamedTensors& tensors) const {
  if (group_.size() == 1) return;
  std::vector<std::shared_ptr<distributed::Work>> works;
  for (const auto& [name, t] : tensors) works.push_back(group_.broadcast(t, 0));
  for (auto& w : works) w->wait();
  // The collective wrote the tensors in place: say so, as any in-place op does, so that
  // copies keyed by their version (cuDNN's packed weights) are not reused.
  for (const auto& [name, t] : tensors) t.bump_version();
}

void DataParallelBase::before_forward() {
  if (options_.broadcast_buffers_) broadcast_from_rank0(module_->named_buffers());
  if (GradMode::is_enabled() && sync_) reducer_->prepare_for_forward();
}

void DataParallelBase::after_forward(const std::vector<Tensor>& outputs) {
  if (GradMode::is_enabled() && sync_) reducer_->prepare_for_backward(outputs);
}

}  // namespace loom::nn::parallel
