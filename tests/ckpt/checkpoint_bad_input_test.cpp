// checkpoint_bad_input_test.cpp — every damaged checkpoint read_manifest can meet gives a one-line
// zl::Error naming the file and the problem: a wrong sha256, a missing or truncated rank file,
// tensors that disagree with the manifest, a malformed or hand-edited manifest, a rank file of
// another run, a latest that points nowhere. Manifests of format version 1 still read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_support.hpp"
#include "ckpt/safetensors_stream.hpp"
#include "ckpt/sha256.hpp"
#include "ckpt/test_files.hpp"

namespace zl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const MlpConfig kSmall{3, 37, 5, 3};

class CheckpointBadInput : public ::testing::Test {
 protected:
  void SetUp() override { manifest_ = test::save_filled(dir_.path(), kSmall, 3, 7); }

  // read_manifest's error, after checking it is one line that starts "cannot read <shown>: ".
  std::string read_error(const std::filesystem::path& shown) {
    const std::string message = test::error_of([&] { read_manifest(dir_.path()); });
    EXPECT_THAT(message, StartsWith("cannot read " + shown.string() + ": "));
    EXPECT_THAT(message, Not(HasSubstr("\n")));
    return message;
  }

  std::filesystem::path rank_path(int rank) const {
    return manifest_.step_dir / rank_file_name(rank);
  }
  std::filesystem::path manifest_path() const { return manifest_.step_dir / "manifest.json"; }

  // Rewrites manifest.json after `edit` changes its JSON. Resealed, its manifest_sha256 is made
  // over the edited content (as a writer would), so only the other checks can catch the edit.
  void edit_manifest(const std::function<void(nlohmann::json&)>& edit, bool reseal = true) {
    const auto bytes = test::file_bytes(manifest_path());
    auto json = nlohmann::json::parse(bytes.begin(), bytes.end());
    edit(json);
    if (reseal && json.contains("manifest_sha256")) {
      json.erase("manifest_sha256");
      const std::string canonical = json.dump();  // nlohmann::json sorts its keys
      json["manifest_sha256"] =
          sha256_hex(std::as_bytes(std::span(canonical.data(), canonical.size())));
    }
    const std::string text = json.dump();
    test::write_file(manifest_path(), {text.begin(), text.end()});
  }

  // The manifest error after `edit`, from a fresh copy of the manifest.
  std::string manifest_error(const std::function<void(nlohmann::json&)>& edit) {
    const auto original = test::file_bytes(manifest_path());
    edit_manifest(edit);
    const std::string message = read_error(manifest_path());
    test::write_file(manifest_path(), original);
    return message;
  }

  // The manifest error after `edit` without resealing, from a fresh copy of the manifest.
  std::string manifest_error_unsealed(const std::function<void(nlohmann::json&)>& edit) {
    const auto original = test::file_bytes(manifest_path());
    edit_manifest(edit, false);
    const std::string message = read_error(manifest_path());
    test::write_file(manifest_path(), original);
    return message;
  }

  // The manifest_sha256 the saved manifest records.
  std::string sealed_sha256() const {
    const auto bytes = test::file_bytes(manifest_path());
    return nlohmann::json::parse(bytes.begin(), bytes.end())["manifest_sha256"];
  }

  test::TempDir dir_;
  Manifest manifest_;
};

TEST_F(CheckpointBadInput, WrongSha256) {
  auto bytes = test::file_bytes(rank_path(1));
  bytes[bytes.size() - 5] ^= 0x01;  // one bit of the last tensor's data
  test::write_file(rank_path(1), bytes);
  EXPECT_EQ(read_error(rank_path(1)),
            "cannot read " + rank_path(1).string() + ": its sha256 is " +
                sha256_file_hex(rank_path(1)) + " but the manifest records " +
                manifest_.files[1].sha256 +
                ": the file is corrupted: restore it or use another step");
}

TEST_F(CheckpointBadInput, MissingRankFile) {
  std::filesystem::remove(rank_path(2));
  EXPECT_EQ(read_error(rank_path(2)),
            "cannot read " + rank_path(2).string() +
                ": the file is missing (the manifest lists it): restore it or use another step");
}

TEST_F(CheckpointBadInput, TruncatedRankFile) {
  auto bytes = test::file_bytes(rank_path(0));
  const std::size_t full = bytes.size();
  bytes.resize(full - 100);
  test::write_file(rank_path(0), bytes);
  EXPECT_EQ(read_error(rank_path(0)),
            fmt::format("cannot read {}: it is {} bytes but the manifest records {}: the file is "
                        "truncated or was replaced: restore it or use another step",
                        rank_path(0).string(), full - 100, full));
}

