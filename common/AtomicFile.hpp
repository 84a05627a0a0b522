// Writing a file so that readers never see it half-written: the content goes to a temporary file in
// the same folder, which is renamed into place only once complete. Missing folders are created.
//
//   write_file_atomically("results/run.csv", "the CSV", [&](std::ostream& out) { out << header; ... });
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace ddlsim {

/// Calls `write` on a stream to a temporary file next to `path`, then renames it to `path`.
/// `what` names the content in errors. Throws ddlsim::Error when the file cannot be written or
/// moved into place; the temporary file is removed then, and `path` is left as it was.
void write_file_atomically(const std::string& path, const std::string& what,
                           const std::function<void(std::ostream&)>& write);

}  // namespace ddlsim
