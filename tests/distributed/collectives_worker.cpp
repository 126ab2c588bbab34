// One rank of the distributed_collectives_N tests: loomrun (tools/loomrun.cpp) starts N of
// these with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE and LOCAL_RANK set. Each rank joins
// the default group from that environment, runs every collective for every dtype, shape
// and ReduceOp, and checks its result against the value computed here in closed form.
//
// Rank r holds value(r, i) at flat index i: small integers (and halves, after AVG), so
// every dtype, bfloat16 included, holds them and every reduction exactly.
// Exit status: 0 when every check passes, 1 when one fails.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "distributed/distributed.h"
#include "loom.h"

using namespace loom;
namespace dist = loom::distributed;

namespace {

int failures = 0;
int checks = 0;

double value(int r, int64_t i) { return (i % 2 ? -1.0 : 1.0) * (r + 1) * double(1 + i % 5); }

// The tensor of shape with value(r, offset + i) at flat index i.
Tensor filled(int r, const Shape& shape, DType dtype, int64_t offset = 0) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = value(r, offset + i);
  return from_vector(v, shape).to(dtype);
}

// op over the ranks 0..world-1 of value(r, i).
double reduced(dist::ReduceOp op, int world, int64_t i) {
  double acc = value(0, i);
  for (int r = 1; r < world; ++r) {
    double v = value(r, i);
    if (op == dist::ReduceOp::MAX) acc = std::max(acc, v);
    else if (op == dist::ReduceOp::MIN) acc = std::min(acc, v);
    else acc += v;
  }
  return op == dist::ReduceOp::AVG ? acc / world : acc;
}

template <typename Expected>
void expect(const std::string& what, const Tensor& t, Expected expected) {
  ++checks;
  std::vector<double> got = t.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    double want = expected(int64_t(i));
    if (got[i] != want) {
      std::cerr << "rank " << dist::get_rank() << ": " << what << ": element " << i << " is " << got[i]
                << ", expected " << want << "\n";
      ++failures;
      return;
    }
  }
}

std::string label(const char* op, DType dtype, const Shape& shape) {
  std::ostringstream os;
  os << op << " " << dtype << " " << shape_str(shape);
  return os.str();
}

}  // namespace

int main() {
  try {
    dist::init_process_group("gloo", dist::InitOptions().timeout(std::chrono::seconds(60)));
    const int rank = dist::get_rank(), world = dist::get_world_size();
    if (rank != std::atoi(std::getenv("RANK")) || world != std::atoi(std::getenv("WORLD_SIZE")) ||
        dist::get_local_rank() != std::atoi(std::getenv("LOCAL_RANK"))) {
      std::cerr << "rank " << rank << ": get_rank/get_world_size/get_local_rank disagree with the environment\n";
      return 1;
    }
    // The loomrun test's failing rank: it throws while the others wait for it in a collective.
    if (const char* fail = std::getenv("LOOM_TEST_FAIL_RANK"); fail && std::atoi(fail) == rank)
      throw std::runtime_error("rank " + std::to_string(rank) + " fails on purpose (LOOM_TEST_FAIL_RANK)");
    const std::vector<DType> dtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64};
    const std::vector<Shape> shapes = {{7}, {3, 5}, {1031}, {0}};
    const std::vector<dist::ReduceOp> ops = {dist::ReduceOp::SUM, dist::ReduceOp::AVG, dist::ReduceOp::MAX,
                                             dist::ReduceOp::MIN};
    for (DType dtype : dtypes) {
      bool floating = dtype != kInt32 && dtype != kInt64;
      for (const Shape& shape : shapes) {
        for (dist::ReduceOp op : ops) {
          if (op == dist::ReduceOp::AVG && !floating) continue;
          std::string what = label("all_reduce", dtype, shape) + " " + dist::reduce_op_name(op);
          Tensor t = filled(rank, shape, dtype);
          dist::all_reduce(t, op)->wait();
          expect(what, t, [&](int64_t i) { return reduced(op, world, i); });

          // reduce_scatter: inputs[j] holds value(rank, j*n + i); this rank keeps slot rank.
          int64_t n = t.numel();
          Tensor out = filled(rank, shape, dtype);
          std::vector<Tensor> inputs;
          for (int j = 0; j < world; ++j) inputs.push_back(filled(rank, shape, dtype, j * n));
          dist::reduce_scatter(out, inputs, op)->wait();
          expect(label("reduce_scatter", dtype, shape) + " " + dist::reduce_op_name(op), out,
                 [&](int64_t i) { return reduced(op, world, rank * n + i); });
        }
        for (int root = 0; root < world; ++root) {
          Tensor t = filled(rank, shape, dtype);
          dist::broadcast(t, root)->wait();
          expect(label("broadcast", dtype, shape) + " root " + std::to_string(root), t,
                 [&](int64_t i) { return value(root, i); });
        }
        std::vector<Tensor> outputs;
        for (int j = 0; j < world; ++j) outputs.push_back(zeros(shape, TensorOptions(dtype)));
        dist::all_gather(outputs, filled(rank, shape, dtype))->wait();
        for (int j = 0; j < world; ++j) {
          expect(label("all_gather", dtype, shape) + " output " + std::to_string(j), outputs[size_t(j)],
                 [&](int64_t i) { return value(j, i); });
        }
      }
    }

    // Queued collectives run in order; waiting in reverse order sees them all done.
    std::vector<Tensor> tensors;
    std::vector<std::shared_ptr<dist::Work>> works;
    for (int k = 0; k < 4; ++k) {
      tensors.push_back(filled(rank, {100003}, kFloat32, k));
      works.push_back(dist::all_reduce(tensors.back()));
    }
    works.push_back(dist::barrier());
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
    for (int k = 0; k < 4; ++k) {
      ++checks;
      if (!works[size_t(k)]->is_completed()) {
        std::cerr << "rank " << rank << ": work " << k << " not completed after wait()\n";
        ++failures;
      }
      expect("queued all_reduce " + std::to_string(k), tensors[size_t(k)],
             [&](int64_t i) { return reduced(dist::ReduceOp::SUM, world, k + i); });
    }

    dist::barrier()->wait();
    dist::destroy_process_group();
    std::cout << "rank " << rank << "/" << world << ": " << checks - failures << " of " << checks
              << " checks passed\n";
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "rank " << (std::getenv("RANK") ? std::getenv("RANK") : "?") << ": " << e.what() << "\n";
    return 1;
  }
}
