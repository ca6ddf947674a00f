// safetensors_stream_test.cpp — the streaming writer writes exactly the bytes write_safetensors
// writes, refuses tensors out of order or of the wrong size and leaves nothing behind; the header
// index and read_tensor give what the whole-file reader gives.
#include "ckpt/safetensors_stream.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "ckpt/safetensors.hpp"
#include "ckpt/sha256.hpp"
#include "ckpt/test_files.hpp"

namespace zl {
namespace {

using ::testing::HasSubstr;

const std::vector<float> kA = {1.0f, -2.5f, 3.25f, 0.0f, 5.0f, 6.0f};
const std::vector<std::int64_t> kB = {7, -8, 9};
const std::vector<float> kC = {0.5f};

std::vector<TensorRecord> records() {
  return {make_tensor("a", {2, 3}, std::span(kA)), make_tensor("b", {3}, std::span(kB)),
          make_tensor("c", {}, std::span(kC))};
}

std::vector<TensorInfo> infos() {
  std::vector<TensorInfo> tensors;
  for (const auto& record : records()) tensors.push_back({record.name, record.dtype, record.shape});
  return tensors;
}

TEST(SafetensorsStream, WritesWhatWriteSafetensorsWrites) {
  test::TempDir dir;
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "3"}};
  write_safetensors(dir.path() / "whole.safetensors", records(), metadata);
  Sha256 hash;
  std::uint64_t observed_bytes = 0;
  SafetensorsStreamWriter writer(dir.path() / "streamed.safetensors", infos(), metadata,
                                 [&](std::span<const std::byte> bytes) {
                                   hash.update(bytes);
                                   observed_bytes += bytes.size();
                                 });
  for (const auto& record : records()) writer.write_tensor(record.name, record.bytes);
  const std::uint64_t size_bytes = writer.commit();
  const auto whole = test::file_bytes(dir.path() / "whole.safetensors");
  EXPECT_EQ(test::file_bytes(dir.path() / "streamed.safetensors"), whole);
  EXPECT_EQ(size_bytes, whole.size());
  EXPECT_EQ(observed_bytes, whole.size());
  EXPECT_EQ(to_hex(hash.finish()), sha256_file_hex(dir.path() / "whole.safetensors"));
}

TEST(SafetensorsStream, RefusesTensorsOutOfOrderOrOfTheWrongSize) {
  test::TempDir dir;
  const auto path = dir.path() / "out.safetensors";
  const auto all = records();
  {
    SafetensorsStreamWriter writer(path, infos());
    EXPECT_THAT(test::error_of([&] { writer.write_tensor("b", all[1].bytes); }),
                HasSubstr("tensor \"b\" given where the header has \"a\" next"));
    EXPECT_THAT(test::error_of([&] { writer.write_tensor("a", all[2].bytes); }),
                HasSubstr("tensor \"a\" given 4 bytes but shape [2, 3] of fp32 needs 24"));
  }
  {
    SafetensorsStreamWriter writer(path, infos());
    writer.write_tensor("a", all[0].bytes);
    EXPECT_THAT(test::error_of([&] { writer.commit(); }),
                HasSubstr("cannot write " + path.string() + ": only 1 of its 3 tensors"));
  }
  EXPECT_THAT(
      test::error_of([&] {
        SafetensorsStreamWriter writer(path, {{"x", DType::F32, {1}}, {"x", DType::F32, {1}}});
      }),
      HasSubstr("tensor \"x\" appears twice"));
  EXPECT_TRUE(dir.entries().empty()) << "left behind: " << dir.entries().front();
}

TEST(SafetensorsIndex, ListsWhereEachTensorLies) {
  test::TempDir dir;
  const auto path = dir.path() / "t.safetensors";
  write_safetensors(path, records(), {{"k", "v"}});
  const SafetensorsIndex index = read_safetensors_index(path);
  EXPECT_EQ(index.path, path);
  EXPECT_EQ(index.file_bytes, test::file_bytes(path).size());
  EXPECT_EQ(index.metadata, (std::map<std::string, std::string>{{"k", "v"}}));
  ASSERT_EQ(index.tensors.size(), 3u);
  const auto whole = read_safetensors(path);
  std::uint64_t data_end = index.tensors.front().offset_bytes;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(index.tensors[i].name, whole[i].name);
    EXPECT_EQ(index.tensors[i].dtype, whole[i].dtype);
    EXPECT_EQ(index.tensors[i].shape, whole[i].shape);
    EXPECT_EQ(index.tensors[i].offset_bytes, data_end);
    EXPECT_EQ(index.tensors[i].size_bytes, whole[i].bytes.size());
    data_end += whole[i].bytes.size();
    const TensorRecord one = read_tensor(index, whole[i].name);
    EXPECT_EQ(one.bytes, whole[i].bytes);
    EXPECT_EQ(one.shape, whole[i].shape);
  }
  EXPECT_EQ(data_end, index.file_bytes);
  EXPECT_EQ(test::error_of([&] { read_tensor(index, "zz"); }),
            "cannot read " + path.string() + ": it has no tensor \"zz\"");
}

TEST(SafetensorsIndex, ValidatesTheHeaderLikeTheWholeFileReader) {
  test::TempDir dir;
  const auto path = dir.path() / "t.safetensors";
  write_safetensors(path, records());
  auto bytes = test::file_bytes(path);
  bytes.resize(bytes.size() - 4);
  test::write_file(path, bytes);
  const std::string whole_error = test::error_of([&] { read_safetensors(path); });
  EXPECT_THAT(whole_error, HasSubstr("cannot read " + path.string()));
  EXPECT_EQ(test::error_of([&] { read_safetensors_index(path); }), whole_error);
}

}  // namespace
}  // namespace zl
