// consolidate_test.cpp — consolidate writes the full parameters (and with --with-optimizer the Adam
// moments) under their model names and shapes, the same bytes from any world; bad input leaves
// OUT untouched; `zerolab consolidate` end to end; and peak memory measured with /usr/bin/time -v
// stays near one unit on a model of 8 layers of 2048 x 2048.
#include "ckpt/consolidate.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "ckpt/checkpoint_support.hpp"
#include "ckpt/safetensors.hpp"
#include "ckpt/test_files.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const MlpConfig kSmall{3, 37, 5, 3};

// The fill values of one parameter's `tensor`: elements [offset, offset + numel) of its unit.
std::vector<float> expected_values(std::size_t unit, const ParamSlot& param, ShardTensor tensor) {
  std::vector<float> values;
  for (std::int64_t e = 0; e < param.numel; ++e) {
    values.push_back(test::fill_value(unit, tensor, param.offset_elems + e));
  }
  return values;
}

TEST(Consolidate, WritesTheFullParametersUnderTheirModelNames) {
  test::TempDir dir;
  test::save_filled(dir.path() / "ckpt", kSmall, 3, 7);
  const auto out = dir.path() / "model.safetensors";
  const ConsolidateResult result = consolidate(dir.path() / "ckpt", out, false);
  EXPECT_EQ(result.step, 7);
  EXPECT_EQ(result.tensors, 6);
  EXPECT_EQ(result.param_elems, 222 + 1406 + 114);
  EXPECT_EQ(result.output_bytes, std::filesystem::file_size(out));

  const SafetensorsFile file = read_safetensors_file(out);
  // "format": "pt" for transformers' from_pretrained; the model's configuration for --init.
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"format", "pt"},
                                                               {"model", "mlp"},
                                                               {"layers", "3"},
                                                               {"width", "37"},
                                                               {"in", "5"},
                                                               {"classes", "3"},
                                                               {"step", "7"}}));
  const auto layout = test::mlp_layout(kSmall, 3);
  std::vector<std::string> names;
  for (const auto& tensor : file.tensors) names.push_back(tensor.name);
  EXPECT_THAT(names, ::testing::ElementsAre("layers.0.weight", "layers.0.bias", "layers.1.weight",
                                            "layers.1.bias", "layers.2.weight", "layers.2.bias"));
  for (std::size_t u = 0; u < layout.size(); ++u) {
    for (const auto& param : layout[u].params) {
      const TensorRecord& tensor = find_tensor(file.tensors, param.name);
      EXPECT_EQ(tensor.dtype, DType::F32);
      EXPECT_EQ(tensor.shape, param.shape) << param.name;
      EXPECT_EQ(test::bits(to_floats(tensor)),
                test::bits(expected_values(u, param, ShardTensor::Params)))
          << param.name;
    }
  }
  EXPECT_EQ(find_tensor(file.tensors, "layers.2.weight").shape, (Shape{3, 37}));
}

TEST(Consolidate, WithOptimizerAddsTheAdamMomentsAfterEachUnitsParameters) {
  test::TempDir dir;
  test::save_filled(dir.path(), kSmall, 2, 4);
  const auto out = dir.path() / "full.safetensors";
  EXPECT_EQ(consolidate(dir.path(), out, true).tensors, 18);
  const auto tensors = read_safetensors(out);
  EXPECT_EQ(tensors[0].name, "layers.0.weight");
  EXPECT_EQ(tensors[1].name, "layers.0.bias");
  EXPECT_EQ(tensors[2].name, "layers.0.weight.exp_avg");
  EXPECT_EQ(tensors[3].name, "layers.0.bias.exp_avg");
  EXPECT_EQ(tensors[4].name, "layers.0.weight.exp_avg_sq");
  EXPECT_EQ(tensors[5].name, "layers.0.bias.exp_avg_sq");
  EXPECT_EQ(tensors[6].name, "layers.1.weight");
  const auto layout = test::mlp_layout(kSmall, 2);
  for (std::size_t u = 0; u < layout.size(); ++u) {
    for (const auto& param : layout[u].params) {
      for (const ShardTensor tensor : kShardTensors) {
        const std::string name = tensor == ShardTensor::Params
                                     ? param.name
                                     : param.name + "." + std::string(shard_tensor_suffix(tensor));
        const TensorRecord& record = find_tensor(tensors, name);
        EXPECT_EQ(record.shape, param.shape);
        EXPECT_EQ(test::bits(to_floats(record)), test::bits(expected_values(u, param, tensor)))
            << name;
      }
    }
  }
}

