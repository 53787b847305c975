// tests/policy/test_link_transfer.cpp — policy::predict_link_transfer, compcoll-bench
// pipeline's model of a message over one measured link: the closed forms of an uncompressed
// and a one-piece compressed message, and what pipelining the pieces buys.
#include <catch2/catch.hpp>

#include <string>

#include "calibration/calibration.h"
#include "policy/cost_model.h"

using namespace compcoll;

TEST_CASE("link transfer: closed forms, and pieces hide the codec behind the link", "[policy][pipeline]") {
  const std::string root = COMPCOLL_SOURCE_DIR;
  // Derived kernels: gauss-exp compress 10 us + bytes / 985 GB/s, decompress 5 us + bytes / 985 GB/s.
  const auto cal = calib::load_calibration(root + "/calibration/h100-derived.yaml");
  const uint64_t count = uint64_t{32} << 20;  // 64 MiB of bf16
  const double bytes = 2.0 * count, bw = 50e9, lat = 2e-6, ratio = 1.46;
  const double enc = 10e-6 + bytes / 985e9, dec = 5e-6 + bytes / 985e9;

  const double plain = policy::predict_link_transfer(count, DType::BF16, 1, "", 1, bw, lat, cal);
  CHECK(plain == Approx(lat + bytes / bw).epsilon(1e-9));
  const double coded = policy::predict_link_transfer(count, DType::BF16, 1, "gauss-exp", 1 / ratio, bw, lat, cal);
  // The stream: its header and offset table beside the compressed bytes.
  const double stream = bytes / ratio + 32 + 8.0 * (count / 16384);
  CHECK(coded == Approx(enc + lat + stream / bw + dec).epsilon(1e-7));

  // In 16 pieces the codec of one piece runs while another is on the link: what is left is the
  // link's time for the compressed bytes, one piece's encode and decode, and the latencies
  // (each piece a message of its own, after the one before it on the connection).
  const double piece_enc = 10e-6 + bytes / 16 / 985e9, piece_dec = 5e-6 + bytes / 16 / 985e9;
  const double coded16 = policy::predict_link_transfer(count, DType::BF16, 16, "gauss-exp", 1 / ratio, bw, lat, cal);
  CHECK(coded16 < coded);
  const double stream16 = bytes / ratio + 16 * 32 + 8.0 * (count / 16384);
  CHECK(coded16 >= stream16 / bw + piece_enc + piece_dec + lat - 1e-9);
  CHECK(coded16 <= stream16 / bw + piece_enc + piece_dec + 16 * lat + 1e-9);
  const double plain16 = policy::predict_link_transfer(count, DType::BF16, 16, "", 1, bw, lat, cal);
  CHECK(plain16 >= plain - 1e-12);
  CHECK(plain16 <= bytes / bw + 16 * lat + 1e-12);
  CHECK(plain16 / coded16 > 1.3);  // on a link this slow compression pays, by nearly the ratio

  // On a link as fast as the kernels it does not.
  CHECK(policy::predict_link_transfer(count, DType::BF16, 16, "gauss-exp", 1 / ratio, 2000e9, lat, cal) >
        policy::predict_link_transfer(count, DType::BF16, 16, "", 1, 2000e9, lat, cal));
}
