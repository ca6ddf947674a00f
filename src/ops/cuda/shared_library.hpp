// shared_library.hpp — a shared library opened with dlopen on first use and its functions looked
// up by name: how zerolab reaches cuBLAS and NCCL without linking them, so a run that never
// touches a GPU never maps their hundreds of megabytes (and starts where they are not installed).
#pragma once

#include <bit>
#include <string>

namespace zl {

/// An open shared library. It is never closed: the functions looked up in it stay valid for the
/// life of the process.
class SharedLibrary {
 public:
  /// Opens `soname` with RTLD_NOW | RTLD_LOCAL, trying in order:
  ///  1. the name alone: the dynamic loader's own search (LD_LIBRARY_PATH, the executable's
  ///     RUNPATH, /etc/ld.so.cache, /lib and /usr/lib);
  ///  2. the directory of the running executable (/proc/self/exe), where a library carried
  ///     beside the binary lies;
  ///  3. the CUDA toolkit's library directory found when zerolab was built.
  /// A name holding a '/' is a path and is tried alone. When every try fails, throws zl::Error
  /// "cannot load <what> (<soname>): <each try's dlerror>: <what_to_do>", on one line.
  static SharedLibrary open(const std::string& soname, const std::string& what,
                            const std::string& what_to_do);

  /// Points `function` at the library's function `name` (the exported name: cublasCreate_v2,
  /// not the header's macro cublasCreate). Throws zl::Error naming the library, its path and
  /// the function when the library has no such symbol.
  template <class Fn>
  void resolve(Fn& function, const char* name) const {
    function = std::bit_cast<Fn>(address(name));
  }

  /// The file the library was loaded from (the loader's full path when the first try, the bare
  /// name, succeeded), so a run can say which copy it uses.
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path, std::string what, std::string what_to_do);

  void* address(const char* name) const;

  void* handle_;
  std::string path_;
  std::string what_;
  std::string what_to_do_;
};

}  // namespace zl
