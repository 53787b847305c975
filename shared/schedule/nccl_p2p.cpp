// shared/schedule/nccl_p2p.cpp — see nccl_p2p.h. NCCL 2.23.4: src/init.cc (the p2p schedule),
// src/include/channel.h (ncclP2pChannelBaseForRound), src/include/device.h
// (ncclP2pChannelForPart), src/enqueue.cc (scheduleP2pTasksToPlan, addWorkBatchToPlan).
#include "schedule/nccl_p2p.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "schedule/algorithms.h"

namespace compcoll::sched {
namespace {

constexpr int kP2pPerBatch = 8;  // NCCL_MAX_DEV_WORK_P2P_PER_BATCH (include/device.h)

std::vector<int> positions(int m) {
  std::vector<int> pos(static_cast<size_t>(m), -1);
  const std::vector<int> order = nccl_p2p_deltas(m);
  for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = static_cast<int>(i);
  return pos;
}

}  // namespace

NcclP2pRounds::NcclP2pRounds(const std::vector<int>& node_of, int p2p_channels) : channels_(p2p_channels) {
  const int n = static_cast<int>(node_of.size());
  if (n < 1 || p2p_channels < 1 || !std::has_single_bit(static_cast<unsigned>(p2p_channels)))
    throw std::invalid_argument("NcclP2pRounds: at least one rank, and a power of 2 of channels (" +
                                std::to_string(p2p_channels) + ")");
  std::unordered_map<int, size_t> index;  // node label -> NCCL's node (in order of first rank)
  std::vector<int> size;                   // ranks per node
  node_.resize(static_cast<size_t>(n));
  local_of_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const size_t k = index.emplace(node_of[static_cast<size_t>(r)], size.size()).first->second;
    if (k == size.size()) size.push_back(0);
    node_[static_cast<size_t>(r)] = static_cast<int>(k);
    local_of_[static_cast<size_t>(r)] = size[k]++;
  }
  real_nodes_ = static_cast<int>(size.size());
  max_local_ = *std::max_element(size.begin(), size.end());
  nodes_ = real_nodes_;
  local_ = max_local_;
  if (std::any_of(size.begin(), size.end(), [&](int s) { return s != max_local_; })) {  // flat
    nodes_ = 1;
    local_ = n;
    for (int r = 0; r < n; ++r) node_[static_cast<size_t>(r)] = 0, local_of_[static_cast<size_t>(r)] = r;
  }
  node_pos_ = positions(nodes_);
  local_pos_ = positions(local_);
}

NcclP2pRounds NcclP2pRounds::node_major(int ranks, int local_ranks, int p2p_channels) {
  if (ranks < 1 || local_ranks < 1)
    throw std::invalid_argument("NcclP2pRounds: at least one node of at least one rank");
  std::vector<int> node_of(static_cast<size_t>(ranks));
  for (size_t r = 0; r < node_of.size(); ++r) node_of[r] = static_cast<int>(r / static_cast<size_t>(local_ranks));
  return NcclP2pRounds(node_of, p2p_channels);
}

int NcclP2pRounds::round_of(int node_delta, int local_delta) const {
  return node_pos_[static_cast<size_t>(node_delta)] * local_ + local_pos_[static_cast<size_t>(local_delta)];
}

int NcclP2pRounds::send_round(int rank, int peer) const {
  const auto r = static_cast<size_t>(rank), p = static_cast<size_t>(peer);
  return round_of((node_[p] - node_[r] + nodes_) % nodes_, (local_of_[p] - local_of_[r] + local_) % local_);
}

int NcclP2pRounds::recv_round(int rank, int peer) const {
  const auto r = static_cast<size_t>(rank), p = static_cast<size_t>(peer);
  return round_of((node_[r] - node_[p] + nodes_) % nodes_, (local_of_[r] - local_of_[p] + local_) % local_);
}

int NcclP2pRounds::channel(int round) const {
  // channel.h reads the comm's own node count and largest node, also where the rounds are flat.
  const int base = real_nodes_ > 1 ? round / max_local_ * ((max_local_ + kP2pPerBatch - 1) / kP2pPerBatch) +
                                         round % max_local_ / kP2pPerBatch
                                   : round;
  return (base & 0xff) & (channels_ - 1);
}

std::vector<NcclP2pSlot> nccl_p2p_batches(const NcclP2pRounds& rounds, int rank,
                                          const std::vector<std::pair<int, bool>>& transfers) {
  // Each transfer's round, and its pass: its place among the transfers of its round and direction.
  struct Entry {
    int round;
    uint32_t pass;
  };
  std::vector<Entry> entries;
  entries.reserve(transfers.size());
  {
    std::vector<std::pair<int, uint32_t>> by_key;  // (2 x round + send, transfer)
    by_key.reserve(transfers.size());
    for (uint32_t t = 0; t < transfers.size(); ++t) {
      const auto [peer, send] = transfers[t];
      const int round = send ? rounds.send_round(rank, peer) : rounds.recv_round(rank, peer);
      by_key.emplace_back(round * 2 + (send ? 1 : 0), t);
      entries.push_back({round, 0});
    }
    std::stable_sort(by_key.begin(), by_key.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 1; i < by_key.size(); ++i)
      if (by_key[i - 1].first == by_key[i].first)
        entries[by_key[i].second].pass = entries[by_key[i - 1].second].pass + 1;
  }
  // A work is (pass, round): its send and its receive go together. Works in NCCL's order.
  std::vector<uint32_t> order(entries.size());
  for (uint32_t t = 0; t < order.size(); ++t) order[t] = t;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Entry &x = entries[a], &y = entries[b];
    return x.pass != y.pass ? x.pass < y.pass : x.round < y.round;
  });
  struct Open {
    uint32_t batch = 0, works = 0;
    std::vector<int> rounds;
    bool any = false;
  };
  std::vector<Open> open(static_cast<size_t>(rounds.channels()));
  std::vector<NcclP2pSlot> out(transfers.size());
  for (size_t i = 0; i < order.size();) {
    const Entry& e = entries[order[i]];
    size_t j = i + 1;  // the work's other direction, if any
    while (j < order.size() && entries[order[j]].pass == e.pass && entries[order[j]].round == e.round) ++j;
    const int c = rounds.channel(e.round);
    Open& ch = open[static_cast<size_t>(c)];
    if (ch.any && (ch.works == kP2pPerBatch || std::find(ch.rounds.begin(), ch.rounds.end(), e.round) != ch.rounds.end())) {
      ++ch.batch;
      ch.works = 0;
      ch.rounds.clear();
    }
    ch.any = true;
    ++ch.works;
    ch.rounds.push_back(e.round);
    for (size_t k = i; k < j; ++k) out[order[k]] = {c, ch.batch};
    i = j;
  }
  return out;
}

}  // namespace compcoll::sched