TEST(Consolidate, SameBytesFromAnyWorld) {
  test::TempDir dir;
  std::vector<std::vector<unsigned char>> outputs;
  for (const int world : {1, 3, 5}) {
    const auto ckpt = dir.path() / fmt::format("w{}", world);
    test::save_filled(ckpt, kSmall, world, 7);
    const auto out = dir.path() / fmt::format("w{}.safetensors", world);
    consolidate(ckpt, out, true);
    outputs.push_back(test::file_bytes(out));
  }
  EXPECT_EQ(outputs[0], outputs[1]);
  EXPECT_EQ(outputs[0], outputs[2]);
}

TEST(Consolidate, OutInAMissingDirectory) {
  test::TempDir dir;
  test::save_filled(dir.path() / "ckpt", kSmall, 2, 1);
  const auto out = dir.path() / "no" / "such" / "model.safetensors";
  EXPECT_EQ(test::error_of([&] { consolidate(dir.path() / "ckpt", out, false); }),
            "consolidate output " + out.string() + ": directory " + out.parent_path().string() +
                " does not exist: create it or choose another path");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "no"));
}

TEST(Consolidate, ABadCheckpointLeavesOutUntouched) {
  test::TempDir dir;
  const Manifest manifest = test::save_filled(dir.path() / "ckpt", kSmall, 2, 1);
  const auto out = dir.path() / "model.safetensors";
  test::write_file(out, {'o', 'l', 'd'});
  const auto rank1 = manifest.step_dir / "rank-1.safetensors";
  auto bytes = test::file_bytes(rank1);
  bytes.back() ^= 0x80;
  test::write_file(rank1, bytes);
  EXPECT_THAT(test::error_of([&] { consolidate(dir.path() / "ckpt", out, true); }),
              StartsWith("cannot read " + rank1.string() + ": its sha256 is "));
  EXPECT_EQ(test::file_bytes(out), (std::vector<unsigned char>{'o', 'l', 'd'}));
  EXPECT_THAT(dir.entries(), ::testing::ElementsAre("ckpt", "model.safetensors"));
}

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `prefix zerolab args` with stdout and stderr captured in `dir`.
CommandResult run_zerolab(const std::filesystem::path& dir, const std::string& args,
                          const std::string& prefix = "") {
  const auto out = dir / "stdout.txt";
  const auto err = dir / "stderr.txt";
  const std::string command = prefix + std::string(zl::test::zerolab_binary()) + " " + args +
                              " >" + out.string() + " 2>" + err.string();
  const int status = std::system(command.c_str());
  CommandResult result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return result;
}

TEST(ConsolidateCommand, WritesTheFileAndSaysWhat) {
  test::TempDir dir;
  test::save_filled(dir.path() / "ckpt", kSmall, 3, 7);
  const auto out = dir.path() / "model.safetensors";
  const auto consolidated =
      run_zerolab(dir.path(), "consolidate " + (dir.path() / "ckpt").string() + " " + out.string());
  EXPECT_EQ(consolidated.exit_code, 0) << consolidated.err;
  EXPECT_EQ(
      consolidated.out,
      fmt::format("consolidated step 7 of {}: 6 tensors, 1742 parameters, {} bytes -> {}\n",
                  (dir.path() / "ckpt").string(), std::filesystem::file_size(out), out.string()));
  EXPECT_EQ(read_safetensors(out).size(), 6u);
}

// A shard holding a value training never writes, under a checksum made over it, is a bad input
// to every reader: consolidate and train --resume both exit 3 naming the file.
TEST(ConsolidateCommand, ANonFiniteShardIsABadInputToConsolidateAndToResume) {
  test::TempDir dir;
  const auto layout = test::mlp_layout(kSmall, 3);
  const Manifest manifest = test::save_checkpoint(dir.path() / "ckpt", kSmall, 3, 7, [&](int rank) {
    ShardState state = test::filled_shards(layout, rank, 3);
    if (rank == 1) shard_member(state, ShardTensor::Params)[1][5] = NAN;
    return state;
  });
  const std::string shard = (manifest.step_dir / "rank-1.safetensors").string();
  const std::string ckpt = (dir.path() / "ckpt").string();
  for (const std::string& args :
       {"consolidate " + ckpt + " " + (dir.path() / "m.safetensors").string(),
        "train --layers 3 --width 37 --in 5 --classes 3 --stage 1 --world 3 --steps 9 --quiet "
        "--lr 0.003 --beta2 0.95 --weight-decay 0.1 --seed 7 --resume " + ckpt}) {
    const auto run = run_zerolab(dir.path(), args);
    EXPECT_EQ(run.exit_code, 3) << args << "\n" << run.err;
    EXPECT_THAT(run.err, HasSubstr("cannot read " + shard)) << args;
    EXPECT_THAT(run.err, HasSubstr("is nan, which training never writes")) << args;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
  }
}

