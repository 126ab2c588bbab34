// The host half of Note [deferred device checks] (kernels/support/device_check.h): the sites, the
// messages (the same as the CPU's eager checks), which failure a record keeps, how a record
// is written, and the mailbox that raises it once and re-arms the device, driven with a
// fake record in ordinary memory where the CUDA backend maps one the GPU writes.
#include <atomic>
#include <cstring>
#include <thread>
#include <tuple>

#include "kernels/kernels.h"
#include "kernels/support/device_check.h"
#include "test_util.h"
#include "thrown_message.h"

using namespace loom;
using namespace loom::kernels;
using loom::test::require_throws_with;

namespace {

// A record as a GPU leaves it after a failing check.
DeviceCheckRecord failed_record(DeviceCheckSite site, uint32_t launch, int64_t position, int64_t value) {
  DeviceCheckRecord record;
  site.launch = launch;
  write_record(&record, site, position, value, [] {});
  return record;
}

}  // namespace

TEST_CASE("device checks: a site keeps its texts, cut with ... when too long", "[device_check]") {
  const DeviceCheckSite site =
      make_device_check_site(DeviceCheckKind::kClassTarget, 5, "cross_entropy", "input (6, 5) (ignore_index -100)");
  CHECK(site.kind == DeviceCheckKind::kClassTarget);
  CHECK(site.bound == 5);
  CHECK(site.launch == 0);
  CHECK(std::string(site.op) == "cross_entropy");
  CHECK(std::string(site.context) == "input (6, 5) (ignore_index -100)");

  const std::string fits(kDeviceCheckTextBytes - 1, 'a'), too_long(kDeviceCheckTextBytes + 20, 'b');
  CHECK(std::string(make_device_check_site(DeviceCheckKind::kIndexRange, 1, fits).op) == fits);
  const std::string cut = make_device_check_site(DeviceCheckKind::kIndexRange, 1, too_long).op;
  CHECK(cut.size() == kDeviceCheckTextBytes - 1);
  CHECK(cut == std::string(kDeviceCheckTextBytes - 4, 'b') + "...");
}

TEST_CASE("device checks: the messages are the CPU's eager ones", "[device_check]") {
  // The CPU throws exactly these texts, so a GPU's deferred error reads the same.
  CHECK(test::thrown_message<IndexError>([] { check_indices(tensor<int32_t>({0, 9, -2}), 4, "myop"); }) ==
        index_out_of_range_message("myop", 9, 4));
  CHECK(index_out_of_range_message("myop", 9, 4) ==
        "myop: index 9 is out of range: expected an index in [0, 4) for a dim of size 4");
  CHECK(test::thrown_message<IndexError>(
            [] { check_class_targets(tensor<int64_t>({2, 7, 1}), 5, "nll_loss", "input (3, 5)"); }) ==
        class_out_of_range_message("nll_loss", 7, 5, "input (3, 5)"));
  CHECK(class_out_of_range_message("nll_loss", -1, 5, "input (3, 5)") ==
        "nll_loss: target class -1 is out of range for 5 classes of input (3, 5)");
  // The CPU's class check names the smallest target when one is negative, else the largest.
  CHECK(test::thrown_message<IndexError>([] { check_class_targets(tensor<int64_t>({6, -3, 9, -1}), 5, "op", "x"); }) ==
        class_out_of_range_message("op", -3, 5, "x"));
  CHECK(test::thrown_message<IndexError>([] { check_class_targets(tensor<int32_t>({6, 3, 9}), 5, "op", "x"); }) ==
        class_out_of_range_message("op", 9, 5, "x"));
  CHECK_NOTHROW(check_class_targets(tensor<int64_t>({0, 4, 2}), 5, "op", "x"));
  CHECK_NOTHROW(check_class_targets(zeros({0}, kInt64), 0, "op", "x"));

  // Through the losses: the message names the input's shape and ignore_index.
  const Tensor scores = randn({3, 5});
  require_throws_with<IndexError>([&] { nn::functional::cross_entropy(scores, tensor<int64_t>({1, 5, 0})); },
                                  {"cross_entropy: target class 5 is out of range for 5 classes of input (3, 5) "
                                   "(ignore_index -100)"});
}

