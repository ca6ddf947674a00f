// sha256_test.cpp — SHA-256 against the FIPS 180-2 appendix B vectors ("abc", the 448-bit message,
// one million 'a') and the empty message; the same digest whatever the pieces; files hashed whole.
#include "ckpt/sha256.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "ckpt/test_files.hpp"

namespace zl {
namespace {

std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

TEST(Sha256, FipsAbc) {
  EXPECT_EQ(sha256_hex(bytes_of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, EmptyMessage) {
  EXPECT_EQ(sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Fips448BitMessage) {
  EXPECT_EQ(sha256_hex(bytes_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, FipsOneMillionA) {
  const std::string million(1'000'000, 'a');
  EXPECT_EQ(sha256_hex(bytes_of(million)),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Padding crosses into a second block when 56..63 bytes are left over; every piece size must give
// the one-shot digest.
TEST(Sha256, SameDigestWhateverThePieces) {
  std::string message;
  for (int i = 0; i < 300; ++i) message += static_cast<char>('a' + i % 26);
  for (std::size_t length : {0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 300}) {
    const std::string_view whole(message.data(), length);
    const std::string expected = sha256_hex(bytes_of(whole));
    for (std::size_t piece : {1, 3, 63, 64, 65, 200}) {
      Sha256 hash;
      for (std::size_t at = 0; at < length; at += piece) {
        hash.update(bytes_of(whole.substr(at, piece)));
      }
      EXPECT_EQ(to_hex(hash.finish()), expected) << "length " << length << ", pieces of " << piece;
    }
  }
}

TEST(Sha256, FileHashIsTheHashOfItsBytes) {
  test::TempDir dir;
  const auto path = dir.path() / "million.txt";
  const std::string million(1'000'000, 'a');
  test::write_file(path, {million.begin(), million.end()});
  EXPECT_EQ(sha256_file_hex(path),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  const auto missing = dir.path() / "absent";
  EXPECT_EQ(test::error_of([&] { sha256_file_hex(missing); }),
            "cannot read " + missing.string() + ": No such file or directory: check the path");
}

}  // namespace
}  // namespace zl
