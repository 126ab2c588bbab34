// What a reader does with a malformed record, and what it tells the caller afterwards.
//
// Files are hostile input: a missing label, bad UTF-8, a ragged CSV row or an unknown
// label either stops the read with a DataError naming file and line (OnBadRecord::Throw,
// the default), or is skipped and counted (OnBadRecord::Skip) so a user can train on the
// good part of a messy file and see how much was dropped.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"

namespace loom::data {

enum class OnBadRecord { Throw, Skip };

struct ReadReport {
  std::string source;              // the file or directory read
  size_t records = 0;              // records kept
  size_t skipped = 0;              // records dropped under OnBadRecord::Skip
  std::vector<std::string> problems;  // the first kMaxProblems "file:line: why" messages

  static constexpr size_t kMaxProblems = 20;

  // Throws DataError("file:line: why") under Throw; counts and remembers it under Skip.
  void bad_record(OnBadRecord policy, const std::string& file, size_t line,
                  const std::string& why) {
    std::string message = file + ":" + std::to_string(line) + ": " + why;
    if (policy == OnBadRecord::Throw) throw DataError(message);
    ++skipped;
    if (problems.size() < kMaxProblems) problems.push_back(std::move(message));
  }
};

}  // namespace loom::data