TEST_CASE("device checks: a record describes itself with the CPU's message, the element and the reporting call",
          "[device_check]") {
  const Device gpu(DeviceType::CUDA, 1);
  const DeviceCheckRecord index = failed_record(
      make_device_check_site(DeviceCheckKind::kIndexRange, 5, "gather (dim 1 of shape (4, 5))"), 3, 6, 7);
  const std::string text = describe_device_check(index, gpu, "cuda::synchronize");
  CHECK(text.rfind(index_out_of_range_message("gather (dim 1 of shape (4, 5))", 7, 5), 0) == 0);
  CHECK_THAT(text, Catch::Contains("element 6") && Catch::Contains("cuda:1") && Catch::Contains("cuda::synchronize"));

  const DeviceCheckRecord target = failed_record(
      make_device_check_site(DeviceCheckKind::kClassTarget, 3, "nll_loss", "input (2, 3) (ignore_index -1)"), 9, 1,
      -4);
  CHECK(describe_device_check(target, gpu, "Tensor::item")
            .rfind(class_out_of_range_message("nll_loss", -4, 3, "input (2, 3) (ignore_index -1)"), 0) == 0);

  // A text the device left without its NUL is read to the field's end, never beyond.
  DeviceCheckRecord unterminated = index;
  std::memset(unterminated.site.op, 'x', kDeviceCheckTextBytes);
  CHECK(describe_device_check(unterminated, gpu, "w").rfind(std::string(kDeviceCheckTextBytes, 'x') + ": index 7", 0) ==
        0);
  // A record of no kind is not a failure to describe.
  CHECK_THROWS_AS(describe_device_check(DeviceCheckRecord{}, gpu, "w"), InternalError);
}

TEST_CASE("device checks: the first failing launch keeps the record, at its first bad element", "[device_check]") {
  // takes_record is the rule each failing block applies under the claim's lock.
  CHECK(takes_record(/*holder=*/0, 0, /*launch=*/5, /*position=*/10));  // nobody holds it
  CHECK(takes_record(5, 10, 5, 3));                                     // the holder, at an earlier element
  CHECK_FALSE(takes_record(5, 10, 5, 12));                              // the holder, at a later one
  CHECK_FALSE(takes_record(5, 10, 7, 0));                               // a later launch: the first one wins

  // Blocks of launch 5 report elements 10 and 3, then launch 7 reports element 0.
  DeviceCheckRecord record;
  uint32_t holder = 0;
  int64_t held = 0;
  const DeviceCheckSite site = make_device_check_site(DeviceCheckKind::kIndexRange, 4, "embedding");
  for (auto [launch, position, value] : {std::tuple<uint32_t, int64_t, int64_t>{5, 10, 40}, {5, 3, -1}, {7, 0, 99}}) {
    if (!takes_record(holder, held, launch, position)) continue;
    holder = launch;
    held = position;
    DeviceCheckSite stamped = site;
    stamped.launch = launch;
    write_record(&record, stamped, position, value, [] {});
  }
  CHECK(record.site.launch == 5);
  CHECK(record.position == 3);
  CHECK(record.value == -1);
  CHECK(record.site.kind == DeviceCheckKind::kIndexRange);
}

TEST_CASE("device checks: write_record publishes the kind after every other field", "[device_check]") {
  DeviceCheckRecord record;
  int publishes = 0;
  bool fields_before_kind = false;
  const DeviceCheckSite site = make_device_check_site(DeviceCheckKind::kClassTarget, 8, "op", "ctx");
  DeviceCheckSite stamped = site;
  stamped.launch = 2;
  write_record(&record, stamped, 4, 11, [&] {
    if (++publishes == 1)
      fields_before_kind = record.site.kind == DeviceCheckKind::kNone && record.position == 4 && record.value == 11 &&
                           record.site.bound == 8 && std::string(record.site.context) == "ctx";
  });
  CHECK(publishes == 2);
  CHECK(fields_before_kind);
  CHECK(record.site.kind == DeviceCheckKind::kClassTarget);
}

