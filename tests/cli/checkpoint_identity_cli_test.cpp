// checkpoint_identity_cli_test.cpp — what a checkpoint says about itself, through the zerolab
// binary: every run has its own id, which the manifest and every rank file carry; a hand-edited
// manifest or a rank file copied in from another run ends a resume or a consolidate with exit
// code 3 and one line naming the file; a checkpoint of format version 1 (no run id, no manifest
// checksum) still resumes, bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "ckpt/safetensors.hpp"
#include "support/cli_fixture.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;
using test::kSmallShape;

constexpr int kInput = 3;  // a file the run reads is wrong (docs/usage.md, "Exit codes")

class CheckpointIdentity : public CliTest {
 protected:
  const std::string args_ = "train --stage 1 --world 2 " + kSmallShape;

  // Trains 2 steps and checkpoints them into `name`; returns the step directory.
  fs::path save(const std::string& name) {
    const auto run = zerolab(args_ + " --steps 2 --checkpoint-dir " + (dir_ / name).string());
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return dir_ / name / "step-00000002";
  }

  static nlohmann::ordered_json read_json(const fs::path& path) {
    std::ifstream in(path);
    return nlohmann::ordered_json::parse(in);
  }

  static void write_json(const fs::path& path, const nlohmann::ordered_json& json) {
    std::ofstream(path) << json.dump(2) << "\n";
  }

  // Expects resuming and consolidating `ck` to fail with exit code 3 and one line holding `part`.
  void expect_refused(const fs::path& ck, const std::string& part) {
    for (const std::string& command :
         {args_ + " --steps 4 --resume " + ck.string(),
          "consolidate " + ck.string() + " " + (dir_ / "out.safetensors").string()}) {
      const auto run = zerolab(command);
      EXPECT_EQ(run.exit_code, kInput) << command << "\n" << run.err;
      EXPECT_NE(run.err.find(part), std::string::npos) << command << "\n" << run.err;
      EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << command << "\n" << run.err;
    }
  }
};

TEST_F(CheckpointIdentity, EveryRunHasItsOwnIdOnTheManifestAndEveryRankFile) {
  const fs::path a = save("a"), b = save("b");
  const std::string id_a = read_json(a / "manifest.json")["run_id"];
  const std::string id_b = read_json(b / "manifest.json")["run_id"];
  EXPECT_EQ(id_a.size(), 32u);
  EXPECT_NE(id_a, id_b);
  for (const std::string rank_file : {"rank-0.safetensors", "rank-1.safetensors"}) {
    EXPECT_EQ(read_safetensors_index(a / rank_file).metadata.at("run_id"), id_a);
  }
}

TEST_F(CheckpointIdentity, AHandEditedManifestIsRefusedNamingIt) {
  const fs::path step = save("ck");
  auto json = read_json(step / "manifest.json");
  json["adamw"]["lr"] = 0.5;
  write_json(step / "manifest.json", json);
  expect_refused(dir_ / "ck", "cannot read " + (step / "manifest.json").string() +
                                  ": its content hashes to manifest_sha256 ");
}

TEST_F(CheckpointIdentity, ARankFileOfAnotherRunIsRefusedNamingBothIds) {
  const fs::path ours = save("ours"), theirs = save("theirs");
  fs::copy_file(theirs / "rank-1.safetensors", ours / "rank-1.safetensors",
                fs::copy_options::overwrite_existing);
  const std::string our_id = read_json(ours / "manifest.json")["run_id"];
  const std::string their_id = read_json(theirs / "manifest.json")["run_id"];
  expect_refused(dir_ / "ours", "cannot read " + (ours / "rank-1.safetensors").string() +
                                    ": it was written by run " + their_id +
                                    " but the manifest is run " + our_id + "'s");
}

// A checkpoint written before run ids (format version 1) resumes as it always did, bitwise, and
// the run's next checkpoint is version 2 with the resuming run's id.
TEST_F(CheckpointIdentity, AVersionOneCheckpointStillResumesBitwise) {
  const fs::path step = save("ck");
  auto json = read_json(step / "manifest.json");
  json["format_version"] = 1;
  json.erase("run_id");
  json.erase("manifest_sha256");
  write_json(step / "manifest.json", json);
  const auto resumed =
      zerolab(args_ + " --steps 4 --resume " + (dir_ / "ck").string() + " --checkpoint-dir " +
              (dir_ / "next").string() + " --save-final " + (dir_ / "resumed.st").string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto whole = zerolab(args_ + " --steps 4 --save-final " + (dir_ / "whole.st").string());
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(slurp(dir_ / "resumed.st"), slurp(dir_ / "whole.st"));
  const Manifest next = read_manifest(dir_ / "next");
  EXPECT_EQ(next.format_version, 2);
  EXPECT_EQ(next.run_id.size(), 32u);
}

}  // namespace
}  // namespace zl
