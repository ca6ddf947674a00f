// cublas_library_test.cpp — the cuBLAS table loads by dlopen on a machine with the toolkit and no
// GPU, its functions answer, and a missing library or function is one line naming it and what to
// do. Needs no GPU: these always run.
#include "ops/cuda/cublas_library.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "ops/cuda/shared_library.hpp"

namespace zl {
namespace {

// The zl::Error `load` throws, or "" when it throws none.
template <class Load>
std::string error_of(Load&& load) {
  try {
    load();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(CublasLibrary, ResolvesEveryFunctionFromTheInstalledLibrary) {
  const CublasLibrary& table = cublas();
  std::printf("cuBLAS loaded from %s\n", table.path.c_str());
  EXPECT_NE(table.Create, nullptr);
  EXPECT_NE(table.Destroy, nullptr);
  EXPECT_NE(table.GemmEx, nullptr);
  EXPECT_NE(table.GetStatusString, nullptr);
  EXPECT_NE(table.SetMathMode, nullptr);
  EXPECT_NE(table.SetStream, nullptr);
  EXPECT_NE(table.SetWorkspace, nullptr);
  EXPECT_NE(table.Sgemm, nullptr);
  EXPECT_NE(table.SgemmStridedBatched, nullptr);
  EXPECT_EQ(&cublas(), &table) << "the table is loaded once per process";
  // A call that needs no GPU: the pointers reach the real library.
  EXPECT_STRNE(table.GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED), "");
  EXPECT_STRNE(table.GetStatusString(CUBLAS_STATUS_NOT_INITIALIZED),
               table.GetStatusString(CUBLAS_STATUS_SUCCESS));
}

TEST(CublasLibrary, SonameIsTheHeadersMajorVersion) {
  EXPECT_EQ(cublas_soname(), "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
}

TEST(CublasLibrary, MissingLibraryIsOneLineSayingWhatToDo) {
  const std::string message = error_of([] { load_cublas("libcublas_zerolab_missing.so.13"); });
  std::printf("%s\n", message.c_str());
  EXPECT_NE(message.find("cannot load cuBLAS (libcublas_zerolab_missing.so.13)"),
            std::string::npos);
  EXPECT_NE(message.find("LD_LIBRARY_PATH"), std::string::npos);
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// The GPU machine gets libnccl.so.2 carried beside the binaries: open() looks in the executable's
// directory. A copy of the small (and, with cudart linked statically, not yet loaded) libcudart
// under a name nothing else has is found there and nowhere else.
TEST(SharedLibrary, FindsALibraryBesideTheExecutable) {
  const std::filesystem::path toolkit_dir = std::filesystem::path(cublas().path).parent_path();
  const std::filesystem::path source =
      toolkit_dir / ("libcudart.so." + std::to_string(CUDART_VERSION / 1000));
  if (!std::filesystem::exists(source)) GTEST_SKIP() << source << " is not installed";
  const std::string name = "libzerolab_beside_" + std::to_string(getpid()) + ".so";
  const std::filesystem::path beside =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / name;
  std::filesystem::copy_file(source, beside);
  std::string path;
  std::string message;
  try {
    path = SharedLibrary::open(name, "a copy of cudart", "do this").path();
  } catch (const Error& error) {
    message = error.what();
  }
  std::filesystem::remove(beside);
  EXPECT_EQ(message, "");
  EXPECT_EQ(path, beside.string());
}

TEST(SharedLibrary, MissingFunctionIsOneLineNamingIt) {
  const SharedLibrary library = SharedLibrary::open(cublas_soname(), "cuBLAS", "do this");
  void (*function)() = nullptr;
  const std::string message =
      error_of([&] { library.resolve(function, "cublasZerolabNoSuchFunction"); });
  std::printf("%s\n", message.c_str());
  EXPECT_EQ(function, nullptr);
  EXPECT_NE(message.find("has no function cublasZerolabNoSuchFunction"), std::string::npos);
  EXPECT_NE(message.find(library.path()), std::string::npos);
  EXPECT_NE(message.find("do this"), std::string::npos);
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

}  // namespace
}  // namespace zl
