// tests/schedule/test_nccl_p2p.cpp — NCCL 2.23.4's point-to-point rounds, channels and work
// batches (schedule/nccl_p2p.h), worked by hand from its source (init.cc, include/channel.h,
// enqueue.cc).
#include <catch2/catch.hpp>

#include <set>
#include <utility>
#include <vector>

#include "schedule/nccl_p2p.h"

using namespace compcoll::sched;

TEST_CASE("NCCL's point-to-point rounds and batches, by hand", "[schedule][nccl][p2p]") {
  SECTION("the rounds of a rank's sends are its peers' rounds of receiving from it") {
    for (auto [nodes, local] : {std::pair{1, 8}, std::pair{3, 8}, std::pair{5, 3}, std::pair{6, 1}}) {
      const auto rounds = NcclP2pRounds::node_major(nodes * local, local, 16);
      const int n = rounds.ranks();
      for (int r = 0; r < n; ++r) {
        std::set<int> seen;
        for (int p = 0; p < n; ++p) {
          const int i = rounds.send_round(r, p);
          CHECK(i == rounds.recv_round(p, r));
          CHECK(seen.insert(i).second);  // one peer a round
        }
        CHECK(rounds.send_round(r, r) == 0);
        CHECK(*seen.rbegin() == n - 1);
      }
    }
    // 2 nodes of 8: node deltas 0, 1; local deltas 0, 1, 3, 6, 2, 7, 5, 4 (NCCL's quadratic order).
    const auto r2 = NcclP2pRounds::node_major(16, 8, 16);
    CHECK(r2.send_round(0, 1) == 1);
    CHECK(r2.send_round(0, 3) == 2);
    CHECK(r2.send_round(0, 4) == 7);
    CHECK(r2.send_round(0, 8) == 8);   // (node + 1, local + 0)
    CHECK(r2.send_round(0, 12) == 15);
    CHECK(r2.send_round(9, 0) == 13);  // (1, 1) -> (0, 0): node delta 1, local delta 7 (place 5)
    CHECK(r2.recv_round(0, 9) == 13);  // (0, 0) from (1, 1): (0 - 1, 0 - 1), the same deltas
  }
  SECTION("channels: rounds of one node delta share one on several nodes, each round its own on one") {
    const auto multi = NcclP2pRounds::node_major(32, 8, 16), one = NcclP2pRounds::node_major(8, 8, 32),
               wide = NcclP2pRounds::node_major(64, 16, 16);
    for (int i = 0; i < 32; ++i) CHECK(multi.channel(i) == i / 8);
    for (int i = 0; i < 8; ++i) CHECK(one.channel(i) == i);
    CHECK(wide.channel(7) == 0);  // 16 local ranks: divUp(16, 8) = 2 channels a node delta
    CHECK(wide.channel(8) == 1);
    CHECK(wide.channel(16) == 2);
    const auto many = NcclP2pRounds::node_major(1024, 8, 16);
    CHECK(many.channel(8 * 17) == 1);  // node delta place 17: channel 17 mod 16
    CHECK_THROWS(NcclP2pRounds::node_major(32, 8, 12));
  }
  auto all_to_all = [](int n, int me) {
    std::vector<std::pair<int, bool>> t;
    for (int p = 0; p < n; ++p)
      if (p != me) t.emplace_back(p, true), t.emplace_back(p, false);
    return t;
  };
  SECTION("an all-to-all: 8 works a batch, a channel's batches one after the other") {
    // 8 nodes of 8, 16 channels: every node delta's 8 rounds fill one batch of its own channel.
    const auto r64 = NcclP2pRounds::node_major(64, 8, 16);
    const auto s64 = nccl_p2p_batches(r64, 11, all_to_all(64, 11));
    for (const auto& slot : s64) CHECK(slot.batch == 0);
    // 128 nodes of 8 (1,024 ranks), 16 channels: 8 node deltas a channel, so 8 batches of 8.
    const auto r1k = NcclP2pRounds::node_major(1024, 8, 16);
    const auto t1k = all_to_all(1024, 5);
    const auto s1k = nccl_p2p_batches(r1k, 5, t1k);
    std::vector<std::vector<uint32_t>> works(16, std::vector<uint32_t>(8, 0));
    for (size_t k = 0; k < t1k.size(); ++k) {
      const int round = t1k[k].second ? r1k.send_round(5, t1k[k].first) : r1k.recv_round(5, t1k[k].first);
      CHECK(s1k[k].channel == r1k.channel(round));
      REQUIRE(s1k[k].batch < 8);
      if (t1k[k].second) ++works[static_cast<size_t>(s1k[k].channel)][s1k[k].batch];  // a work: its send
    }
    // Round 0 (this rank itself) holds nothing, so channel 0's first batch takes the first round
    // of its next node delta too (NCCL 2.23.4 batches by count, not by node delta), and its last
    // batch has 7 works.
    for (int c = 0; c < 16; ++c)
      for (int b = 0; b < 8; ++b)
        CHECK(works[static_cast<size_t>(c)][static_cast<size_t>(b)] == (c == 0 && b == 7 ? 7u : 8u));
    // A send and the receive of the same round are one work: same channel, same batch.
    CHECK(s1k[0].channel == s1k[1].channel);
  }
  SECTION("a second send to the same peer is a second pass: a batch of its own") {
    const auto r = NcclP2pRounds::node_major(8, 8, 32);
    const auto s = nccl_p2p_batches(r, 0, {{1, true}, {7, false}, {1, true}, {2, true}});
    CHECK(s[0].channel == 1);
    CHECK(s[0].batch == 0);
    CHECK(s[1].channel == r.channel(r.recv_round(0, 7)));
    CHECK(s[2].channel == 1);
    CHECK(s[2].batch == 1);
    CHECK(s[3].batch == 0);
  }
}

TEST_CASE("NCCL's rounds follow its node numbering: nodes by first rank, flat where nodes differ",
          "[schedule][nccl][p2p]") {
  // Ranks placed round-robin over 2 nodes: NCCL's node 0 holds ranks 0, 2, 4, 6.
  const NcclP2pRounds rr({7, 3, 7, 3, 7, 3, 7, 3}, 16);
  CHECK(rr.nodes() == 2);
  CHECK(rr.node(1) == 1);
  CHECK(rr.local(6) == 3);
  CHECK(rr.send_round(0, 1) == 4);  // node delta 1 (place 1) x 4 local ranks + local delta 0
  CHECK(rr.channel(4) == 1);        // 4 local ranks: one channel a node delta
  // 3 ranks on one node, 1 on another: NCCL takes them as one node of 4 ranks.
  const NcclP2pRounds flat({0, 0, 0, 1}, 16);
  CHECK(flat.nodes() == 1);
  CHECK(flat.send_round(0, 3) == 2);  // delta 3: place 2 of 0, 1, 3, 2
  CHECK(flat.channel(2) == 0);        // the comm's 2 nodes of at most 3: round 2 / 3 = 0
  CHECK(flat.channel(3) == 1);
}