TEST_CASE("device checks: the mailbox raises a failure once, clears it and re-arms the device", "[device_check]") {
  DeviceCheckRecord record;  // what the CUDA backend maps for the GPU to write
  int rearmed = 0;
  DeviceCheckMailbox mailbox(&record, Device(DeviceType::CUDA, 0), [&] { ++rearmed; });

  // Launch ids: nonzero and distinct.
  const DeviceCheckSite site = make_device_check_site(DeviceCheckKind::kIndexRange, 5, "index_select");
  const uint32_t a = mailbox.stamp(site).launch, b = mailbox.stamp(site).launch;
  CHECK(a != 0);
  CHECK(b != 0);
  CHECK(a != b);
  CHECK(std::string(mailbox.stamp(site).op) == "index_select");

  CHECK_NOTHROW(mailbox.raise_pending("cuda::synchronize"));  // nothing failed
  CHECK(rearmed == 0);

  record = failed_record(site, b, 2, 5);
  require_throws_with<IndexError>([&] { mailbox.raise_pending("a copy from the GPU to the host"); },
                                  {index_out_of_range_message("index_select", 5, 5), "element 2", "cuda:0",
                                   "a copy from the GPU to the host"});
  CHECK(rearmed == 1);
  CHECK(record.site.kind == DeviceCheckKind::kNone);
  CHECK_NOTHROW(mailbox.raise_pending("cuda::synchronize"));  // once
  CHECK(rearmed == 1);

  // The next failure is raised in its turn.
  record = failed_record(make_device_check_site(DeviceCheckKind::kClassTarget, 2, "nll_loss", "input (1, 2)"), a, 0, 3);
  require_throws_with<IndexError>([&] { mailbox.raise_pending("cuda::Event::synchronize"); }, {"target class 3"});
  CHECK(rearmed == 2);
}

TEST_CASE("device checks: threads that wait at once raise one failure once", "[device_check]") {
  DeviceCheckRecord record;
  std::atomic<int> rearmed{0}, raised{0};
  DeviceCheckMailbox mailbox(&record, Device(DeviceType::CUDA, 0), [&] { ++rearmed; });
  for (int round = 0; round < 20; ++round) {
    record = failed_record(make_device_check_site(DeviceCheckKind::kIndexRange, 3, "gather"), 1, round, 9);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        try {
          mailbox.raise_pending("cuda::synchronize");
        } catch (const IndexError&) {
          ++raised;
        }
      });
    for (std::thread& t : threads) t.join();
  }
  CHECK(raised == 20);
  CHECK(rearmed == 20);
}

TEST_CASE("device checks: a sequence length is checked in [1, T] and raised as the CPU's ValueError",
          "[device_check]") {
  // The CPU's eager check, through the kernels' entry (the recurrent layers' lengths).
  CHECK(test::thrown_message<ValueError>([] {
          check_sequence_lengths(tensor<int64_t>({3, 0, 2}), 4, "LSTM", "an input of shape (3, 4, 2)");
        }) == sequence_length_message("LSTM", 0, 1, 4, "an input of shape (3, 4, 2)"));
  CHECK(sequence_length_message("LSTM", 0, 1, 4, "an input of shape (3, 4, 2)") ==
        "LSTM: length 0 of sequence 1 is outside [1, 4] for an input of shape (3, 4, 2)");
  CHECK(test::thrown_message<ValueError>([] { check_sequence_lengths(tensor<int64_t>({4, 5}), 4, "GRU", "x"); }) ==
        sequence_length_message("GRU", 5, 1, 4, "x"));
  CHECK_NOTHROW(check_sequence_lengths(tensor<int64_t>({1, 4, 2}), 4, "GRU", "x"));

  // The site a GPU checks against: [1, T] as [low, bound); the record names the sequence
  // (its element) and the length, and the mailbox raises it as a ValueError.
  const DeviceCheckSite site =
      make_device_check_site(DeviceCheckKind::kSequenceLength, /*T + 1=*/8, "LSTM", "an input of shape (5, 7, 8)");
  CHECK(site.low == 1);
  CHECK(site.bound == 8);
  CHECK(make_device_check_site(DeviceCheckKind::kIndexRange, 8, "gather").low == 0);
  DeviceCheckRecord record;
  DeviceCheckMailbox mailbox(&record, Device(DeviceType::CUDA, 0), [] {});
  record = failed_record(site, mailbox.stamp(site).launch, /*position=*/2, /*value=*/9);
  require_throws_with<ValueError>([&] { mailbox.raise_pending("Tensor::item"); },
                                  {sequence_length_message("LSTM", 9, 2, 7, "an input of shape (5, 7, 8)"),
                                   "cuda:0", "Tensor::item"});
  CHECK_NOTHROW(mailbox.raise_pending("Tensor::item"));
}
