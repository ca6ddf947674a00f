// shared_library.cpp — dlopen through the search order in shared_library.hpp, dlsym by name, and
// the one-line errors when either fails.
#include "ops/cuda/shared_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "core/error.hpp"

#ifndef ZL_CUDA_LIBRARY_DIR
#error "ZL_CUDA_LIBRARY_DIR (the toolkit's lib directory) comes from src/ops/cuda/CMakeLists.txt"
#endif

namespace zl {

namespace {

// open()'s tries, in order; a directory that is already listed is not tried twice.
std::vector<std::string> candidates(const std::string& soname) {
  if (soname.find('/') != std::string::npos) return {soname};
  std::vector<std::string> tries{soname};
  std::vector<std::filesystem::path> dirs;
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) dirs.push_back(exe.parent_path());
  dirs.emplace_back(ZL_CUDA_LIBRARY_DIR);
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    if (dirs[i].empty() || (i > 0 && dirs[i] == dirs[0])) continue;
    tries.push_back((dirs[i] / soname).string());
  }
  return tries;
}

// The file the loader opened for `handle` (a bare name resolves to a full path), else `tried`.
std::string loaded_path(void* handle, const std::string& tried) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr ||
      map->l_name[0] == '\0') {
    return tried;
  }
  return map->l_name;
}

}  // namespace

SharedLibrary SharedLibrary::open(const std::string& soname, const std::string& what,
                                  const std::string& what_to_do) {
  std::string errors;
  for (const std::string& path : candidates(soname)) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      return SharedLibrary(handle, loaded_path(handle, path), what, what_to_do);
    }
    const char* why = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(why != nullptr ? why : path);
  }
  fail("cannot load {} ({}): {}: {}", what, soname, errors, what_to_do);
}

SharedLibrary::SharedLibrary(void* handle, std::string path, std::string what,
                             std::string what_to_do)
    : handle_(handle),
      path_(std::move(path)),
      what_(std::move(what)),
      what_to_do_(std::move(what_to_do)) {}

void* SharedLibrary::address(const char* name) const {
  dlerror();  // clears an earlier error, so a null from dlsym below is told apart from a failure
  void* symbol = dlsym(handle_, name);
  const char* why = dlerror();
  ZL_CHECK(why == nullptr && symbol != nullptr,
           "{} library {} has no function {} ({}): it is not the version zerolab was built "
           "against: {}",
           what_, path_, name, why != nullptr ? why : "a null address", what_to_do_);
  return symbol;
}

}  // namespace zl
