// tests/calibration/test_calibration.cpp — calibration files (calibration/calibration.h): loading
// both curve forms, interpolation inside, below and past the points, the dtype-specific curve
// winning over `any`, identity free, one-line errors naming file and key; every shipped file
// loads; the host a file was measured on against this one. The hidden case [.calibrate-output] checks a file compcoll-bench calibrate just wrote
// (ctest bench_calibrate_loads runs it with COMPCOLL_CALIBRATION_FILE set).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "calibration/calibration.h"
#include "codec/codec.h"
#include "config/yaml_node.h"

using namespace compcoll;
using calib::Op;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("compcoll-test-calibration-" + name + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

const char* const kHeader = "device: \"test device\"\nsource: measured\ndate: 2026-01-01\nstatement: made up\n";

std::string load_error(const std::string& name, const std::string& curves) {
  const std::string path = write_file(name, std::string(kHeader) + curves);
  try {
    calib::load_calibration(path);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("calibration: points interpolate linearly, extrapolate at the ends' rates", "[calibration]") {
  const std::string path = write_file("points", std::string(kHeader) +
      "machine: {cpu: x, threads: 1}\n"
      "curves:\n"
      "  - {op: compress, codec: gauss-exp, dtype: bf16, points: [[1000, 2.0e-6], [2000, 3.0e-6], [4000, 7.0e-6]]}\n"
      "  - {op: reduce, dtype: any, latency: 1us, throughput: 1GB/s}\n"
      "  - {op: reduce, dtype: fp32, points: [[4096, 1.0e-6]]}\n");
  const calib::Calibration cal = calib::load_calibration(path);
  CHECK(cal.device == "test device");
  CHECK(cal.source == "measured");
  CHECK(cal.date == "2026-01-01");
  REQUIRE(cal.curves.size() == 3);
  CHECK(cal.label().find("measured calibration (test device, 2026-01-01") == 0);

  const auto s = [&](Op op, const char* codec, DType t, double bytes) { return cal.seconds(op, codec, t, bytes); };
  CHECK(s(Op::Compress, "gauss-exp", DType::BF16, 1000) == Approx(2.0e-6));
  CHECK(s(Op::Compress, "gauss-exp", DType::BF16, 1500) == Approx(2.5e-6));
  CHECK(s(Op::Compress, "gauss-exp", DType::BF16, 3000) == Approx(5.0e-6));
  CHECK(s(Op::Compress, "gauss-exp", DType::BF16, 8000) == Approx(15.0e-6));  // last segment's rate
  CHECK(s(Op::Compress, "gauss-exp", DType::BF16, 500) == Approx(1.5e-6));    // first segment's rate
  CHECK(s(Op::Compress, "gauss-exp", DType::BF16, 1) >= 0);
  // latency + bytes / throughput; a dtype-specific curve wins over `any`; one point scales.
  CHECK(s(Op::Reduce, "", DType::BF16, 1e6) == Approx(1e-6 + 1e-3));
  CHECK(s(Op::Reduce, "", DType::FP32, 8192) == Approx(2.0e-6));
  // identity runs no kernel.
  CHECK(s(Op::Compress, "identity", DType::BF16, 1e9) == 0);
  CHECK(cal.has(Op::Compress, "gauss-exp", DType::BF16));
  CHECK_FALSE(cal.has(Op::Compress, "gauss-exp", DType::FP16));
  CHECK_FALSE(cal.has(Op::Copy, "", DType::BF16));
  CHECK_THROWS_WITH(s(Op::Decompress, "gauss-exp", DType::BF16, 1000),
                    Catch::Contains("points.yaml: curves: no curve for op decompress, codec gauss-exp, dtype bf16"));
}

TEST_CASE("calibration: bad files give one line naming the file and key", "[calibration]") {
  CHECK_THAT(load_error("decreasing", "curves:\n  - {op: reduce, dtype: bf16, points: [[4096, 1e-6], [4096, 2e-6]]}\n"),
             Catch::Contains("decreasing.yaml") && Catch::Contains("bytes must increase"));
  CHECK_THAT(load_error("negative", "curves:\n  - {op: copy, dtype: any, points: [[4096, -1e-6]]}\n"),
             Catch::Contains("expected bytes > 0 and seconds >= 0"));
  CHECK_THAT(load_error("pair", "curves:\n  - {op: copy, dtype: any, points: [[4096]]}\n"),
             Catch::Contains("expected [bytes, seconds]"));
  CHECK_THAT(load_error("op", "curves:\n  - {op: squash, dtype: any, points: [[4096, 1e-6]]}\n"),
             Catch::Contains("op.yaml: curves.0.op: expected one of"));
  CHECK_THAT(load_error("dtype", "curves:\n  - {op: copy, dtype: fp8, points: [[4096, 1e-6]]}\n"),
             Catch::Contains("curves.0.dtype"));
  CHECK_THAT(load_error("nocodec", "curves:\n  - {op: compress, dtype: bf16, points: [[4096, 1e-6]]}\n"),
             Catch::Contains("codec"));
  CHECK_THAT(load_error("unknown", "curves:\n  - {op: copy, dtype: any, points: [[4096, 1e-6]], pionts: 1}\n"),
             Catch::Contains("unknown.yaml: curves.0: unknown key 'pionts'"));
  CHECK_THAT(load_error("transport", "kind: transport\nbackend: mpi\n"),
             Catch::Contains("transport.yaml: kind: a transport file (compcoll-bench transport), not a calibration"));
  CHECK_THAT(load_error("empty", "curves:\n  - {op: copy, dtype: any, points: []}\n"),
             Catch::Contains("at least one point"));
  CHECK_THAT(load_error("batch", "batch_launch: maybe\ncurves:\n  - {op: copy, dtype: any, points: [[4096, 1e-6]]}\n"),
             Catch::Contains("batch.yaml: batch_launch: expected true or false"));
  for (const std::string& e : {load_error("decreasing", "curves:\n  - {op: reduce, dtype: bf16, points: [[2, 1], [1, 2]]}\n"),
                               load_error("nocurves", "")})
    CHECK(e.find('\n') == std::string::npos);
}

TEST_CASE("calibration: the chunks its codecs coded in, 16384 unless the file says", "[calibration]") {
  const std::string curve = "curves:\n  - {op: copy, dtype: any, points: [[4096, 1e-6]]}\n";
  const auto chunk = [&](const std::string& name, const std::string& key) {
    return calib::load_calibration(write_file(name, std::string(kHeader) + key + curve)).chunk_elements;
  };
  CHECK(chunk("nochunk", "") == format::kDefaultChunkElements);
  CHECK(chunk("autochunk", "chunk_elements: auto\n") == format::kAutoChunk);
  CHECK(chunk("chunk4096", "chunk_elements: 4096\n") == 4096);
  // Every output that names the file says so where the chunks are not the default.
  const auto label = [&](const std::string& name, const std::string& key) {
    return calib::load_calibration(write_file(name, std::string(kHeader) + key + curve)).label();
  };
  CHECK(label("nochunk", "").find("chunks") == std::string::npos);
  CHECK_THAT(label("autochunk", "chunk_elements: auto\n"), Catch::EndsWith(", codecs in chunks by each message's size"));
  CHECK_THAT(label("chunk4096", "chunk_elements: 4096\n"), Catch::EndsWith(", codecs in chunks of 4096 elements"));
  for (const char* bad : {"100", "0", "65568", "big"})
    CHECK_THAT(load_error("badchunk", std::string("chunk_elements: ") + bad + "\n" + curve),
               Catch::Contains("badchunk.yaml: chunk_elements: expected auto or a multiple of 32"));
}

TEST_CASE("calibration: batch_launch is false unless the file says true", "[calibration]") {
  const std::string curve = "curves:\n  - {op: copy, dtype: any, points: [[4096, 1e-6]]}\n";
  CHECK_FALSE(calib::load_calibration(write_file("nobatch", std::string(kHeader) + curve)).batch_launch);
  CHECK(calib::load_calibration(write_file("batched", std::string(kHeader) + "batch_launch: true\n" + curve)).batch_launch);
  // The derived H100 file launches batches (DietGPU's batched API); compcoll's measured H200 file does not.
  CHECK(calib::load_calibration(std::string(COMPCOLL_SOURCE_DIR) + "/calibration/h100-derived.yaml").batch_launch);
  CHECK_FALSE(calib::load_calibration(std::string(COMPCOLL_SOURCE_DIR) + "/calibration/h200.yaml").batch_launch);
}

// Batch curves (calibrate --device cuda): a batch of k messages in one call costs the single
// call of its bytes plus (k - 1) / (m - 1) of what the measured batch of m adds; a batch larger
// than batch_messages runs as calls of at most that many, one after another; batch_launch
// without a curve: one call of the batch's bytes; neither: a call a message.
TEST_CASE("calibration: a batch priced by its batch curve, in calls of batch_messages", "[calibration][batch]") {
  const std::string single =
      "curves:\n"
      "  - {op: compress, codec: gauss-exp, dtype: bf16, points: [[1000, 10.0e-6], [2000, 12.0e-6], [16000, 40.0e-6]]}\n"
      "  - {op: decompress, codec: gauss-exp, dtype: bf16, points: [[1000, 8.0e-6], [16000, 38.0e-6]]}\n"
      "  - {op: compress, codec: entropy-exp, dtype: bf16, points: [[1000, 10.0e-6], [16000, 40.0e-6]]}\n";
  const calib::Calibration cal = calib::load_calibration(write_file("batch-curves", std::string(kHeader) + single +
      "batch_messages: 4\n"
      "batch_curves:\n"
      "  - {op: compress, codec: gauss-exp, dtype: bf16, messages: 4, points: [[1000, 16.0e-6], [2000, 18.0e-6], [16000, 46.0e-6]]}\n"
      "  - {op: decompress, codec: gauss-exp, dtype: any, messages: 3, latency: 20us, throughput: 1GB/s}\n"));
  CHECK_FALSE(cal.batch_launch);
  CHECK(cal.batch_messages == 4);
  CHECK_THAT(cal.label(), Catch::EndsWith(", batches of codec ops as measured (batch_curves, at most 4 messages a call)"));
  REQUIRE(cal.batch_curves.size() == 2);
  CHECK(cal.curves.size() == 3);  // the batch curves are not single calls: find() never sees them
  CHECK(cal.find(Op::Compress, "gauss-exp", DType::BF16)->messages == 1);
  CHECK(cal.find_batch(Op::Compress, "gauss-exp", DType::BF16)->messages == 4);
  CHECK(cal.find_batch(Op::Decompress, "gauss-exp", DType::FP32)->dtype == "any");
  CHECK(cal.batches(Op::Compress, "gauss-exp", DType::BF16));
  CHECK(cal.batches(Op::Decompress, "gauss-exp", DType::FP16));
  CHECK_FALSE(cal.batches(Op::Compress, "gauss-exp", DType::FP16));    // no curve of its dtype or any
  CHECK_FALSE(cal.batches(Op::Compress, "entropy-exp", DType::BF16));  // a single curve only
  CHECK_FALSE(cal.batches(Op::Reduce, "", DType::BF16));
  const auto batch = [&](Op op, const char* codec, uint32_t k, double bytes) {
    return cal.batch_seconds(op, codec, DType::BF16, k, bytes);
  };
  // At the curve's messages: the batch curve; one message: the single call.
  CHECK(batch(Op::Compress, "gauss-exp", 4, 2000) == Approx(18.0e-6));
  CHECK(batch(Op::Compress, "gauss-exp", 1, 2000) == Approx(12.0e-6));
  // Between: linear in the messages (12 + 6 x 1/3 at 2000 bytes).
  CHECK(batch(Op::Compress, "gauss-exp", 2, 2000) == Approx(14.0e-6));
  // 8 messages, batch_messages 4: two calls of 4 over 1000 bytes each.
  CHECK(batch(Op::Compress, "gauss-exp", 8, 2000) == Approx(2 * 16.0e-6));
  // 6 messages: a call of 4 (1333.3 bytes) and one of 2 (666.7 bytes).
  const double b4 = 2000.0 * 4 / 6, b2 = 2000.0 * 2 / 6;
  const double s4 = cal.seconds(Op::Compress, "gauss-exp", DType::BF16, b4);
  const double s2 = cal.seconds(Op::Compress, "gauss-exp", DType::BF16, b2);
  const double t4 = cal.find_batch(Op::Compress, "gauss-exp", DType::BF16)->seconds(b4);
  const double t2 = cal.find_batch(Op::Compress, "gauss-exp", DType::BF16)->seconds(b2);
  CHECK(batch(Op::Compress, "gauss-exp", 6, 2000) == Approx(t4 + s2 + (t2 - s2) / 3));
  CHECK(s4 < t4);
  // A curve of 3 messages (latency + throughput) over the decompress's single curve: 2 messages
  // at 16000 bytes add half of what 3 add.
  const double d1 = 38.0e-6, d3 = 20e-6 + 16000 / 1e9;
  CHECK(batch(Op::Decompress, "gauss-exp", 2, 16000) == Approx(d1 + (d3 - d1) / 2));
  // No batch here: a call a message, each over its share.
  CHECK(batch(Op::Compress, "entropy-exp", 4, 16000) == Approx(4 * cal.seconds(Op::Compress, "entropy-exp", DType::BF16, 4000)));
  // Identity costs nothing, batched or not.
  CHECK(batch(Op::Compress, "identity", 4, 16000) == 0);

  // batch_launch without a batch curve: one call of the batch's bytes, in calls of batch_messages.
  calib::Calibration launch = cal;
  launch.batch_curves.clear();
  launch.batch_launch = true;
  CHECK(launch.batches(Op::Compress, "entropy-exp", DType::BF16));
  CHECK(launch.batch_seconds(Op::Compress, "entropy-exp", DType::BF16, 4, 16000) ==
        Approx(cal.seconds(Op::Compress, "entropy-exp", DType::BF16, 16000)));
  CHECK(launch.batch_seconds(Op::Compress, "entropy-exp", DType::BF16, 8, 16000) ==
        Approx(2 * cal.seconds(Op::Compress, "entropy-exp", DType::BF16, 8000)));
  launch.batch_messages = 0;  // no limit
  CHECK(launch.batch_seconds(Op::Compress, "entropy-exp", DType::BF16, 8, 16000) ==
        Approx(cal.seconds(Op::Compress, "entropy-exp", DType::BF16, 16000)));

  // A batch curve whose op has no single curve: the single curve's error.
  calib::Calibration no_single = cal;
  no_single.curves.clear();
  CHECK_THROWS_WITH(no_single.batch_seconds(Op::Compress, "gauss-exp", DType::BF16, 4, 2000),
                    Catch::Contains("no curve for op compress, codec gauss-exp, dtype bf16"));
}

TEST_CASE("calibration: batch curves' errors name the file and the key", "[calibration][batch]") {
  const std::string single = "curves:\n  - {op: compress, codec: gauss-exp, dtype: bf16, points: [[4096, 1e-6]]}\n";
  const auto batch_error = [&](const std::string& name, const std::string& text) { return load_error(name, single + text); };
  const std::string pts = "points: [[4096, 2e-6]]";
  CHECK_THAT(batch_error("b-op", "batch_curves:\n  - {op: reduce, dtype: bf16, messages: 4, " + pts + "}\n"),
             Catch::Contains("b-op.yaml: batch_curves.0.op: expected one of"));
  CHECK_THAT(batch_error("b-nomsg", "batch_curves:\n  - {op: compress, codec: gauss-exp, dtype: bf16, " + pts + "}\n"),
             Catch::Contains("b-nomsg.yaml: batch_curves.0: missing key 'messages'"));
  CHECK_THAT(batch_error("b-one", "batch_curves:\n  - {op: compress, codec: gauss-exp, dtype: bf16, messages: 1, " + pts + "}\n"),
             Catch::Contains("b-one.yaml: batch_curves.0.messages"));
  // A curve of single calls has no messages.
  CHECK_THAT(load_error("b-msg-in-curves", "curves:\n  - {op: decompress, codec: gauss-exp, dtype: bf16, messages: 4, " + pts + "}\n"),
             Catch::Contains("b-msg-in-curves.yaml: curves.0: unknown key 'messages'"));
  CHECK_THAT(batch_error("b-two", "batch_curves:\n  - {op: compress, codec: gauss-exp, dtype: bf16, messages: 4, " + pts +
                                      "}\n  - {op: compress, codec: gauss-exp, dtype: bf16, messages: 8, " + pts + "}\n"),
             Catch::Contains("b-two.yaml: batch_curves.1: a second compress batch curve for codec gauss-exp, dtype bf16 "
                             "(batch_curves.0 is the first)"));
  CHECK_THAT(batch_error("b-over", "batch_messages: 4\nbatch_curves:\n  - {op: compress, codec: gauss-exp, dtype: bf16, "
                                   "messages: 8, " + pts + "}\n"),
             Catch::Contains("b-over.yaml: batch_curves.0: messages 8 is more than batch_messages (4)"));
  CHECK_THAT(batch_error("b-limit", "batch_messages: 1\n"), Catch::Contains("b-limit.yaml: batch_messages"));
  CHECK_THAT(batch_error("b-alone", "concurrent: 2\nbatch_curves:\n  - {op: compress, codec: gauss-exp, dtype: bf16, "
                                    "messages: 4, " + pts + ", alone: [[4096, 1e-6]]}\n"),
             Catch::Contains("b-alone.yaml: batch_curves.0.alone: a batch curve has no alone points"));
  CHECK_THAT(batch_error("b-map", "batch_curves: {op: compress}\n"),
             Catch::Contains("b-map.yaml: batch_curves: expected a list of {op, codec, dtype, messages, points}"));
}

TEST_CASE("calibration: a second curve for the same op, codec and dtype is an error", "[calibration]") {
  const std::string copy = "  - {op: copy, dtype: any, points: [[4096, 1e-6]]}\n";
  CHECK_THAT(load_error("twocopies", "curves:\n" + copy + copy),
             Catch::Contains("twocopies.yaml: curves.1: a second copy curve for dtype any (curves.0 is the first)"));
  const std::string gauss = "  - {op: compress, codec: gauss-exp, dtype: bf16, latency: 1us, throughput: 100GB/s}\n";
  CHECK_THAT(load_error("twocompress", "curves:\n" + gauss + copy + gauss),
             Catch::Contains("curves.2: a second compress curve for codec gauss-exp, dtype bf16 (curves.0 is the first)"));
  // The same op for another codec, dtype or op is not a second curve.
  const calib::Calibration cal = calib::load_calibration(write_file(
      "distinct", std::string(kHeader) + "curves:\n" + gauss +
                      "  - {op: compress, codec: gauss-exp, dtype: any, latency: 1us, throughput: 50GB/s}\n"
                      "  - {op: compress, codec: entropy-exp, dtype: bf16, latency: 1us, throughput: 50GB/s}\n"
                      "  - {op: decompress, codec: gauss-exp, dtype: bf16, latency: 1us, throughput: 50GB/s}\n" + copy));
  CHECK(cal.curves.size() == 5);
}

// decode_add (cuda_decode_add, run.fused_decode): a codec's curve where the file has one, else
// the decompress's and the reduce's times together; a zero calibration charges nothing.
TEST_CASE("calibration: decode_add at its curve, else decompress and reduce together", "[calibration]") {
  const std::string curves =
      "curves:\n"
      "  - {op: decompress, codec: gauss-exp, dtype: bf16, latency: 10us, throughput: 100GB/s}\n"
      "  - {op: decompress, codec: entropy-exp, dtype: bf16, latency: 12us, throughput: 100GB/s}\n"
      "  - {op: decode_add, codec: gauss-exp, dtype: bf16, latency: 11us, throughput: 200GB/s}\n"
      "  - {op: reduce, dtype: bf16, latency: 4us, throughput: 400GB/s}\n";
  const calib::Calibration cal = calib::load_calibration(write_file("decode-add", std::string(kHeader) + curves));
  const double mb = 1e6;
  CHECK(cal.has(calib::Op::DecodeAdd, "gauss-exp", DType::BF16));
  CHECK_FALSE(cal.has(calib::Op::DecodeAdd, "entropy-exp", DType::BF16));
  CHECK(cal.seconds(calib::Op::DecodeAdd, "gauss-exp", DType::BF16, mb) == Approx(11e-6 + mb / 200e9));
  CHECK(cal.seconds(calib::Op::DecodeAdd, "entropy-exp", DType::BF16, mb) ==
        Approx(12e-6 + mb / 100e9 + 4e-6 + mb / 400e9));
  CHECK(cal.alone_seconds(calib::Op::DecodeAdd, "entropy-exp", DType::BF16, mb) ==
        Approx(cal.seconds(calib::Op::DecodeAdd, "entropy-exp", DType::BF16, mb)));
  // identity decodes in no time: its fused op without a curve is the reduce.
  CHECK(cal.seconds(calib::Op::DecodeAdd, "identity", DType::BF16, mb) == Approx(4e-6 + mb / 400e9));
  // Without either curve, the missing one is named.
  CHECK_THROWS_WITH(cal.seconds(calib::Op::DecodeAdd, "gauss-exp", DType::FP32, mb),
                    Catch::Contains("no curve for op decompress, codec gauss-exp, dtype fp32"));
  CHECK(calib::zero_calibration().seconds(calib::Op::DecodeAdd, "gauss-exp", DType::BF16, mb) == 0);
  // A decode_add curve names its codec, as a decompress curve does.
  const std::string no_codec = "curves:\n  - {op: decode_add, dtype: bf16, latency: 1us, throughput: 1GB/s}\n";
  CHECK_THAT(load_error("decode-add-nocodec", no_codec),
             Catch::Contains("decode-add-nocodec.yaml: curves.0: missing key 'codec'"));
}

TEST_CASE("calibration: ratios a GPU library codec reached, per dtype and tensor kind", "[calibration]") {
  const std::string curve = "curves:\n  - {op: copy, dtype: any, points: [[4096, 1e-6]]}\n";
  const calib::Calibration cal = calib::load_calibration(write_file(
      "ratios", std::string(kHeader) +
                    "ratios:\n  - {codec: nvcomp-ans, dtype: bf16, tensor: grad, ratio: 0.69764, bytes: 4718592}\n"
                    "  - {codec: nvcomp-ans, dtype: fp32, tensor: grad, ratio: 0.8125, bytes: 1572864}\n" + curve));
  REQUIRE(cal.ratios.size() == 2);
  const calib::CalibratedRatio* r = cal.find_ratio("nvcomp-ans", DType::BF16, "grad");
  REQUIRE(r);
  CHECK(r->ratio == 0.69764);
  CHECK(r->bytes == 4718592);
  CHECK(cal.find_ratio("nvcomp-ans", DType::FP32, "grad")->ratio == 0.8125);
  CHECK_FALSE(cal.find_ratio("nvcomp-ans", DType::BF16, "param"));
  CHECK_FALSE(cal.find_ratio("nvcomp-ans", DType::FP16, "grad"));
  CHECK_FALSE(cal.find_ratio("gauss-exp", DType::BF16, "grad"));
  CHECK(calib::load_calibration(write_file("noratios", std::string(kHeader) + curve)).ratios.empty());
  // Bad entries: one line naming the file and the key.
  const std::string entry = "ratios:\n  - {codec: nvcomp-ans, dtype: bf16, tensor: grad, ";
  CHECK_THAT(load_error("ratio0", entry + "ratio: 0, bytes: 1}\n" + curve),
             Catch::Contains("ratio0.yaml: ratios.0.ratio: expected a ratio (compressed / uncompressed) in (0, 2]"));
  CHECK_THAT(load_error("ratiobig", entry + "ratio: 3.5, bytes: 1}\n" + curve), Catch::Contains("ratios.0.ratio"));
  CHECK_THAT(load_error("ratiobytes", entry + "ratio: 0.7, bytes: 0}\n" + curve), Catch::Contains("ratios.0.bytes"));
  CHECK_THAT(load_error("ratiokey", entry + "ratio: 0.7, bytes: 1, kind: x}\n" + curve),
             Catch::Contains("ratios.0: unknown key 'kind'"));
  CHECK_THAT(load_error("ratiodtype", "ratios:\n  - {codec: nvcomp-ans, dtype: any, tensor: grad, ratio: 0.7, bytes: 1}\n" + curve),
             Catch::Contains("ratios.0.dtype"));
  CHECK_THAT(load_error("ratiotwice", entry + "ratio: 0.7, bytes: 1}\n  - {codec: nvcomp-ans, dtype: bf16, tensor: grad, "
                                              "ratio: 0.8, bytes: 1}\n" + curve),
             Catch::Contains("ratios.1: a second ratio for nvcomp-ans bf16 grad"));
  CHECK_THAT(load_error("ratiolist", "ratios: {codec: nvcomp-ans}\n" + curve), Catch::Contains("ratiolist.yaml: ratios: expected a list"));
}

TEST_CASE("calibration: every shipped file loads and covers every codec it is used with", "[calibration]") {
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(COMPCOLL_SOURCE_DIR) + "/calibration")) {
    if (e.path().extension() != ".yaml") continue;
    if (e.path().filename().string().find("-transport.yaml") != std::string::npos) continue;  // compcoll-bench transport
    INFO(e.path());
    const calib::Calibration cal = calib::load_calibration(e.path().string());
    ++files;
    CHECK(!cal.device.empty());
    CHECK(!cal.statement.empty());
    CHECK((cal.source == "measured" || cal.source == "derived"));
    // A selection (calibrate --dtype, --codec) covers what its experiment runs: the host-MPI
    // loop (experiments/loop-cpu.yaml) is bf16 with gauss-exp; a full file covers everything.
    const bool selection = cal.statement.find("Selection (--dtype, --codec, --ops)") != std::string::npos;
    const std::vector<DType> dtypes =
        selection ? std::vector<DType>{DType::BF16} : std::vector<DType>{DType::BF16, DType::FP16, DType::FP32};
    const std::vector<const char*> codecs =
        selection ? std::vector<const char*>{"gauss-exp"} : std::vector<const char*>{"gauss-exp", "entropy-exp"};
    // A partial file (complete: false) lacks what its `missing` names, and nothing else.
    CHECK(cal.complete == cal.missing.empty());
    const auto listed_missing = [&](const std::string& curve) {
      return std::find(cal.missing.begin(), cal.missing.end(), curve) != cal.missing.end();
    };
    for (DType t : dtypes) {
      const std::string dtype(dtype_name(t));
      CHECK((cal.has(Op::Reduce, "", t) || listed_missing("reduce " + dtype)));
      for (const char* codec : codecs) {
        const std::string tail = std::string(" ") + codec + " " + dtype;
        CHECK((cal.has(Op::Compress, codec, t) || listed_missing("compress" + tail)));
        CHECK((cal.has(Op::Decompress, codec, t) || listed_missing("decompress" + tail)));
        if (cal.has(Op::Compress, codec, t)) CHECK(cal.seconds(Op::Compress, codec, t, 64 << 20) > 0);
      }
    }
  }
  CHECK(files >= 1);
}

// What `compcoll-bench calibrate` writes: loads, says measured, has a curve for every codec,
// op and dtype over the same sizes, and larger sizes take longer than the smallest.
TEST_CASE("calibrate output loads as a measured calibration", "[.calibrate-output]") {
  const char* path = std::getenv("COMPCOLL_CALIBRATION_FILE");
  REQUIRE(path != nullptr);
  const calib::Calibration cal = calib::load_calibration(path);
  CHECK(cal.source == "measured");
  CHECK(!cal.device.empty());
  CHECK(cal.statement.find("MEASURED by compcoll-bench calibrate") == 0);
  CHECK(cal.date.size() == 10);
  CHECK(cal.chunk_elements == format::kDefaultChunkElements);  // a host calibration's
  // identity, gauss-exp, entropy-exp x compress, decompress x 3 dtypes; reduce x 3; copy (any).
  CHECK(cal.curves.size() == codec_names().size() * 2 * 3 + 3 + 1);
  // --quick --max-bytes 1MB: the powers of 4 from 4 KiB up to 10^6 bytes (4 KiB ... 256 KiB). The times
  // are only checked to be there: their order depends on what else the machine runs.
  const size_t sizes = cal.curves.front().points.size();
  CHECK(sizes == 4);
  for (const calib::Curve& c : cal.curves) {
    INFO(calib::op_name(c.op) << " " << c.codec << " " << c.dtype);
    REQUIRE(c.points.size() == sizes);
    for (size_t i = 0; i < sizes; ++i) CHECK(c.points[i].first == (4096u << (2 * i)));
    for (const auto& [bytes, seconds] : c.points) CHECK(seconds > 0);
  }
  for (DType t : {DType::BF16, DType::FP16, DType::FP32}) {
    CHECK(cal.has(Op::Reduce, "", t));
    CHECK(cal.has(Op::Copy, "", t));
    for (auto codec : codec_names()) {
      CHECK(cal.has(Op::Compress, std::string(codec), t));
      CHECK(cal.has(Op::Decompress, std::string(codec), t));
    }
  }
}

// A file calibrate --device cuda wrote (ctest cuda_emu_calibrate_loads: the CPU emulation,
// --quick --max-bytes 64KiB --dtype bf16,fp32): every codec's single curves, and batch curves of
// 16 messages (the most one call codes) for gauss-exp's and entropy-exp's compress and
// decompress at the same sizes, which price those batches; identity's batches cost nothing and
// have none.
TEST_CASE("calibrate --device cuda output loads with its batch curves", "[.calibrate-cuda-output]") {
  const char* path = std::getenv("COMPCOLL_CALIBRATION_FILE");
  REQUIRE(path != nullptr);
  const calib::Calibration cal = calib::load_calibration(path);
  CHECK(cal.source == "measured");
  CHECK(cal.complete);
  CHECK(cal.chunk_elements == format::kAutoChunk);
  CHECK_FALSE(cal.batch_launch);
  CHECK(cal.batch_messages == 16);
  CHECK(cal.statement.find("batch_curves: each size's prefix split into 16 messages") != std::string::npos);
  REQUIRE(cal.batch_curves.size() == 2 * 2 * 2);  // gauss-exp, entropy-exp x compress, decompress x bf16, fp32
  for (DType t : {DType::BF16, DType::FP32})
    for (const char* codec : {"gauss-exp", "entropy-exp", "identity", "fp8-hadamard"})
      for (Op op : {Op::Compress, Op::Decompress}) {
        INFO(codec << " " << calib::op_name(op) << " " << dtype_name(t));
        const bool batched = std::string(codec) == "gauss-exp" || std::string(codec) == "entropy-exp";
        CHECK(cal.batches(op, codec, t) == batched);
        if (!batched) continue;
        const calib::Curve* b = cal.find_batch(op, codec, t);
        const calib::Curve* single = cal.find(op, codec, t);
        REQUIRE(b != nullptr);
        REQUIRE(single != nullptr);
        CHECK(b->messages == 16);
        CHECK(b->dtype == dtype_name(t));
        REQUIRE(b->points.size() == single->points.size());
        for (size_t i = 0; i < b->points.size(); ++i) {
          CHECK(b->points[i].first == single->points[i].first);
          CHECK(b->points[i].second > 0);
        }
        // At 16 messages the batch curve's own time.
        CHECK(cal.batch_seconds(op, codec, t, 16, 65536) == Approx(b->seconds(65536)));
      }
}

// A host calibration measured beside other ranks (calibrate --concurrent N): `concurrent` and
// each curve's `alone` points, interpolated as the points are; a curve without them, or a file
// measured alone, gives the points for alone. `alone` needs concurrent > 1.
TEST_CASE("calibration: points beside other ranks and alone", "[calibration]") {
  const std::string path = write_file("alone", std::string(kHeader) +
      "concurrent: 2\n"
      "curves:\n"
      "  - {op: copy, dtype: any, points: [[1000, 4.0e-6], [2000, 8.0e-6]], alone: [[1000, 2.0e-6], [2000, 5.0e-6]]}\n"
      "  - {op: reduce, dtype: bf16, points: [[1000, 3.0e-6], [2000, 6.0e-6]]}\n");
  const calib::Calibration cal = calib::load_calibration(path);
  CHECK(cal.concurrent == 2);
  CHECK(cal.alone_seconds(Op::Copy, "", DType::BF16, 1500) == Approx(3.5e-6));
  CHECK(cal.seconds(Op::Copy, "", DType::BF16, 1500) == Approx(6.0e-6));
  CHECK(cal.alone_seconds(Op::Copy, "", DType::BF16, 4000) == Approx(11.0e-6));  // last segment's rate
  CHECK(cal.alone_seconds(Op::Reduce, "", DType::BF16, 1500) == Approx(4.5e-6));  // no alone points
  CHECK(cal.alone_seconds(Op::Compress, "identity", DType::BF16, 1e9) == 0);
  CHECK_THROWS_WITH(cal.alone_seconds(Op::Compress, "gauss-exp", DType::BF16, 1000),
                    Catch::Contains("alone.yaml: curves: no curve for op compress"));
  CHECK(calib::zero_calibration().alone_seconds(Op::Copy, "", DType::BF16, 1e6) == 0);
  CHECK(calib::load_calibration(write_file("single", std::string(kHeader) +
                                           "curves:\n  - {op: copy, dtype: any, points: [[1000, 1e-6]]}\n"))
            .concurrent == 1);
  CHECK_THAT(load_error("alone-alone", "curves:\n  - {op: copy, dtype: any, points: [[1000, 1e-6]], alone: [[1000, 1e-6]]}\n"),
             Catch::Contains("alone-alone.yaml: curves.0.alone: only with concurrent: N > 1"));
  CHECK_THAT(load_error("alone-order", "concurrent: 2\ncurves:\n  - {op: copy, dtype: any, points: [[1000, 1e-6]], "
                                       "alone: [[2000, 1e-6], [1000, 2e-6]]}\n"),
             Catch::Contains("curves.0.alone.1: bytes must increase"));
  CHECK_THAT(load_error("alone-map", "concurrent: 2\ncurves:\n  - {op: copy, dtype: any, points: [[1000, 1e-6]], alone: 3}\n"),
             Catch::Contains("curves.0.alone: expected a list of [bytes, seconds]"));
  CHECK_THAT(load_error("concurrent", "concurrent: 0\ncurves:\n  - {op: copy, dtype: any, points: [[1000, 1e-6]]}\n"),
             Catch::Contains("concurrent.yaml: concurrent:"));
}

// A file calibrate --concurrent 2 just wrote (ctest bench_calibrate_concurrent).
TEST_CASE("calibrate --concurrent output has alone points", "[.calibrate-concurrent]") {
  const char* path = std::getenv("COMPCOLL_CALIBRATION_FILE");
  REQUIRE(path != nullptr);
  const calib::Calibration cal = calib::load_calibration(path);
  CHECK(cal.concurrent == 2);
  CHECK(cal.statement.find("with those threads idle (the `alone` points)") != std::string::npos);
  REQUIRE(cal.curves.size() == 4);  // gauss-exp compress and decompress, reduce, copy
  for (const calib::Curve& c : cal.curves) {
    INFO(calib::op_name(c.op) << " " << c.codec);
    REQUIRE(c.alone.size() == c.points.size());
    for (size_t i = 0; i < c.points.size(); ++i) {
      CHECK(c.alone[i].first == c.points[i].first);
      CHECK(c.alone[i].second > 0);
    }
  }
}

TEST_CASE("calibration: a partial file loads, says PARTIAL, and names itself in a missing curve's error", "[calibration]") {
  const std::string path = write_file("partial", std::string(kHeader) +
      "complete: false\n"
      "missing: [\"reduce bf16\", \"copy any\"]\n"
      "curves:\n"
      "  - {op: compress, codec: gauss-exp, dtype: bf16, points: [[4096, 1.0e-6]]}\n");
  const calib::Calibration cal = calib::load_calibration(path);
  CHECK_FALSE(cal.complete);
  CHECK(cal.missing == std::vector<std::string>{"reduce bf16", "copy any"});
  CHECK_THAT(cal.label(), Catch::Contains("PARTIAL (complete: false): 1 curves; 2 not measured"));
  CHECK(cal.seconds(Op::Compress, "gauss-exp", DType::BF16, 4096) == Approx(1.0e-6));
  CHECK_THROWS_WITH(cal.seconds(Op::Reduce, "", DType::BF16, 4096),
                    Catch::Contains("partial.yaml: curves: no curve for op reduce") && Catch::Contains("PARTIAL"));
  // A complete file says nothing of it.
  const std::string whole = write_file("whole", std::string(kHeader) + "curves:\n  - {op: copy, dtype: any, points: [[4096, 1e-6]]}\n");
  CHECK(calib::load_calibration(whole).complete);
  CHECK(calib::load_calibration(whole).label().find("PARTIAL") == std::string::npos);
  // `missing` only with complete: false, and a list.
  CHECK_THAT(load_error("missing-complete", "complete: true\nmissing: [\"reduce bf16\"]\ncurves: []\n"),
             Catch::Contains("missing-complete.yaml: missing: only with complete: false"));
  CHECK_THAT(load_error("missing-scalar", "complete: false\nmissing: reduce\ncurves: []\n"),
             Catch::Contains("missing-scalar.yaml: missing: expected a list of curves"));
}

// What `calibrate --dtype bf16 --codec fp8-hadamard,gauss-exp --ops compress,decompress`
// writes (ctest bench_calibrate_selection): those four curves and nothing else, complete.
TEST_CASE("calibrate selection writes only the selected curves", "[.calibrate-selection]") {
  const char* path = std::getenv("COMPCOLL_CALIBRATION_FILE");
  REQUIRE(path != nullptr);
  const calib::Calibration cal = calib::load_calibration(path);
  CHECK(cal.complete);
  CHECK(cal.label().find("PARTIAL") == std::string::npos);
  CHECK(cal.curves.size() == 4);
  for (const char* codec : {"fp8-hadamard", "gauss-exp"}) {
    CHECK(cal.has(Op::Compress, codec, DType::BF16));
    CHECK(cal.has(Op::Decompress, codec, DType::BF16));
    CHECK_FALSE(cal.has(Op::Compress, codec, DType::FP32));
  }
  CHECK_FALSE(cal.has(Op::Reduce, "", DType::BF16));
  CHECK(cal.statement.find("Selection (--dtype, --codec, --ops)") != std::string::npos);
}

// The file a calibrate run leaves when it is killed after its first finished curve (ctest
// bench_calibrate_partial): complete: false, the finished curves, the others listed missing.
TEST_CASE("calibrate leaves a loadable partial file when stopped", "[.calibrate-partial]") {
  const char* path = std::getenv("COMPCOLL_CALIBRATION_FILE");
  REQUIRE(path != nullptr);
  const calib::Calibration cal = calib::load_calibration(path);
  CHECK_FALSE(cal.complete);
  REQUIRE_FALSE(cal.curves.empty());
  // bf16 only: every codec's two curves, reduce and copy; finished plus missing are all of them.
  CHECK(cal.curves.size() + cal.missing.size() == codec_names().size() * 2 + 2);
  CHECK(cal.statement.find("PARTIAL (complete: false)") == 0);
  CHECK_THAT(cal.label(), Catch::Contains("PARTIAL"));
  for (const calib::Curve& c : cal.curves)
    for (const auto& [bytes, seconds] : c.points) CHECK(seconds > 0);
}

TEST_CASE("calibration: the host a file was measured on, against this one", "[calibration]") {
  const std::string curve = "curves:\n  - {op: copy, dtype: any, points: [[4096, 1e-7]]}\n";
  // The file's machine as calibrate would write it here: no difference.
  const std::string here = "machine:\n  cpu: \"" + calib::cpuinfo_field("model name") + "\"\n  cache: \"" +
                           calib::cpuinfo_field("cache size") + "\"\n  logical_cpus: \"" +
                           std::to_string(std::thread::hardware_concurrency()) + "\"\n  host_codec_path: \"" +
                           std::string(host_codec_path()) + "\"\n  cpu_mhz: \"1.0\"\n  kernel: \"another\"\n";
  const calib::Calibration same = calib::load_calibration(write_file("same-host", std::string(kHeader) + here + curve));
  CHECK(same.machine.size() == 6);
  CHECK(calib::host_differences(same).empty());  // clock and kernel are not the kernels' speed
  // Another host: each differing key named, with both values.
  const std::string other =
      "machine:\n  cpu: \"Another CPU\"\n  logical_cpus: \"1000\"\n  host_codec_path: \"another-path\"\n";
  const auto d = calib::host_differences(calib::load_calibration(write_file("other-host", std::string(kHeader) + other + curve)));
  REQUIRE(d.size() == 3);
  CHECK(d[0] == "cpu: Another CPU there, " + calib::cpuinfo_field("model name") + " here");
  CHECK(d[1] == "logical_cpus: 1000 there, " + std::to_string(std::thread::hardware_concurrency()) + " here");
  CHECK(d[2] == "host_codec_path: another-path there, " + std::string(host_codec_path()) + " here");
  // A file that does not say (derived figures, a GPU's): nothing to compare.
  CHECK(calib::host_differences(calib::load_calibration(write_file("no-machine", std::string(kHeader) + curve))).empty());
}
