#include "common/AtomicFile.hpp"

#include "common/Error.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace ddlsim {

void write_file_atomically(const std::string& path, const std::string& what,
                           const std::function<void(std::ostream&)>& write)
{
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path())
    fs::create_directories(target.parent_path(), ec);
  const fs::path tmp = target.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw Error("cannot write " + tmp.string() + ": " + std::strerror(errno));
    try {
      write(out);
    } catch (...) {
      out.close();
      fs::remove(tmp, ec);
      throw;
    }
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      throw Error("cannot write " + tmp.string() + ": " + std::strerror(errno));
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot move " + what + " into place at " + path + ": " + ec.message());
  }
}

}  // namespace ddlsim
