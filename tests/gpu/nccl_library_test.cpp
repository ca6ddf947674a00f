// nccl_library_test.cpp — the NCCL table loads by dlopen on a machine with NCCL installed and no
// GPU, its functions answer, and a missing library is one line naming it and what to do. Needs no
// GPU: these always run.
#include "comm/nccl/nccl_library.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/error.hpp"

namespace zl {
namespace {

TEST(NcclLibrary, ResolvesEveryFunctionFromTheInstalledLibrary) {
  const NcclLibrary& table = nccl();
  std::printf("NCCL loaded from %s\n", table.path.c_str());
  EXPECT_NE(table.GetUniqueId, nullptr);
  EXPECT_NE(table.CommInitRank, nullptr);
  EXPECT_NE(table.CommDestroy, nullptr);
  EXPECT_NE(table.CommAbort, nullptr);
  EXPECT_NE(table.CommGetAsyncError, nullptr);
  EXPECT_NE(table.AllReduce, nullptr);
  EXPECT_NE(table.ReduceScatter, nullptr);
  EXPECT_NE(table.AllGather, nullptr);
  EXPECT_NE(table.Broadcast, nullptr);
  EXPECT_NE(table.GetErrorString, nullptr);
  EXPECT_EQ(&nccl(), &table) << "the table is loaded once per process";
  // A call that needs no GPU: the pointers reach the real library.
  EXPECT_STRNE(table.GetErrorString(ncclInvalidArgument), "");
}

TEST(NcclLibrary, SonameIsTheHeadersMajorVersion) {
  EXPECT_EQ(nccl_soname(), "libnccl.so." + std::to_string(NCCL_MAJOR));
}

TEST(NcclLibrary, MissingLibraryIsOneLineSayingWhatToDo) {
  std::string message;
  try {
    load_nccl("libnccl_zerolab_missing.so.2");
  } catch (const Error& error) {
    message = error.what();
  }
  std::printf("%s\n", message.c_str());
  EXPECT_NE(message.find("cannot load NCCL (libnccl_zerolab_missing.so.2)"), std::string::npos);
  EXPECT_NE(message.find("LD_LIBRARY_PATH"), std::string::npos);
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

}  // namespace
}  // namespace zl