// A rank file from another layout whose size and sha256 the manifest was made to match: only the
// shape check can tell.
TEST_F(CheckpointBadInput, TensorShapesDisagreeWithTheManifest) {
  const auto layout5 = test::mlp_layout(kSmall, 5);
  const FileEntry entry = write_rank_file(dir_.path() / "other", 0, layout5,
                                          test::filled_shards(layout5, 0, 5), test::kTestRunId);
  std::filesystem::copy_file(dir_.path() / "other" / entry.name, rank_path(0),
                             std::filesystem::copy_options::overwrite_existing);
  edit_manifest([&](nlohmann::json& json) {
    json["files"][0]["bytes"] = entry.size_bytes;
    json["files"][0]["sha256"] = entry.sha256;
  });
  EXPECT_THAT(read_error(rank_path(0)),
              HasSubstr(": tensor \"layers.0.params\" is F32 [64] but the manifest needs F32 "
                        "[128]: the file belongs to another checkpoint"));
}

TEST_F(CheckpointBadInput, RankFileMissingATensor) {
  // A rank file of one tensor with `metadata`, which the manifest was made to match.
  const auto write_rank0 = [&](const std::map<std::string, std::string>& metadata) {
    std::filesystem::remove(rank_path(0));
    SafetensorsStreamWriter writer(rank_path(0), {{"layers.0.params", DType::F32, {128}}},
                                   metadata);
    const std::vector<float> zeros(128);
    writer.write_tensor("layers.0.params", std::as_bytes(std::span(zeros)));
    const std::uint64_t size_bytes = writer.commit();
    edit_manifest([&](nlohmann::json& json) {
      json["files"][0]["bytes"] = size_bytes;
      json["files"][0]["sha256"] = sha256_file_hex(rank_path(0));
    });
  };
  write_rank0({});
  EXPECT_THAT(read_error(rank_path(0)),
              HasSubstr(": its metadata has no run_id, which manifest format 2 needs"));
  write_rank0({{"run_id", std::string(test::kTestRunId)}});
  EXPECT_THAT(read_error(rank_path(0)),
              HasSubstr(": it has no tensor \"layers.0.exp_avg\", which the manifest's unit "
                        "\"layers.0\" needs"));
}

TEST_F(CheckpointBadInput, RankFileNotSafetensors) {
  const auto size_bytes = std::filesystem::file_size(rank_path(2));
  test::write_file(rank_path(2), std::vector<unsigned char>(size_bytes, 0xff));
  EXPECT_THAT(read_error(rank_path(2)), HasSubstr("header length"));
}

TEST_F(CheckpointBadInput, MalformedManifestJson) {
  const std::string text = "{\"format\": \"zerolab-checkpoint\", \"step\": ";
  test::write_file(manifest_path(), {text.begin(), text.end()});
  EXPECT_EQ(read_error(manifest_path()),
            "cannot read " + manifest_path().string() +
                ": JSON is malformed near byte 42: the manifest is damaged: restore it or use "
                "another step");
}

TEST_F(CheckpointBadInput, ManifestNotAnObject) {
  test::write_file(manifest_path(), {'[', ']'});
  EXPECT_THAT(read_error(manifest_path()), HasSubstr(": the manifest is not a JSON object"));
}

TEST_F(CheckpointBadInput, ManifestMissingKeys) {
  EXPECT_EQ(manifest_error([](auto& json) { json.erase("world"); }),
            "cannot read " + manifest_path().string() +
                ": key \"world\" is missing: the manifest is damaged: restore it or use another "
                "step");
  EXPECT_THAT(manifest_error([](auto& json) { json["units"][1]["params"][0].erase("shape"); }),
              HasSubstr(": key \"units[1].params[0].shape\" is missing"));
  EXPECT_THAT(manifest_error([](auto& json) { json["adamw"].erase("eps"); }),
              HasSubstr(": key \"adamw.eps\" is missing"));
  EXPECT_THAT(manifest_error([](auto& json) { json["files"][2].erase("sha256"); }),
              HasSubstr(": key \"files[2].sha256\" is missing"));
  EXPECT_THAT(manifest_error([](auto& json) { json.erase("data"); }),
              HasSubstr(": key \"data\" is missing"));
}

