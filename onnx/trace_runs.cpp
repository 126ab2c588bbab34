#include "onnx/trace_runs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_set>

namespace loom::onnx {
namespace {

// What the comparison keeps of a run at grown sizes (its tensors are dropped).
struct RunSummary {
  struct Op {
    std::string op, path;
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<int64_t> ranks;  // each output's
    // Each input no traced tensor reaches (a constant of the graph): its shape, and its values
    // where it is small; empty for a traced input.
    std::vector<std::pair<Shape, std::vector<double>>> constants;
  };
  std::vector<Op> ops;
  std::vector<Shape> outputs;
};

RunSummary summarize(const GraphTracer& tracer, const std::vector<Tensor>& outputs) {
  RunSummary s;
  std::unordered_set<const TensorImpl*> made;  // the recorded ops' outputs: nodes of the graph, not constants
  for (const TracedOp& t : tracer.ops()) {
    RunSummary::Op o{t.record.op, t.path, t.record.ints, t.record.floats, {}, {}};
    for (const Tensor& out : t.record.outputs) o.ranks.push_back(out.defined() ? out.dim() : -1);
    for (const Tensor& in : t.record.inputs) {
      auto& c = o.constants.emplace_back();
      if (!in.defined() || tracer.is_traced(in) || made.count(in.impl())) continue;
      c.first = in.sizes();
      if (in.numel() <= 4096) c.second = in.detach().to(kCPU).to(kFloat64).contiguous().to_vector<double>();
    }
    for (const Tensor& out : t.record.outputs) made.insert(out.impl());
    s.ops.push_back(std::move(o));
  }
  for (const Tensor& out : outputs) s.outputs.push_back(out.sizes());
  return s;
}

// "batch is 7" / "every dynamic axis is grown by 2": what run r changed.
std::string run_name(size_t r, const std::vector<DynamicAxis>& axes, const std::vector<std::vector<int64_t>>& runs) {
  if (r == 0) return "at the example's sizes";
  if (r <= axes.size()) return "when " + axes[r - 1].name + " is " + std::to_string(runs[r][r - 1]);
  return "when every dynamic axis is grown by 2";
}

// The example's inputs with the dynamic axes at the sizes of a run.
std::vector<Tensor> inputs_at(const std::vector<Tensor>& inputs, const std::vector<DynamicAxis>& axes,
                              const std::vector<int64_t>& sizes) {
  std::vector<Tensor> in = inputs;
  for (size_t s = 0; s < axes.size(); ++s)
    for (auto [i, axis] : axes[s].axes)
      if (sizes[s] != axes[s].size) in[i] = grow(in[i], axis, sizes[s] - axes[s].size);
  return in;
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

// Every run must run the ops of the example's, reading the same constants, with outputs of
// the same ranks: else the forward's control flow or constants depend on the sizes.
void compare_runs(const std::vector<RunSummary>& summaries, const std::vector<DynamicAxis>& axes,
                  const std::vector<std::vector<int64_t>>& runs) {
  const RunSummary& base = summaries[0];
  for (size_t r = 1; r < summaries.size(); ++r) {
    const RunSummary& run = summaries[r];
    for (size_t k = 0; k < std::max(base.ops.size(), run.ops.size()); ++k) {
      const bool same = k < base.ops.size() && k < run.ops.size() && base.ops[k].op == run.ops[k].op &&
                        base.ops[k].ints.size() == run.ops[k].ints.size() &&
                        base.ops[k].floats.size() == run.ops[k].floats.size() && base.ops[k].ranks == run.ops[k].ranks &&
                        base.ops[k].constants.size() == run.ops[k].constants.size();
      LOOM_CHECK(same, NotImplementedError, "onnx export: the forward runs other ops ", run_name(r, axes, runs),
                 " than at the example's sizes (op ", k, ": ",
                 k < base.ops.size() ? base.ops[k].op + " in " + base.ops[k].path : "none", " vs ",
                 k < run.ops.size() ? run.ops[k].op + " in " + run.ops[k].path : "none",
                 "): control flow on sizes has no ONNX form (a size-1 axis that an op squeezes or broadcasts "
                 "away is one; give the example that axis a size > 1)");
    }
    for (size_t k = 0; k < base.ops.size(); ++k)  // a constant made on the host from a size would be baked in
      for (size_t i = 0; i < base.ops[k].constants.size(); ++i) {
        const auto &a = base.ops[k].constants[i], &b = run.ops[k].constants[i];
        // Bit for bit (memcmp: a NaN equals itself); an empty constant has no data to compare.
        const bool same = a.first == b.first && a.second.size() == b.second.size() &&
                          (a.second.empty() ||
                           std::memcmp(a.second.data(), b.second.data(), a.second.size() * sizeof(double)) == 0);
        LOOM_CHECK(same, NotImplementedError, "onnx export: ", base.ops[k].op, " in ", base.ops[k].path,
                   " reads a constant (its input ", i, ", shape ", shape_str(a.first), ") whose shape or values change ",
                   run_name(r, axes, runs), ": a tensor made on the host from a size (as from_vector({T})) or drawn "
                   "at random would be baked in; make it with ops the export records (arange, full, x.mean)");
      }
    bool same_ranks = run.outputs.size() == base.outputs.size();
    for (size_t o = 0; same_ranks && o < run.outputs.size(); ++o)
      same_ranks = run.outputs[o].size() == base.outputs[o].size();
    LOOM_CHECK(same_ranks, NotImplementedError, "onnx export: the forward's outputs have other ranks ",
               run_name(r, axes, runs), " than at the example's sizes: control flow on sizes has no ONNX form");
  }
}

// Each op argument that changes between the runs must be a size, of a form the graph can
// compute: its provenance goes into the op's int_sizes / float_sizes.
void fit_arguments(std::vector<TracedOp>& ops, const std::vector<RunSummary>& summaries,
                   const std::vector<std::vector<int64_t>>& runs) {
  const RunSummary& base = summaries[0];
  auto fit = [&](const std::vector<int64_t>& values, const std::string& what) {
    std::optional<SymSize> s = fit_size(values, runs);
    LOOM_CHECK(s.has_value(), NotImplementedError, "onnx export: ", what, " is ", list(values),
               " at the example's sizes and with each dynamic axis grown (", list(runs[0]), " then ",
               "each grown by 1, then all by 2): not scale · ∏ axes + offset, which the graph can compute");
    return *s;
  };
  for (size_t k = 0; k < ops.size() && summaries.size() > 1; ++k) {
    const RunSummary::Op& op = base.ops[k];
    const std::string where = op.op + " in " + op.path;
    for (size_t i = 0; i < op.ints.size(); ++i) {
      std::vector<int64_t> values;
      for (const RunSummary& run : summaries) values.push_back(run.ops[k].ints[i]);
      if (std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values[0]; })) continue;
      LOOM_CHECK(is_size_int(op.op, i), NotImplementedError, "onnx export: ", where, " is called with ",
                 list(op.ints), " at the example's sizes but its argument ", i, " changes with the sizes ",
                 list(values), ": control flow on sizes has no ONNX form");
      ops[k].int_sizes[i] = fit(values, where + ": its size argument " + std::to_string(i));
    }
    for (size_t i = 0; i < op.floats.size(); ++i) {
      std::vector<int64_t> values;
      bool same = true, integral = true;
      for (const RunSummary& run : summaries) {
        const double v = run.ops[k].floats[i];
        same = same && (v == op.floats[i] || (std::isnan(v) && std::isnan(op.floats[i])));  // nan: "not given"
        integral = integral && std::nearbyint(v) == v;
        values.push_back(int64_t(v));
      }
      if (same) continue;
      LOOM_CHECK(is_size_float(op.op, i) && integral, NotImplementedError, "onnx export: ", where,
                 "'s scalar argument ", i, " (", op.floats[i], " at the example's sizes) changes with the sizes: a "
                 "scalar computed from a size (as x * (1.0 / T)) would be baked in; compute it from tensors (x.mean)");
      ops[k].float_sizes[i] = fit(values, where + ": its size argument " + std::to_string(i));
    }
  }
}

}  // namespace