TEST(ConsolidateCommand, BadInputIsOneLineAndExitCode) {
  test::TempDir dir;
  const auto missing = dir.path() / "absent";
  const auto failed =
      run_zerolab(dir.path(), "consolidate " + missing.string() + " " +
                                  (dir.path() / "m.safetensors").string() + " --with-optimizer");
  EXPECT_EQ(failed.exit_code, 3);  // a bad input file
  EXPECT_EQ(failed.err, "zerolab: error: cannot read checkpoint " + missing.string() +
                            ": no such directory: check the path\n");
  const auto usage = run_zerolab(dir.path(), "consolidate " + missing.string());
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("OUT is required"));
  const auto both = run_zerolab(dir.path(), "consolidate " + missing.string() + " " +
                                                (dir.path() / "m.safetensors").string() + " --hf " +
                                                (dir.path() / "hf").string());
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("excludes"));
  EXPECT_TRUE(dir.entries().empty());
}

// Max RSS in bytes that `/usr/bin/time -v` reports for `zerolab args`.
std::int64_t peak_rss_bytes(const std::filesystem::path& dir, const std::string& args) {
  const auto result = run_zerolab(dir, args, "/usr/bin/time -v ");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::smatch match;
  const std::regex pattern("Maximum resident set size \\(kbytes\\): (\\d+)");
  if (!std::regex_search(result.err, match, pattern)) {
    ADD_FAILURE() << "no max RSS in /usr/bin/time output: " << result.err;
    return 0;
  }
  return std::stoll(match[1].str()) * 1024;
}

// The model is 8 units of 2048 x 2048 + 2048 (16.8 MB each): 134 MB of parameters, 403 MB with the
// Adam moments, saved by 4 ranks. Streaming holds one unit's flat buffer and one old shard, so the
// peak stays far below the file it writes.
TEST(ConsolidateMemory, PeakRssIsAboutOneUnitNotTheModel) {
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/time"))
      << "/usr/bin/time is missing: install the Debian package time (bash scripts/setup.sh)";
  test::TempDir dir;
  const MlpConfig big{8, 2048, 2048, 2048};
  const Manifest manifest = test::save_filled(dir.path() / "ckpt", big, 4, 100);
  const std::int64_t unit_bytes = manifest.units[0].numel * 4;
  const std::int64_t params_bytes = total_numel(manifest.units) * 4;

  const auto params_out = dir.path() / "params.safetensors";
  const std::int64_t params_rss = peak_rss_bytes(
      dir.path(), "consolidate " + (dir.path() / "ckpt").string() + " " + params_out.string());
  const auto full_out = dir.path() / "full.safetensors";
  const std::int64_t full_rss =
      peak_rss_bytes(dir.path(), "consolidate " + (dir.path() / "ckpt").string() + " " +
                                     full_out.string() + " --with-optimizer");
  const auto full_bytes = static_cast<std::int64_t>(std::filesystem::file_size(full_out));
  std::printf(
      "consolidate peak RSS: %.1f MB for %.1f MB of parameters, %.1f MB with Adam moments "
      "(one unit: %.1f MB)\n",
      params_rss / 1e6, params_bytes / 1e6, full_rss / 1e6, unit_bytes / 1e6);
  EXPECT_LT(params_rss, params_bytes / 3);
  EXPECT_LT(full_rss, full_bytes / 8);
  EXPECT_LT(full_rss, 4 * unit_bytes);

  const SafetensorsIndex index = read_safetensors_index(full_out);
  const ParamSlot& bias = manifest.units[7].params[1];
  EXPECT_EQ(test::bits(to_floats(read_tensor(index, "layers.7.bias.exp_avg_sq"))),
            test::bits(expected_values(7, bias, ShardTensor::ExpAvgSq)));
  EXPECT_EQ(std::filesystem::file_size(params_out),
            read_safetensors_index(params_out).tensors.back().offset_bytes +
                read_safetensors_index(params_out).tensors.back().size_bytes);
}

}  // namespace
}  // namespace zl
