// Dataset: the indexable source a DataLoader draws from, as torch.utils.data.Dataset.
//
// A dataset answers size() and get(i); get must be safe to call from several threads at
// once (the DataLoader's workers do), which it is for any dataset that only reads its own
// members. The example type is the dataset's choice: a struct of token ids and a label, a
// (window, target) pair of tensors, ...; a collate function turns a vector of them into a
// batch.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "core/error.h"

namespace loom::data {

template <typename Example>
class Dataset {
 public:
  using ExampleType = Example;
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual Example get(size_t index) const = 0;
};

// A dataset over a vector of examples already in memory.
template <typename Example>
class VectorDataset : public Dataset<Example> {
 public:
  explicit VectorDataset(std::vector<Example> examples) : examples_(std::move(examples)) {}
  size_t size() const override { return examples_.size(); }
  Example get(size_t index) const override {
    LOOM_CHECK(index < examples_.size(), IndexError, "VectorDataset::get: index ", index,
               " out of range for a dataset of size ", examples_.size());
    return examples_[index];
  }
  const std::vector<Example>& examples() const { return examples_; }

 private:
  std::vector<Example> examples_;
};

// A dataset computed on demand: get(i) calls fn(i).
template <typename Example>
class LambdaDataset : public Dataset<Example> {
 public:
  LambdaDataset(size_t size, std::function<Example(size_t)> fn) : size_(size), fn_(std::move(fn)) {}
  size_t size() const override { return size_; }
  Example get(size_t index) const override { return fn_(index); }

 private:
  size_t size_;
  std::function<Example(size_t)> fn_;
};

}  // namespace loom::data
