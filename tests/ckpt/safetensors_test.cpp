// safetensors_test.cpp — round trips of every dtype, the exact byte layout, the record helpers,
// and atomic writes that leave nothing behind when they fail.
#include "ckpt/safetensors.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "ckpt/test_files.hpp"
#include "core/error.hpp"

namespace zl {
namespace {

using test::error_of;
using test::file_bytes;
using test::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A record of `dtype` whose bytes count 0, 1, 2, ... so any misplaced byte shows.
TensorRecord counting_record(std::string name, DType dtype, Shape shape) {
  TensorRecord record{std::move(name), dtype, std::move(shape), {}};
  record.bytes.resize(static_cast<std::size_t>(numel(record.shape)) * dtype_bytes(dtype));
  for (std::size_t i = 0; i < record.bytes.size(); ++i) record.bytes[i] = std::byte(i * 7 + 1);
  return record;
}

TEST(SafetensorsRoundTrip, EveryDtypeScalarsEmptyShapesAndMetadata) {
  TempDir dir;
  const auto path = dir.path() / "all.safetensors";
  const std::vector<TensorRecord> tensors = {
      counting_record("w.f32", DType::F32, {2, 3}),
      counting_record("w.bf16", DType::BF16, {5}),
      counting_record("w.f16", DType::F16, {2, 2}),
      counting_record("scalar.f64", DType::F64, {}),
      counting_record("ids.i64", DType::I64, {3}),
      counting_record("empty", DType::F32, {0}),
      counting_record("empty.3d", DType::BF16, {2, 0, 3}),
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"}};
  write_safetensors(path, tensors, metadata);

  const SafetensorsFile file = read_safetensors_file(path);
  EXPECT_EQ(file.metadata, metadata);
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(file.tensors[i].name, tensors[i].name);
    EXPECT_EQ(file.tensors[i].dtype, tensors[i].dtype);
    EXPECT_EQ(file.tensors[i].shape, tensors[i].shape);
    EXPECT_EQ(file.tensors[i].bytes, tensors[i].bytes);
  }
  const auto bytes = file_bytes(path);
  EXPECT_EQ(bytes[0] % 8, 0);  // the header is padded to 8 bytes, so the data starts aligned
  EXPECT_THAT(dir.entries(), ElementsAre("all.safetensors"));
}

TEST(SafetensorsRoundTrip, NoTensorsNoMetadata) {
  TempDir dir;
  const auto path = dir.path() / "empty.safetensors";
  write_safetensors(path, {});
  // "{}" padded to 8 bytes.
  EXPECT_THAT(file_bytes(path),
              ElementsAre(8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '));
  const SafetensorsFile file = read_safetensors_file(path);
  EXPECT_TRUE(file.tensors.empty());
  EXPECT_TRUE(file.metadata.empty());
}

// The layout spelled out: header length, compact JSON (metadata first, then tensors in the order
// given, as the Hugging Face writer does), spaces to a multiple of 8, then little-endian data.
TEST(SafetensorsLayout, MatchesHandWrittenBytes) {
  TempDir dir;
  const auto path = dir.path() / "tiny.safetensors";
  const float a[] = {1.0f, -2.0f};
  const std::int64_t b[] = {7};
  write_safetensors(path, {make_tensor("a", {2}, a), make_tensor("b", {}, b)}, {{"k", "v"}});

  const std::string json = R"({"__metadata__":{"k":"v"},)"
                           R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})"
                           "    ";  // 132 bytes of JSON + 4 spaces = 136 = 0x88
  std::vector<unsigned char> expected = {0x88, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), json.begin(), json.end());
  const unsigned char data[] = {0x00, 0x00, 0x80, 0x3f,  // 1.0f
                                0x00, 0x00, 0x00, 0xc0,  // -2.0f
                                7,    0,    0,    0,    0, 0, 0, 0};
  expected.insert(expected.end(), std::begin(data), std::end(data));
  EXPECT_EQ(file_bytes(path), expected);
}

// Another writer's spacing and key order (as Python's json.dumps gives) reads the same.
TEST(SafetensorsLayout, ReadsHandWrittenFileWithOtherKeyOrder) {
  TempDir dir;
  const auto path = dir.path() / "other.safetensors";
  const std::string json = R"({"b": {"shape": [], "data_offsets": [8, 16], "dtype": "I64"}, )"
                           R"("a": {"data_offsets": [0, 8], "dtype": "F32", "shape": [2]}})";
  std::vector<unsigned char> bytes = {static_cast<unsigned char>(json.size()), 0, 0, 0, 0, 0, 0, 0};
  bytes.insert(bytes.end(), json.begin(), json.end());
  const unsigned char data[] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 7, 0, 0, 0, 0, 0, 0, 0};
  bytes.insert(bytes.end(), std::begin(data), std::end(data));
  test::write_file(path, bytes);

  const auto tensors = read_safetensors(path);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[0].name, "a");  // data order, not header order
  EXPECT_THAT(to_floats(find_tensor(tensors, "a")), ElementsAre(1.0f, -2.0f));
  EXPECT_THAT(to_int64s(find_tensor(tensors, "b")), ElementsAre(7));
  EXPECT_TRUE(find_tensor(tensors, "b").shape.empty());
}

