// safetensors_malformed_test.cpp — every broken file the reader can meet gives a one-line
// zl::Error that names the file and the problem, never a crash or a silent partial read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ckpt/safetensors.hpp"
#include "ckpt/test_files.hpp"

namespace zl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A file from a header length, header text and `data_bytes` zero data bytes.
std::vector<unsigned char> file_of(std::uint64_t header_length, const std::string& header,
                                   std::size_t data_bytes) {
  std::vector<unsigned char> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(header_length >> (8 * i)));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_bytes, 0);
  return bytes;
}

// A file whose header length is right, holding `header` and `data_bytes` data bytes.
std::vector<unsigned char> file_of(const std::string& header, std::size_t data_bytes) {
  return file_of(header.size(), header, data_bytes);
}

class SafetensorsMalformed : public ::testing::Test {
 protected:
  // Writes `bytes` as the file under test and returns the reader's error message, after checking
  // that it is one line naming the file.
  std::string read_error(const std::vector<unsigned char>& bytes) {
    test::write_file(path_, bytes);
    const std::string message = test::error_of([&] { read_safetensors(path_); });
    EXPECT_THAT(message, HasSubstr("cannot read " + path_.string() + ": "));
    EXPECT_THAT(message, Not(HasSubstr("\n")));
    return message;
  }
  test::TempDir dir_;
  std::filesystem::path path_ = dir_.path() / "broken.safetensors";
};

const std::string kF32x2 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST_F(SafetensorsMalformed, MissingFile) {
  const auto missing = dir_.path() / "absent.safetensors";
  EXPECT_EQ(test::error_of([&] { read_safetensors(missing); }),
            "cannot read " + missing.string() + ": No such file or directory: check the path");
}

TEST_F(SafetensorsMalformed, ADirectory) {
  EXPECT_THAT(test::error_of([&] { read_safetensors(dir_.path()); }),
              HasSubstr("cannot read " + dir_.path().string() + ": Is a directory"));
}

TEST_F(SafetensorsMalformed, ShorterThanTheLengthField) {
  EXPECT_THAT(read_error({1, 2, 3, 4, 5}), HasSubstr("file is 5 bytes, too short"));
}

TEST_F(SafetensorsMalformed, TruncatedInTheHeader) {
  auto bytes = file_of(kF32x2, 8);
  bytes.resize(20);
  EXPECT_THAT(read_error(bytes), HasSubstr("header length 54 is larger than the file (20 bytes)"));
}

TEST_F(SafetensorsMalformed, TruncatedInTheData) {
  EXPECT_THAT(read_error(file_of(kF32x2, 5)),
              HasSubstr("tensor \"a\" has data_offsets [0, 8] outside the 5-byte data section"));
}

TEST_F(SafetensorsMalformed, HugeHeaderLength) {
  EXPECT_THAT(read_error(file_of(~std::uint64_t{0}, kF32x2, 8)),
              HasSubstr("header length 18446744073709551615 is larger than the file"));
}

TEST_F(SafetensorsMalformed, BadJson) {
  EXPECT_THAT(read_error(file_of(R"({"a":{"dtype":"F32",)", 0)),
              HasSubstr("header JSON is malformed near byte"));
  EXPECT_THAT(read_error(file_of(R"([1, 2])", 0)), HasSubstr("header JSON is not an object"));
}

TEST_F(SafetensorsMalformed, UnknownDtype) {
  EXPECT_THAT(read_error(file_of(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 8)),
              HasSubstr("tensor \"a\" has dtype \"I32\", which zerolab does not read"));
}

TEST_F(SafetensorsMalformed, MissingOrMistypedFields) {
  EXPECT_THAT(read_error(file_of(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8)),
              HasSubstr("no \"dtype\" string"));
  EXPECT_THAT(read_error(file_of(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)),
              HasSubstr("shape entry that is not a non-negative"));
  EXPECT_THAT(read_error(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8)),
              HasSubstr("no \"data_offsets\" pair"));
  EXPECT_THAT(read_error(file_of(R"({"__metadata__":{"step":3}})", 0)),
              HasSubstr("__metadata__ value of \"step\" is not a string"));
}

TEST_F(SafetensorsMalformed, SizeNotMatchingShape) {
  EXPECT_THAT(read_error(file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
              HasSubstr("tensor \"a\" spans 8 bytes but shape [3] of fp32 needs 12"));
  EXPECT_THAT(read_error(file_of(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],)"
                                 R"("data_offsets":[0,8]}})",
                                 8)),
              HasSubstr("needs 0"));  // the product overflows 64 bits
}

TEST_F(SafetensorsMalformed, OverlappingOffsets) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_THAT(read_error(file_of(header, 12)),
              HasSubstr("tensors \"a\" and \"b\" overlap (data_offsets [0, 8] and [4, 12])"));
}

TEST_F(SafetensorsMalformed, GapsAndTrailingBytes) {
  EXPECT_THAT(read_error(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12)),
              HasSubstr("data bytes [0, 4) before tensor \"a\" belong to no tensor"));
  EXPECT_THAT(read_error(file_of(kF32x2, 9)),
              HasSubstr("the data section has 9 bytes but the tensors cover 8"));
}

TEST_F(SafetensorsMalformed, DuplicateNames) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_THAT(read_error(file_of(header, 8)), HasSubstr("tensor \"a\" appears twice"));
}

}  // namespace
}  // namespace zl