TEST_F(CheckpointBadInput, ManifestWrongTypes) {
  EXPECT_THAT(manifest_error([](auto& json) { json["world"] = "3"; }),
              HasSubstr(": key \"world\" is not an integer"));
  EXPECT_THAT(manifest_error([](auto& json) { json["adamw"]["lr"] = true; }),
              HasSubstr(": key \"adamw.lr\" is not a number"));
  EXPECT_THAT(manifest_error([](auto& json) { json["units"] = nlohmann::json::object(); }),
              HasSubstr(": key \"units\" is not an array"));
  EXPECT_THAT(manifest_error([](auto& json) { json["units"][0]["params"][1]["shape"] = {"37"}; }),
              HasSubstr(": key \"units[0].params[1].shape[0]\" is not an integer"));
  EXPECT_THAT(manifest_error([](auto& json) { json["model"] = 3; }),
              HasSubstr(": key \"model\" is not an object"));
  EXPECT_THAT(manifest_error([](auto& json) { json["files"][0]["bytes"] = -1; }),
              HasSubstr(": key \"files[0].bytes\" is not a non-negative integer"));
  EXPECT_THAT(manifest_error([](auto& json) { json["stage"] = 4; }),
              HasSubstr(": key \"stage\" is 4, outside [0, 3]"));
}

TEST_F(CheckpointBadInput, ManifestInconsistentWithItself) {
  EXPECT_THAT(manifest_error([](auto& json) { json["units"][1]["shard_elems"] = 500; }),
              HasSubstr(": unit \"layers.1\" has padded_elems 1536 and shard_elems 500, but world "
                        "3 pads 1406 elements to 1536: the manifest is damaged"));
  EXPECT_THAT(manifest_error([](auto& json) { json["units"][0]["params"][1]["offset_elems"] = 0; }),
              HasSubstr(": parameter \"layers.0.bias\" starts at element 0, not 185"));
  EXPECT_THAT(manifest_error([](auto& json) { json["world"] = 4; }), HasSubstr("but world 4 pads"));
  EXPECT_THAT(manifest_error([](auto& json) { json["files"].erase(2); }),
              HasSubstr(": it lists 2 files for world 3"));
  EXPECT_THAT(manifest_error([](auto& json) { json["files"][1]["sha256"] = "abc"; }),
              HasSubstr(": sha256 of rank-1.safetensors is \"abc\", not 64 lowercase hex digits"));
  EXPECT_THAT(manifest_error([](auto& json) { json["data"]["next_sample"] = 5; }),
              HasSubstr(": data.next_sample is 5 but step * gradient_accumulation_steps * world * "
                        "micro_batch is 84"));
}

TEST_F(CheckpointBadInput, ManifestOfAnotherFormatOrVersion) {
  EXPECT_THAT(manifest_error([](auto& json) { json["format"] = "deepspeed"; }),
              HasSubstr(": format is \"deepspeed\", not \"zerolab-checkpoint\""));
  EXPECT_THAT(manifest_error([](auto& json) { json["format_version"] = 3; }),
              HasSubstr(": format_version 3 is not one this zerolab reads (1 to 2): use the "
                        "zerolab that wrote it"));
  EXPECT_THAT(manifest_error([](auto& json) { json["format_version"] = 0; }),
              HasSubstr(": format_version 0 is not one this zerolab reads (1 to 2)"));
  EXPECT_THAT(manifest_error([](auto& json) { json["model"]["kind"] = "gpt2"; }),
              HasSubstr(": model kind \"gpt2\" is not one this zerolab reads (mlp, gpt)"));
}

TEST_F(CheckpointBadInput, HandEditedManifestFailsItsChecksum) {
  const std::string message = manifest_error_unsealed([](auto& json) { json["seed"] = 8; });
  EXPECT_THAT(message, HasSubstr(": its content hashes to manifest_sha256 "));
  EXPECT_THAT(message, HasSubstr(" but it records " + sealed_sha256() +
                                 ": the manifest was edited or damaged: restore it or use "
                                 "another step"));
  EXPECT_THAT(manifest_error_unsealed([](auto& json) { json["adamw"]["lr"] = 0.5; }),
              HasSubstr(": its content hashes to manifest_sha256 "));
  EXPECT_THAT(manifest_error_unsealed([](auto& json) { json["run_id"] = std::string(32, 'f'); }),
              HasSubstr(": its content hashes to manifest_sha256 "));
  EXPECT_THAT(manifest_error_unsealed([](auto& json) { json.erase("manifest_sha256"); }),
              HasSubstr(": key \"manifest_sha256\" is missing"));
  // Layout and key order are not content: a manifest rewritten compact, keys sorted, still reads.
  edit_manifest([](auto&) {}, false);
  EXPECT_EQ(read_manifest(dir_.path()).run_id, test::kTestRunId);
}

TEST_F(CheckpointBadInput, TruncatedManifest) {
  auto bytes = test::file_bytes(manifest_path());
  bytes.resize(bytes.size() / 2);
  test::write_file(manifest_path(), bytes);
  EXPECT_THAT(read_error(manifest_path()), HasSubstr(": JSON is malformed near byte "));
}