TEST(SafetensorsRecords, HelpersCheckSizesDtypesAndNames) {
  const float values[] = {1, 2, 3};
  EXPECT_THAT(error_of([&] { make_tensor("x", {2, 2}, values); }), HasSubstr("\"x\""));
  const auto record = make_tensor("x", {3}, values);
  EXPECT_THAT(error_of([&] { to_int64s(record); }), HasSubstr("not int64"));
  EXPECT_EQ(error_of([&] { find_tensor({record}, "y"); }),
            "no tensor named \"y\"; there are 1 tensors: x");
  EXPECT_EQ(safetensors_dtype(DType::BF16), "BF16");
  EXPECT_EQ(parse_safetensors_dtype("F16"), DType::F16);
  EXPECT_EQ(parse_safetensors_dtype("U8"), std::nullopt);
  EXPECT_EQ(tensor_bytes({2, 3}, DType::F64), 48u);
  EXPECT_EQ(tensor_bytes({}, DType::BF16), 2u);
  EXPECT_EQ(tensor_bytes({4, 0}, DType::F32), 0u);
  EXPECT_EQ(tensor_bytes({-1}, DType::F32), std::nullopt);
  EXPECT_EQ(tensor_bytes({std::int64_t{1} << 62, 8}, DType::F32), std::nullopt);
}

TEST(SafetensorsWrite, RejectsDuplicateNamesAndWrongSizesWithoutCreatingFiles) {
  TempDir dir;
  const auto path = dir.path() / "bad.safetensors";
  const auto a = counting_record("a", DType::F32, {2});
  auto short_a = a;
  short_a.bytes.pop_back();
  EXPECT_THAT(error_of([&] { write_safetensors(path, {a, a}); }), HasSubstr("appears twice"));
  EXPECT_THAT(error_of([&] { write_safetensors(path, {short_a}); }),
              HasSubstr("given 7 bytes but shape [2] of fp32 needs 8"));
  EXPECT_THAT(
      error_of([&] { write_safetensors(path, {counting_record("__metadata__", DType::F32, {})}); }),
      HasSubstr("reserved"));
  EXPECT_TRUE(dir.entries().empty());
}

TEST(SafetensorsWrite, MissingDirectorySaysWhatToDo) {
  TempDir dir;
  const auto path = dir.path() / "out" / "final.safetensors";
  const std::string message = error_of([&] { write_safetensors(path, {}); });
  EXPECT_EQ(message,
            "cannot write " + path.string() +
                ": No such file or directory: create the directory or choose another path");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(SafetensorsWrite, ParentIsAFile) {
  TempDir dir;
  test::write_file(dir.path() / "plain", {1, 2, 3});
  const auto path = dir.path() / "plain" / "final.safetensors";
  EXPECT_THAT(error_of([&] { write_safetensors(path, {}); }),
              HasSubstr(path.string() + ": Not a directory: create the directory"));
  EXPECT_THAT(dir.entries(), ElementsAre("plain"));
}

TEST(SafetensorsWrite, UnwritableDirectory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  TempDir dir;
  const auto locked = dir.path() / "locked";
  std::filesystem::create_directory(locked);
  std::filesystem::permissions(
      locked, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const auto path = locked / "final.safetensors";
  EXPECT_THAT(error_of([&] { write_safetensors(path, {}); }),
              HasSubstr(path.string() + ": Permission denied: make the directory writable"));
  std::filesystem::permissions(locked, std::filesystem::perms::owner_all);
  EXPECT_TRUE(std::filesystem::is_empty(locked));
}

// The temporary is written in full and only the rename fails: it must still be removed.
TEST(SafetensorsWrite, FailedRenameRemovesTheTemporary) {
  TempDir dir;
  const auto path = dir.path() / "final.safetensors";
  std::filesystem::create_directories(path / "occupied");
  const std::string message =
      error_of([&] { write_safetensors(path, {counting_record("a", DType::F32, {64})}); });
  EXPECT_THAT(message, HasSubstr("cannot write " + path.string() + ": "));
  EXPECT_THAT(message, HasSubstr("(renaming the temporary file over it)"));
  EXPECT_THAT(dir.entries(), ElementsAre("final.safetensors"));
  EXPECT_TRUE(std::filesystem::is_directory(path));
}

TEST(SafetensorsWrite, OverwritesAnExistingFileCompletely) {
  TempDir dir;
  const auto path = dir.path() / "ckpt.safetensors";
  write_safetensors(path, {counting_record("big", DType::F64, {100})});
  write_safetensors(path, {counting_record("small", DType::F16, {1})});
  const auto tensors = read_safetensors(path);
  ASSERT_EQ(tensors.size(), 1u);
  EXPECT_EQ(tensors[0].name, "small");
  EXPECT_THAT(dir.entries(), ElementsAre("ckpt.safetensors"));
}

}  // namespace
}  // namespace zl