std::vector<DynamicAxis> dynamic_axes(const std::map<size_t, std::map<int64_t, std::string>>& axes,
                                      const std::vector<Tensor>& inputs, const std::vector<std::string>& names) {
  std::vector<DynamicAxis> out;
  for (const auto& [i, by_axis] : axes) {
    LOOM_CHECK(i < inputs.size(), ValueError, "onnx export: dynamic_axes names input ", i, " of ", inputs.size());
    for (const auto& [axis, name] : by_axis) {
      const std::string input = i < names.size() ? names[i] : "input_" + std::to_string(i);
      LOOM_CHECK(axis >= 0 && axis < inputs[i].dim(), ValueError, "onnx export: dynamic axis ", axis, " (", name,
                 ") of input ", input, " of shape ", shape_str(inputs[i].sizes()), " is out of range");
      auto it = std::find_if(out.begin(), out.end(), [&](const DynamicAxis& a) { return a.name == name; });
      if (it == out.end()) it = out.insert(out.end(), DynamicAxis{name, inputs[i].size(axis), {}});
      LOOM_CHECK(it->size == inputs[i].size(axis), ValueError, "onnx export: dynamic axis ", name, " has size ",
                 it->size, " in one input and ", inputs[i].size(axis), " in axis ", axis, " of input ", input);
      it->axes.emplace_back(i, axis);
    }
  }
  return out;
}

Traced trace_runs(nn::Module& module, const FlatForward& forward, const std::vector<Tensor>& inputs,
                  const std::vector<DynamicAxis>& axes) {
  Traced t;
  t.tracer = std::make_unique<GraphTracer>(module, inputs);
  t.outputs = forward(inputs);
  t.tracer->stop();  // before the next run's tracer, which would restore this one
  t.ops = t.tracer->ops();

  std::vector<int64_t> example;
  for (const DynamicAxis& a : axes) example.push_back(a.size);
  const auto runs = run_sizes(example);
  std::vector<RunSummary> summaries{summarize(*t.tracer, t.outputs)};
  for (size_t r = 1; r < runs.size() && !axes.empty(); ++r) {
    const std::vector<Tensor> in = inputs_at(inputs, axes, runs[r]);
    GraphTracer tracer(module, in);
    std::vector<Tensor> out;
    try {
      out = forward(in);
    } catch (const Error& e) {
      throw ValueError(::loom::detail::str("onnx export: the forward fails ", run_name(r, axes, runs),
                                           " (the export grows each dynamic axis to find the sizes that follow it): ",
                                           e.what()));
    }
    tracer.stop();
    summaries.push_back(summarize(tracer, out));
  }

  compare_runs(summaries, axes, runs);
  fit_arguments(t.ops, summaries, runs);
  for (size_t o = 0; o < t.outputs.size(); ++o) {
    t.output_dims.emplace_back();
    for (int64_t d = 0; d < t.outputs[o].dim(); ++d) {
      std::vector<int64_t> values;
      for (const RunSummary& run : summaries) values.push_back(run.outputs[o][size_t(d)]);
      if (axes.empty()) {
        t.output_dims.back().push_back(SymSize::constant(values[0]));
        continue;
      }
      t.output_dims.back().push_back(fit_size(values, runs));  // declared only: nullopt leaves it unnamed
    }
  }
  return t;
}

}  // namespace loom::onnx