// A rank file of the same layout written by another run, copied in: the run ids tell.
TEST_F(CheckpointBadInput, RankFileOfAnotherRun) {
  constexpr std::string_view kOtherRun = "fedcba9876543210fedcba9876543210";
  const auto layout = test::mlp_layout(kSmall, 3);
  const FileEntry entry = write_rank_file(dir_.path() / "other", 1, layout,
                                          test::filled_shards(layout, 1, 3), kOtherRun);
  std::filesystem::copy_file(dir_.path() / "other" / entry.name, rank_path(1),
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(read_error(rank_path(1)),
            fmt::format("cannot read {}: it was written by run {} but the manifest is run {}'s: "
                        "the file was copied in from another run: restore it or use another step",
                        rank_path(1).string(), kOtherRun, test::kTestRunId));
}

// Version 1 (before run ids and the manifest checksum) still reads; its files are still checked.
TEST_F(CheckpointBadInput, VersionOneManifestStillReads) {
  edit_manifest([](auto& json) {
    json["format_version"] = 1;
    json.erase("run_id");
    json.erase("manifest_sha256");
  });
  const Manifest old = read_manifest(dir_.path());
  EXPECT_EQ(old.format_version, 1);
  EXPECT_EQ(old.run_id, "");
  EXPECT_EQ(old.files, manifest_.files);
  auto bytes = test::file_bytes(rank_path(2));
  bytes[bytes.size() - 1] ^= 0x01;
  test::write_file(rank_path(2), bytes);
  EXPECT_THAT(read_error(rank_path(2)), HasSubstr(": the file is corrupted"));
}

TEST_F(CheckpointBadInput, LatestPointsNowhere) {
  const auto latest = dir_.path() / "latest";
  const auto set_latest = [&](const std::string& text) {
    test::write_file(latest, {text.begin(), text.end()});
  };
  set_latest("step-00000099\n");
  EXPECT_EQ(read_error(latest), "cannot read " + latest.string() +
                                    ": it names step-00000099, but " +
                                    (dir_.path() / "step-00000099" / "manifest.json").string() +
                                    " does not exist: point latest at a complete step-* directory");
  set_latest("");
  EXPECT_THAT(read_error(latest), HasSubstr(": it holds \"\", not the name of a step directory"));
  set_latest("../elsewhere\n");
  EXPECT_THAT(read_error(latest), HasSubstr(": it holds \"../elsewhere\""));
}

// Values training never writes (NaN, an infinity, a negative second moment), in a file whose
// checksum was made over them: loading names the file, the tensor and the element.
TEST(CheckpointBadValues, NonFiniteOrNegativeSecondMomentsAreRefused) {
  const auto layout = test::mlp_layout(kSmall, 2);
  struct Damage {
    ShardTensor tensor;
    float value;
    std::string says;
  };
  for (const Damage& damage :
       {Damage{ShardTensor::Params, NAN, "is nan, which training never writes:"},
        Damage{ShardTensor::ExpAvg, -INFINITY, "is -inf, which training"},
        Damage{ShardTensor::ExpAvgSq, -0.5f,
               "is -0.5, which training never writes (Adam's second "
               "moment is never negative)"}}) {
    test::TempDir dir;
    const Manifest manifest = test::save_checkpoint(dir.path(), kSmall, 2, 3, [&](int rank) {
      ShardState state = test::filled_shards(layout, rank, 2);
      if (rank == 1) shard_member(state, damage.tensor)[1][5] = damage.value;
      return state;
    });
    const std::string message = test::error_of([&] { test::load_all(manifest, kSmall, 2); });
    EXPECT_THAT(message,
                HasSubstr("cannot read " + (manifest.step_dir / "rank-1.safetensors").string()));
    EXPECT_THAT(message, HasSubstr(shard_tensor_name(layout[1].name, damage.tensor)));
    EXPECT_THAT(message, HasSubstr("element 5 " + damage.says));
    EXPECT_THAT(message, HasSubstr("restore the file or resume from another step"));
  }
}

TEST(CheckpointNotThere, DirectoryMissingOrNotACheckpoint) {
  test::TempDir dir;
  const auto missing = dir.path() / "absent";
  EXPECT_EQ(test::error_of([&] { read_manifest(missing); }),
            "cannot read checkpoint " + missing.string() + ": no such directory: check the path");
  EXPECT_EQ(test::error_of([&] { read_manifest(dir.path()); }),
            "cannot read checkpoint " + dir.path().string() +
                ": it has neither a latest file nor a manifest.json: pass a checkpoint directory "
                "or one of its step-* directories");
}

}  // namespace
}  // namespace zl
