// real/verify.cpp — see verify.h.
#include "real/verify.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

#include "io/float_convert.h"
#include "io/tensor_file.h"
#include "schedule/algorithms.h"

namespace compcoll::real {

using sched::Collective;

int integer_bound(DType dtype, int nranks) {
  // Integers up to 2^(mantissa bits + 1) are exact: bf16 256, fp16 2048, fp32 2^24. Partial
  // sums of n values of magnitude <= K stay within n * K.
  const int64_t limit = dtype == DType::BF16 ? 256 : dtype == DType::FP16 ? 2048 : (1 << 24);
  return static_cast<int>(std::clamp<int64_t>(limit / std::max(nranks, 1), 1, 64));
}

namespace {

// Value of element j of rank r's input: in [-K, K], shifting with both (consecutive ranks
// and elements differ, so a misplaced block shows).
int value(int r, uint64_t j, int K) {
  const uint64_t m = 2 * static_cast<uint64_t>(K) + 1;
  return static_cast<int>((j + 3 * static_cast<uint64_t>(r)) % m) - K;
}

// Sum over r in [0, n) of value(r, j, K), in O(1).
int64_t value_sum(int n, uint64_t j, int K) {
  const uint64_t m = 2 * static_cast<uint64_t>(K) + 1;
  int64_t s = 0;
  // Residues (j + 3r) mod m: 3r mod m cycles with period m / gcd(3, m).
  const uint64_t period = m % 3 == 0 ? m / 3 : m;
  const uint64_t full = static_cast<uint64_t>(n) / period, rest = static_cast<uint64_t>(n) % period;
  if (full) {
    int64_t cyc = 0;
    for (uint64_t r = 0; r < period; ++r) cyc += static_cast<int64_t>((j + 3 * r) % m);
    s += cyc * static_cast<int64_t>(full);
  }
  for (uint64_t r = 0; r < rest; ++r) s += static_cast<int64_t>((j + 3 * r) % m);
  return s - static_cast<int64_t>(n) * K;
}

void put(DType dtype, std::vector<uint8_t>& out, uint64_t i, int64_t v) {
  store_from_float(dtype, out.data(), i, static_cast<float>(v));
}

}  // namespace

uint64_t alltoall_count(const sched::Schedule& s) {
  const uint64_t n = static_cast<uint64_t>(s.size());
  const uint64_t c = s.ranks.at(0).input_count / n;
  for (const auto& p : s.ranks)
    if (p.input_count != c * n || p.output_count != c * n)
      throw sched::ScheduleError("all-to-all(v) with uneven counts is not supported by compcoll-run");
  return c;
}

namespace {

}  // namespace

std::vector<uint8_t> integer_input(const sched::Schedule& s, int rank) {
  const int n = s.size(), K = integer_bound(s.dtype, n);
  const uint64_t count = s.ranks.at(rank).input_count;
  std::vector<uint8_t> out(count * dtype_size(s.dtype));
  for (uint64_t i = 0; i < count; ++i) put(s.dtype, out, i, value(rank, i, K));
  return out;
}

std::vector<uint8_t> expected_output(const sched::Schedule& s, int rank) {
  const int n = s.size(), K = integer_bound(s.dtype, n);
  const uint64_t oc = s.ranks.at(rank).output_count;
  std::vector<uint8_t> out(oc * dtype_size(s.dtype));
  switch (s.collective) {
    case Collective::AllReduce:
      for (uint64_t i = 0; i < oc; ++i) put(s.dtype, out, i, value_sum(n, i, K));
      break;
    case Collective::ReduceScatter: {
      const sched::Block b = sched::block_of(s.count, n, rank);
      for (uint64_t i = 0; i < oc; ++i) put(s.dtype, out, i, value_sum(n, b.begin + i, K));
      break;
    }
    case Collective::AllGather:
      for (int q = 0; q < n; ++q) {
        const sched::Block b = sched::block_of(s.count, n, q);
        for (uint64_t j = 0; j < b.count(); ++j) put(s.dtype, out, b.begin + j, value(q, j, K));
      }
      break;
    case Collective::Broadcast: {
      int root = 0;
      for (int r = 0; r < n; ++r)
        if (s.ranks[r].input_count) root = r;
      for (uint64_t i = 0; i < oc; ++i) put(s.dtype, out, i, value(root, i, K));
      break;
    }
    case Collective::AllToAll: {
      const uint64_t c = alltoall_count(s);
      for (int q = 0; q < n; ++q)
        for (uint64_t j = 0; j < c; ++j) put(s.dtype, out, q * c + j, value(q, rank * c + j, K));
      break;
    }
  }
  return out;
}

uint64_t count_wrong(DType dtype, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  const size_t es = dtype_size(dtype);
  if (got.size() != want.size()) return std::max(got.size(), want.size()) / es;
  uint64_t wrong = 0;
  for (size_t i = 0; i < got.size(); i += es) wrong += std::memcmp(got.data() + i, want.data() + i, es) != 0;
  return wrong;
}

std::vector<uint8_t> timing_input(DType dtype, uint64_t elements, int rank, const std::string& dir,
                                  const std::string& kind, std::string* source) {
  // The tensor is loaded once per process and kept (every row of a run reuses it).
  static std::mutex mu;
  static std::map<std::string, TensorData> cache;
  const std::string name(dtype_name(dtype));
  std::string spec = "synthetic:gaussian:1M:0.01";
  if (!dir.empty()) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string f = e.path().filename().string();
      if (f.starts_with(kind + ".") && f.ends_with("." + name + ".npy")) files.push_back(e.path().string());
    }
    if (files.empty()) throw std::runtime_error(dir + ": no tensor file " + kind + ".*." + name + ".npy");
    std::sort(files.begin(), files.end());
    spec = files.front();
  }
  const TensorData* t;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(spec + "/" + name);
    if (it == cache.end()) it = cache.emplace(spec + "/" + name, load_tensors(spec, dtype).front()).first;
    t = &it->second;
  }
  if (source) *source = spec;
  const size_t es = dtype_size(dtype);
  const uint64_t have = t->elements();
  std::vector<uint8_t> out(elements * es);
  if (have == 0) return out;
  uint64_t from = (static_cast<uint64_t>(rank) * 7919) % have;
  for (uint64_t i = 0; i < elements;) {
    const uint64_t n = std::min(have - from, elements - i);
    std::memcpy(out.data() + i * es, t->bytes.data() + from * es, n * es);
    i += n;
    from = 0;
  }
  return out;
}

}  // namespace compcoll::real
