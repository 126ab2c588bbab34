// Where the example programs find their bundled datasets (examples/data/, see its README).
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace examples {

// The path of a bundled data file. An installed program (LOOM_INSTALL_EXAMPLES, as in the
// container image's /opt/loom) reads the copy installed with it, <prefix>/share/loom/examples/data
// (LOOM_EXAMPLES_INSTALLED_DATA_DIR, relative to the program's own folder, so the installed
// tree can move); a program run from its build tree reads the source tree's examples/data.
inline std::string bundled_data(const std::string& file) {
  std::error_code error;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path installed =
        (program.parent_path() / LOOM_EXAMPLES_INSTALLED_DATA_DIR / file).lexically_normal();
    if (std::filesystem::is_regular_file(installed, error)) return installed.string();
  }
  return std::string(LOOM_EXAMPLES_DATA_DIR) + "/" + file;
}

}  // namespace examples
