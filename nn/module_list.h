// nn::ModuleList: modules held in order, named "0", "1", ... as torch.nn.ModuleList; the
// owner calls them as it likes (a Transformer's stack of layers).
//   nn::ModuleList blocks;  blocks->push_back(nn::Linear(4, 4));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace loom::nn {

class ModuleListImpl : public Module {
 public:
  ModuleListImpl() : Module("ModuleList") {}
  template <typename Holder>
  void push_back(Holder module) {
    register_module(std::to_string(modules_.size()), module);
    modules_.push_back(module.ptr());
  }
  size_t size() const { return modules_.size(); }
  // The i-th module as its type (IndexError past the end, ValueError for another type).
  template <typename Impl>
  std::shared_ptr<Impl> at(size_t i) const {
    LOOM_CHECK(i < modules_.size(), IndexError, "ModuleList: index ", i, " of a list of ", modules_.size());
    auto m = std::dynamic_pointer_cast<Impl>(modules_[i]);
    LOOM_CHECK(m != nullptr, ValueError, "ModuleList: module ", i, " is a ", modules_[i]->type_name());
    return m;
  }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
using ModuleList = ModuleHolder<ModuleListImpl>;

}  // namespace loom::nn
