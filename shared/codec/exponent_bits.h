// shared/codec/exponent_bits.h — the per-element bit logic of the exponent codecs
// (gauss-exp, entropy-exp), written once and used by both the host reference and the CUDA
// kernels so the two cannot drift. Everything here is __host__ __device__, allocation-free
// and exception-free; errors are returned as codes. The bit layout is docs/FORMAT.md's.
#pragma once

#include <cstdint>

#include "codec/format.h"
#include "util/hd.h"

namespace compcoll::expbits {

// ---- float layouts ----------------------------------------------------------------------
// A value splits into its exponent field (entropy-coded), `raw` bytes stored verbatim in the
// chunk's raw section, and `extra` bits appended after the exponent code in the lane stream.
struct Bf16Layout {
  using Bits = uint16_t;
  static constexpr uint32_t kExpBits = 8, kRawBytes = 1, kExtraBits = 0;
  COMPCOLL_HD static uint32_t exponent(Bits v) { return (v >> 7) & 0xFFu; }
  COMPCOLL_HD static uint32_t raw(Bits v) { return ((v >> 8) & 0x80u) | (v & 0x7Fu); }
  COMPCOLL_HD static uint32_t extra(Bits) { return 0; }
  COMPCOLL_HD static Bits join(uint32_t e, uint32_t raw, uint32_t) {
    return static_cast<Bits>(((raw & 0x80u) << 8) | (e << 7) | (raw & 0x7Fu));
  }
  // The 8 bits that decide an element's lane-stream bits (exponent, and extra bits if any).
  COMPCOLL_HD static uint32_t key(Bits v) { return exponent(v); }
  COMPCOLL_HD static uint32_t key_exponent(uint32_t key) { return key; }
  COMPCOLL_HD static uint32_t key_extra(uint32_t) { return 0; }
  COMPCOLL_HD static uint32_t make_key(uint32_t e, uint32_t) { return e; }
};
struct Fp16Layout {
  using Bits = uint16_t;
  static constexpr uint32_t kExpBits = 5, kRawBytes = 1, kExtraBits = 3;
  COMPCOLL_HD static uint32_t exponent(Bits v) { return (v >> 10) & 0x1Fu; }
  COMPCOLL_HD static uint32_t raw(Bits v) { return v & 0xFFu; }
  // sign, mantissa bit 9, mantissa bit 8
  COMPCOLL_HD static uint32_t extra(Bits v) { return ((v >> 13) & 0x4u) | ((v >> 8) & 0x3u); }
  COMPCOLL_HD static Bits join(uint32_t e, uint32_t raw, uint32_t extra) {
    return static_cast<Bits>(((extra & 0x4u) << 13) | (e << 10) | ((extra & 0x3u) << 8) |
                             (raw & 0xFFu));
  }
  // The high byte: sign, exponent, mantissa bits 9..8.
  COMPCOLL_HD static uint32_t key(Bits v) { return v >> 8; }
  COMPCOLL_HD static uint32_t key_exponent(uint32_t key) { return (key >> 2) & 0x1Fu; }
  COMPCOLL_HD static uint32_t key_extra(uint32_t key) { return ((key >> 5) & 0x4u) | (key & 0x3u); }
  COMPCOLL_HD static uint32_t make_key(uint32_t e, uint32_t extra) {
    return ((extra & 0x4u) << 5) | (e << 2) | (extra & 0x3u);
  }
};
struct Fp32Layout {
  using Bits = uint32_t;
  static constexpr uint32_t kExpBits = 8, kRawBytes = 3, kExtraBits = 0;
  COMPCOLL_HD static uint32_t exponent(Bits v) { return (v >> 23) & 0xFFu; }
  COMPCOLL_HD static uint32_t raw(Bits v) { return ((v >> 8) & 0x800000u) | (v & 0x7FFFFFu); }
  COMPCOLL_HD static uint32_t extra(Bits) { return 0; }
  COMPCOLL_HD static Bits join(uint32_t e, uint32_t raw, uint32_t) {
    return ((raw & 0x800000u) << 8) | (e << 23) | (raw & 0x7FFFFFu);
  }
  COMPCOLL_HD static uint32_t key(Bits v) { return exponent(v); }
  COMPCOLL_HD static uint32_t key_exponent(uint32_t key) { return key; }
  COMPCOLL_HD static uint32_t key_extra(uint32_t) { return 0; }
  COMPCOLL_HD static uint32_t make_key(uint32_t e, uint32_t) { return e; }
};

template <class L>
COMPCOLL_HD inline void store_raw(uint8_t* p, uint32_t raw) {
  for (uint32_t i = 0; i < L::kRawBytes; ++i) p[i] = static_cast<uint8_t>(raw >> (8 * i));
}
template <class L>
COMPCOLL_HD inline uint32_t load_raw(const uint8_t* p) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < L::kRawBytes; ++i) r |= static_cast<uint32_t>(p[i]) << (8 * i);
  return r;
}

// ---- builders in parts ----------------------------------------------------------------
// Some per-chunk tables are built in steps that `parts` parts run together: on the GPU the
// lanes of a warp (part = lane, a warp barrier after every step), on the host one part. In
// each step the parts write disjoint data and read only what earlier steps wrote, and every
// part returns the same next step (kStepDone at the end), read from what earlier steps wrote:
// so the parts of a step, run in any order, leave what one part alone leaves.
constexpr uint32_t kMaxParts = 32;
constexpr uint32_t kStepDone = 0xFFFFFFFFu;
struct NoSync {
  COMPCOLL_HD void operator()() const {}
};

// Part `part`'s symbols of [0, nsym): the contiguous range [lo, hi), in part order.
COMPCOLL_HD inline void part_range(uint32_t nsym, uint32_t part, uint32_t parts, uint32_t& lo, uint32_t& hi) {
  const uint32_t per = (nsym + parts - 1) / parts;
  lo = part * per < nsym ? part * per : nsym;
  hi = nsym - lo < per ? nsym : lo + per;
}

// ---- canonical codes --------------------------------------------------------------------
// A code with no decode table (what encoding needs): the part of PrefixCode before its lut.
struct CanonicalCode {
  uint16_t code[format::kMaxEntropySymbols];
  uint8_t length[format::kMaxEntropySymbols];
};

// assign_prefix_codes' scratch: per part the symbols of each length in its range (then the
// first code its range gives that length), and whether a length is out of range.
struct CodeScratch {
  static constexpr uint32_t kLengths = format::kMaxCodeBits + 1;
  uint16_t count[kMaxParts][kLengths];  // at most 256 symbols; codes below 2^kMaxCodeBits + 256
  uint8_t too_long[kMaxParts];
  uint32_t total[kLengths];
  uint32_t first[kLengths + 1];  // code_starts' next
  uint32_t ok;
};
static_assert(format::kMaxEntropySymbols + (1u << format::kMaxCodeBits) <= 0xFFFFu, "counts fit 16 bits");

// ---- prefix codes -----------------------------------------------------------------------
// A canonical prefix code over at most 256 symbols, lengths 1..kMaxCodeBits (0 = unused).
// Codes are written LSB-first, so `code` holds the canonical code bit-reversed.
// The decode table maps the next kMaxCodeBits stream bits to (symbol << 4 | length);
// 0 marks a bit pattern no code starts with.
struct PrefixCode {
  uint16_t code[format::kMaxEntropySymbols];
  uint8_t length[format::kMaxEntropySymbols];
  union {
    uint16_t lut[1u << format::kMaxCodeBits];
    // Before the decode table is built: assign_prefix_codes_in_parts' scratch, where a GPU
    // decoder builds a chunk's codes (the table then overwrites it).
    CodeScratch scratch;
  };
};
static_assert(sizeof(CodeScratch) <= sizeof(PrefixCode::lut), "the scratch leaves the table's size as it is");

COMPCOLL_HD inline uint32_t reverse_bits(uint32_t v, uint32_t n) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < n; ++i) r |= ((v >> i) & 1u) << (n - 1 - i);
  return r;
}

// From count[l], the symbols of each length l = 1..kMaxCodeBits (count[0], the unused ones,
// is not read): whether the Kraft sum is in (0, 1], and next[l], the first canonical code of
// each length (kMaxCodeBits + 2 entries; written only for a valid set).
COMPCOLL_HD inline bool code_starts(const uint32_t* count, uint32_t* next) {
  constexpr uint32_t kMax = format::kMaxCodeBits;
  uint32_t kraft = 0;  // in units of 2^-kMax
  for (uint32_t l = 1; l <= kMax; ++l) kraft += count[l] << (kMax - l);
  if (kraft == 0 || kraft > (1u << kMax)) return false;
  for (uint32_t l = 0; l <= kMax + 1; ++l) next[l] = 0;
  uint32_t code = 0;
  for (uint32_t l = 1; l <= kMax; ++l) {
    code = (code + (l > 1 ? count[l - 1] : 0)) << 1;
    next[l] = code;
  }
  return true;
}

// Checks lengths (each 0..kMaxCodeBits, Kraft sum <= 1, at least one symbol) and gives,
// for each length l, count[l] (symbols of that length; count[0] = 0) and next[l] (the first
// canonical code of that length). count has kMaxCodeBits + 1 entries, next kMaxCodeBits + 2.
COMPCOLL_HD inline bool canonical_code_starts(const uint8_t* lengths, uint32_t nsym, uint32_t* count, uint32_t* next) {
  constexpr uint32_t kMax = format::kMaxCodeBits;
  for (uint32_t l = 0; l <= kMax; ++l) count[l] = 0;
  for (uint32_t s = 0; s < nsym; ++s) {
    if (lengths[s] > kMax) return false;
    ++count[lengths[s]];
  }
  count[0] = 0;
  return code_starts(count, next);
}

enum CodeStep : uint32_t { kCodeCount, kCodeTotals, kCodeStarts, kCodeBases, kCodeCheck, kCodeAssign };

template <class Code>
COMPCOLL_HD inline uint32_t assign_codes_step(uint32_t step, const uint8_t* lengths, uint32_t nsym, Code& pc,
                                              CodeScratch& sc, uint32_t part, uint32_t parts) {
  constexpr uint32_t kMax = format::kMaxCodeBits;
  uint32_t lo, hi;
  part_range(nsym, part, parts, lo, hi);
  switch (step) {
    case kCodeCount:  // per part: symbols of each length
      for (uint32_t l = 0; l <= kMax; ++l) sc.count[part][l] = 0;
      sc.too_long[part] = 0;
      for (uint32_t s = lo; s < hi; ++s) {
        if (lengths[s] > kMax) sc.too_long[part] = 1;
        else ++sc.count[part][lengths[s]];  // at most 256: no overflow
      }
      return kCodeTotals;
    case kCodeTotals:  // part l: all parts' symbols of length l
      for (uint32_t l = part; l <= kMax; l += parts) {
        uint32_t t = 0;
        for (uint32_t q = 0; q < parts; ++q) t += sc.count[q][l];
        sc.total[l] = t;
      }
      return kCodeStarts;
    case kCodeStarts:  // part 0: the lengths' validity and each length's first code
      if (part == 0) {
        bool ok = true;
        for (uint32_t q = 0; q < parts; ++q) ok = ok && sc.too_long[q] == 0;
        sc.ok = ok && code_starts(sc.total, sc.first);
      }
      return kCodeBases;
    case kCodeBases:  // part l: the first code of length l in each part's range
      if (!sc.ok) return kCodeCheck;
      for (uint32_t l = 1 + part; l <= kMax; l += parts) {
        uint32_t next = sc.first[l];
        for (uint32_t q = 0; q < parts; ++q) {
          const uint32_t t = sc.count[q][l];
          sc.count[q][l] = static_cast<uint16_t>(next);
          next += t;
        }
      }
      return kCodeCheck;
    case kCodeCheck:
      return sc.ok ? kCodeAssign : kStepDone;
    case kCodeAssign:  // each part its range's codes, in symbol order; the symbols past nsym none
      for (uint32_t s = lo; s < hi; ++s) {
        const uint32_t l = lengths[s];
        pc.length[s] = static_cast<uint8_t>(l);
        pc.code[s] = l == 0 ? 0 : static_cast<uint16_t>(reverse_bits(sc.count[part][l]++, l));
      }
      for (uint32_t s = nsym + part; s < format::kMaxEntropySymbols; s += parts) {
        pc.length[s] = 0;
        pc.code[s] = 0;
      }
      return kStepDone;
  }
  return kStepDone;
}

// Checks lengths (each 0..kMaxCodeBits, Kraft sum <= 1, at least one symbol) and assigns
// canonical codes: shorter codes first, ties by symbol; pc's code and length (a PrefixCode's
// decode table is not touched). Returns false for an invalid set, pc untouched. This part of
// `parts` (sync: the barrier after each step).
template <class Code, class Sync>
COMPCOLL_HD inline bool assign_prefix_codes_in_parts(const uint8_t* lengths, uint32_t nsym, Code& pc,
                                                     CodeScratch& sc, uint32_t part, uint32_t parts,
                                                     Sync sync) {
  bool ok = false;  // in this part's own hands: the scratch may be reused after the last barrier
  for (uint32_t step = kCodeCount; step != kStepDone;) {
    const uint32_t next = assign_codes_step(step, lengths, nsym, pc, sc, part, parts);
    if (step == kCodeCheck) ok = next == kCodeAssign;
    sync();
    step = next;
  }
  return ok;
}
template <class Code>
COMPCOLL_HD inline bool assign_prefix_codes(const uint8_t* lengths, uint32_t nsym, Code& pc) {
  CodeScratch sc{};
  return assign_prefix_codes_in_parts(lengths, nsym, pc, sc, 0, 1, NoSync{});
}

// pc's decode table from its codes, in `parts` parts that write disjoint entries, so that the
// lanes of a warp can share it (part = lane): clear_prefix_lut zeroes the entries i with
// i % parts == part; fill_prefix_lut writes each code's entries rev | hi << l with
// hi % parts == part. Every clear must be done before any fill (a barrier between them);
// then the parts, in any order, give one table.
COMPCOLL_HD inline void clear_prefix_lut(PrefixCode& pc, uint32_t part, uint32_t parts) {
  for (uint32_t i = part; i < (1u << format::kMaxCodeBits); i += parts) pc.lut[i] = 0;
}
// Symbol s's entries (with hi % parts == part).
COMPCOLL_HD inline void fill_prefix_lut_symbol(PrefixCode& pc, uint32_t s, uint32_t part, uint32_t parts) {
  constexpr uint32_t kMax = format::kMaxCodeBits;
  const uint32_t l = pc.length[s];
  if (l == 0) return;
  for (uint32_t hi = part; hi < (1u << (kMax - l)); hi += parts)
    pc.lut[pc.code[s] | (hi << l)] = static_cast<uint16_t>((s << 4) | l);
}
COMPCOLL_HD inline void fill_prefix_lut(PrefixCode& pc, uint32_t nsym, uint32_t part, uint32_t parts) {
  for (uint32_t s = 0; s < nsym; ++s) fill_prefix_lut_symbol(pc, s, part, parts);
}
// The same over the symbols listed at list[0], list[stride], ... (count of them), which must
// name every symbol with a code: the same table, a decoder walking a chunk's code table instead
// of every symbol.
COMPCOLL_HD inline void fill_prefix_lut_listed(PrefixCode& pc, const uint8_t* list, uint32_t stride,
                                               uint32_t count, uint32_t part, uint32_t parts) {
  for (uint32_t i = 0; i < count; ++i) fill_prefix_lut_symbol(pc, list[i * stride], part, parts);
}

// assign_prefix_codes, and the decode table in one part.
COMPCOLL_HD inline bool build_prefix_code(const uint8_t* lengths, uint32_t nsym, PrefixCode& pc) {
  if (!assign_prefix_codes(lengths, nsym, pc)) return false;
  clear_prefix_lut(pc, 0, 1);
  fill_prefix_lut(pc, nsym, 0, 1);
  return true;
}

// Huffman code lengths limited to kMaxCodeBits, deterministic (ties broken by symbol), so
// the host and the GPU build the same table from the same histogram. Frequencies are
// halved (keeping non-zero ones non-zero) until the longest code fits. Built in parts (above):
// the used symbols gathered in symbol order, sorted by (frequency, symbol) by rank, the
// two-queue tree and its depths by part 0, the lengths written back.
struct HuffmanScratch {
  static constexpr uint32_t kN = format::kMaxEntropySymbols;
  uint32_t freq[kN];
  uint32_t weight[2 * kN];      // leaves 0..n-1 in sorted order, internal nodes n..2n-2
  uint32_t key[kN];             // the used symbols in increasing order: frequency << 8 | symbol
  uint16_t sorted[kN];          // the same symbols by key
  uint16_t parent[2 * kN];
  uint8_t depth[2 * kN];
  uint32_t start[kMaxParts + 1];  // used symbols before each part's range; [parts]: all of them
  uint32_t fits;                  // the tree's leaves are at most kMaxCodeBits deep
};
static_assert(format::kMaxEntropySymbols <= 256, "a symbol fits a key's low byte");
enum HuffmanStep : uint32_t {
  kHuffBegin, kHuffCount, kHuffOffsets, kHuffGather, kHuffBranch, kHuffSort, kHuffTree, kHuffFits,
  kHuffLengths, kHuffHalve
};

COMPCOLL_HD inline uint32_t huffman_step(uint32_t step, const uint32_t* freq_in, uint32_t nsym,
                                         uint8_t* lengths, HuffmanScratch& sc, uint32_t part,
                                         uint32_t parts) {
  uint32_t lo, hi;
  part_range(nsym, part, parts, lo, hi);
  switch (step) {
    case kHuffBegin:
      for (uint32_t s = part; s < nsym; s += parts) {
        sc.freq[s] = freq_in[s];
        lengths[s] = 0;
      }
      return kHuffCount;
    case kHuffCount: {  // per part: its used symbols
      uint32_t used = 0;
      for (uint32_t s = lo; s < hi; ++s) used += sc.freq[s] > 0;
      sc.start[part] = used;
      return kHuffOffsets;
    }
    case kHuffOffsets:  // part 0: where each part's used symbols go
      if (part == 0) {
        uint32_t at = 0;
        for (uint32_t q = 0; q < parts; ++q) {
          const uint32_t used = sc.start[q];
          sc.start[q] = at;
          at += used;
        }
        sc.start[parts] = at;
      }
      return kHuffGather;
    case kHuffGather: {
      uint32_t at = sc.start[part];
      for (uint32_t s = lo; s < hi; ++s)
        if (sc.freq[s] > 0) sc.key[at++] = sc.freq[s] << 8 | s;
      return kHuffBranch;
    }
    case kHuffBranch:
      if (sc.start[parts] == 1 && part == 0) lengths[sc.key[0] & 0xFFu] = 1;
      return sc.start[parts] <= 1 ? kStepDone : kHuffSort;
    case kHuffSort: {  // each symbol's rank by key: no two keys are equal
      const uint32_t n = sc.start[parts];
      if (parts == 1) {  // alone: sorting the keys (nearly in order already) gives the same ranks
        for (uint32_t i = 1; i < n; ++i) {
          const uint32_t k = sc.key[i];
          uint32_t j = i;
          for (; j > 0 && sc.key[j - 1] > k; --j) sc.key[j] = sc.key[j - 1];
          sc.key[j] = k;
        }
        for (uint32_t i = 0; i < n; ++i) sc.sorted[i] = static_cast<uint16_t>(sc.key[i] & 0xFFu);
        return kHuffTree;
      }
      for (uint32_t i = part; i < n; i += parts) {
        const uint32_t k = sc.key[i];
        uint32_t rank = 0;
        for (uint32_t j = 0; j < n; ++j) rank += sc.key[j] < k;
        sc.sorted[rank] = static_cast<uint16_t>(k & 0xFFu);
      }
      return kHuffTree;
    }
    case kHuffTree:  // part 0: the two-queue tree and its depths (of n >= 2 leaves, kHuffBranch)
      if (part == 0 && sc.start[parts] >= 2) {
        const uint32_t n = sc.start[parts];
        for (uint32_t i = 0; i < n; ++i) sc.weight[i] = sc.freq[sc.sorted[i]];
        uint32_t leaf = 0, node = n, made = n;
        for (uint32_t k = 0; k + 1 < n; ++k) {
          uint32_t pick[2];
          for (uint32_t t = 0; t < 2; ++t) {
            if (leaf < n && (node >= made || sc.weight[leaf] <= sc.weight[node])) pick[t] = leaf++;
            else pick[t] = node++;
          }
          sc.weight[made] = sc.weight[pick[0]] + sc.weight[pick[1]];
          sc.parent[pick[0]] = static_cast<uint16_t>(made);
          sc.parent[pick[1]] = static_cast<uint16_t>(made);
          ++made;
        }
        // the root is made - 1; parents are created after their children
        uint32_t depth_max = 0;
        sc.depth[made - 1] = 0;
        for (int32_t i = static_cast<int32_t>(made) - 2; i >= 0; --i) {
          sc.depth[i] = static_cast<uint8_t>(sc.depth[sc.parent[i]] + 1);
          if (static_cast<uint32_t>(i) < n && sc.depth[i] > depth_max) depth_max = sc.depth[i];
        }
        sc.fits = depth_max <= format::kMaxCodeBits;
      }
      return kHuffFits;
    case kHuffFits:
      return sc.fits ? kHuffLengths : kHuffHalve;
    case kHuffLengths:
      for (uint32_t i = part; i < sc.start[parts]; i += parts) lengths[sc.sorted[i]] = sc.depth[i];
      return kStepDone;
    case kHuffHalve:
      for (uint32_t s = part; s < nsym; s += parts) sc.freq[s] = (sc.freq[s] + 1) >> 1;
      return kHuffCount;
  }
  return kStepDone;
}

// The lengths for freq_in[0, nsym) into lengths[0, nsym): this part of `parts` (sync: the
// barrier after each step).
template <class Sync>
COMPCOLL_HD inline void huffman_lengths_in_parts(const uint32_t* freq_in, uint32_t nsym, uint8_t* lengths,
                                                 HuffmanScratch& sc, uint32_t part, uint32_t parts, Sync sync) {
  for (uint32_t step = kHuffBegin; step != kStepDone;) {
    const uint32_t next = huffman_step(step, freq_in, nsym, lengths, sc, part, parts);
    sync();
    step = next;
  }
}
COMPCOLL_HD inline void huffman_lengths(const uint32_t* freq_in, uint32_t nsym, uint8_t* lengths) {
  HuffmanScratch sc;  // what the steps read before writing (the compiler cannot follow them)
  sc.fits = 0;
  for (uint32_t& x : sc.start) x = 0;
  huffman_lengths_in_parts(freq_in, nsym, lengths, sc, 0, 1, NoSync{});
}

// ---- lane bit streams -------------------------------------------------------------------
// LSB-first bit writer emitting little-endian 32-bit words, each stored once, when it is full
// (or by finish, zero-padded): the CUDA kernels write lanes with it, and encode_lane, the
// reference the host's fast paths are tested against. `out` may be null (count only) unless
// kOut (StreamBitWriter: the GPU's lanes, whose full words are stored with no test of the
// pointer); on the GPU it must be 4-byte aligned. put() takes no branch: a word is stored where
// it is full (the lanes of a warp fill theirs at different elements). The bits held stay in
// 32 bits (nbits < 32 between puts): the part of a value that does not fit the word being
// filled is one funnel shift on the GPU.
template <bool kOut>
struct BitWriterOf {
  uint8_t* out;
  uint32_t acc = 0;  // the word being filled: its low nbits bits
  uint32_t nbits = 0;
  uint32_t words = 0;
  COMPCOLL_HD explicit BitWriterOf(uint8_t* o) : out(o) {}
  COMPCOLL_HD void store(uint32_t w, uint32_t v) {
#if defined(__CUDA_ARCH__)
    reinterpret_cast<uint32_t*>(out)[w] = v;
#else
    format::store_u32(out + 4ull * w, v);
#endif
  }
  COMPCOLL_HD void put(uint32_t value, uint32_t n) {  // 1 <= n <= 32, value < 2^n
    const uint32_t lo = acc | value << nbits;  // nbits < 32
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __funnelshift_l(value, 0u, nbits);  // value's bits past the word
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(value) << nbits) >> 32);
#endif
    const uint32_t total = nbits + n;
    const bool full = total >= 32;
    if (full && (kOut || out)) store(words, lo);
    words += full ? 1 : 0;
    acc = full ? hi : lo;
    nbits = total & 31;
  }
  COMPCOLL_HD uint32_t finish() {
    if (nbits == 0) return words;
    if (kOut || out) store(words, acc);
    return words + 1;
  }
};
using BitWriter = BitWriterOf<false>;
using StreamBitWriter = BitWriterOf<true>;

// Bounds-checked LSB-first reader over `nwords` little-endian words, addressed by bit
// position. peek32() returns the next 32 bits (zeros past the end): enough for one element's
// code, escape and extra bits together. Away from the end it is one unaligned 64-bit load,
// which keeps the decode loop's dependency chain short (position -> load -> table -> length).
struct BitReader {
  const uint8_t* in;
  uint32_t nwords;
  uint64_t pos = 0;
  COMPCOLL_HD BitReader(const uint8_t* p, uint32_t n) : in(p), nwords(n) {}
  COMPCOLL_HD uint32_t word(uint64_t w) const {
    return w < nwords ? format::load_u32(in + 4 * w) : 0u;
  }
  COMPCOLL_HD uint32_t peek32() const {
    const uint64_t byte = pos >> 3;
    if (byte + 8 <= 4ull * nwords) return static_cast<uint32_t>(format::load_u64(in + byte) >> (pos & 7));
    const uint64_t w = pos >> 5;
    const uint64_t v = word(w) | (static_cast<uint64_t>(word(w + 1)) << 32);
    return static_cast<uint32_t>(v >> (pos & 31));
  }
  COMPCOLL_HD void skip(uint32_t n) { pos += n; }
  COMPCOLL_HD bool overrun() const { return pos > 32ull * nwords; }
  // True when the stream holds exactly the bits read plus a zero pad of < 32 bits.
  COMPCOLL_HD bool exhausted_cleanly() const {
    if (overrun() || (pos + 31) / 32 != nwords) return false;
    return (pos & 31) == 0 || (word(pos >> 5) >> (pos & 31)) == 0;
  }
};

// The same bits and checks as BitReader, delivered from a 64-bit buffer that takes one whole
// word when fewer than 32 bits are left: an element costs at most one word load, aligned where
// the words are (the GPU reads lane streams from global memory this way, where they do not fit
// its stage; any alignment works, byte by byte). The bits consumed are 32 * next - avail
// (every word loaded adds 32 to both sides), not counted apart.
struct WordBitReader {
  const uint8_t* in;
  uint32_t nwords;
  uint64_t buf = 0;   // the next `avail` bits, lowest first
  uint32_t avail = 0;
  uint32_t next = 0;  // the next word to load
  bool aligned;
  COMPCOLL_HD WordBitReader(const uint8_t* p, uint32_t n)
      : in(p), nwords(n), aligned(reinterpret_cast<uintptr_t>(p) % 4 == 0) {}
  COMPCOLL_HD uint32_t word(uint32_t w) const {
    if (w >= nwords) return 0u;
#if defined(__CUDA_ARCH__)
    if (aligned) return reinterpret_cast<const uint32_t*>(in)[w];
#endif
    return format::load_u32(in + 4 * w);
  }
  // The next word is read at every call, kept only where fewer than 32 bits are left: no branch
  // (the lanes of a warp need new words at different calls).
  COMPCOLL_HD uint32_t peek32() {
    const bool refill = avail < 32;
    const uint64_t w = word(next);
    buf |= refill ? w << avail : 0;
    avail += refill ? 32 : 0;
    next += refill ? 1 : 0;
    return static_cast<uint32_t>(buf);
  }
  COMPCOLL_HD void skip(uint32_t n) {  // n <= 32, after peek32
    buf >>= n;
    avail -= n;
  }
  COMPCOLL_HD uint64_t pos() const { return 32ull * next - avail; }
  COMPCOLL_HD bool overrun() const { return pos() > 32ull * nwords; }
  COMPCOLL_HD bool exhausted_cleanly() const {
    const uint64_t p = pos();
    if (p > 32ull * nwords || (p + 31) / 32 != nwords) return false;
    return (p & 31) == 0 || (word(static_cast<uint32_t>(p >> 5)) >> (p & 31)) == 0;
  }
};

// The same bits and checks as BitReader over 4-byte aligned words (the GPU's staged lane
// streams, in shared memory): the next 32 bits are the two words at the bit position, joined
// by a funnel shift, and a skip adds to the position. Its loads wait on the position, where
// WordBitReader's do not, but a step costs about half the instructions of carrying a 64-bit
// buffer. A lane's stream has at most 65535 words, so that the position fits 32 bits.
struct AlignedWordBitReader {
  const uint32_t* in;
  uint32_t nwords;
  uint32_t p = 0;  // bits consumed
  COMPCOLL_HD AlignedWordBitReader(const uint8_t* q, uint32_t n)
      : in(reinterpret_cast<const uint32_t*>(q)), nwords(n) {}
  COMPCOLL_HD uint32_t word(uint32_t w) const { return w < nwords ? in[w] : 0u; }
  COMPCOLL_HD uint32_t peek32() const {
    const uint32_t w = p >> 5, lo = word(w), hi = word(w + 1);
#if defined(__CUDA_ARCH__)
    return __funnelshift_r(lo, hi, p);  // shifts by p % 32
#else
    return static_cast<uint32_t>((static_cast<uint64_t>(hi) << 32 | lo) >> (p & 31));
#endif
  }
  COMPCOLL_HD void skip(uint32_t n) { p += n; }
  COMPCOLL_HD uint64_t pos() const { return p; }
  COMPCOLL_HD bool overrun() const { return p > 32ull * nwords; }
  COMPCOLL_HD bool exhausted_cleanly() const {
    if (overrun() || (uint64_t{p} + 31) / 32 != nwords) return false;
    return (p & 31) == 0 || (word(p >> 5) >> (p & 31)) == 0;
  }
};
static_assert(format::kLaneTableBytes / format::kLanes == 2, "a lane's word count is 16 bits");

// ---- symbol mappings --------------------------------------------------------------------
// gauss-exp: exponents relative to the chunk's reference exponent.
struct GaussSymbols {
  uint32_t ref;
  template <class L>
  COMPCOLL_HD uint32_t symbol(uint32_t e) const {
    constexpr uint32_t kAllOnes = (1u << L::kExpBits) - 1;
    if (e == 0) return format::kGaussSymZero;
    if (e == kAllOnes) return format::kGaussSymEsc;
    const int d = static_cast<int>(e) - static_cast<int>(ref);
    if (d < format::kGaussDMin || d > format::kGaussDMax) return format::kGaussSymEsc;
    return static_cast<uint32_t>(d - format::kGaussDMin);
  }
  // Exponent of a non-escape symbol, or -1 if the symbol cannot occur with this reference.
  template <class L>
  COMPCOLL_HD int exponent(uint32_t sym) const {
    constexpr int kAllOnes = (1 << L::kExpBits) - 1;
    if (sym == format::kGaussSymZero) return 0;
    const int e = static_cast<int>(ref) + static_cast<int>(sym) + format::kGaussDMin;
    return (e >= 1 && e < kAllOnes) ? e : -1;
  }
  COMPCOLL_HD static bool is_escape(uint32_t sym) { return sym == format::kGaussSymEsc; }
  // A symbol's byte in a three-exponents-a-lookup table entry (build_triple_code): 0 for zero,
  // 0x80 | (d + 8) for d in [-8, 7]; -1 for any other symbol, the escape included (the entry
  // ends before it).
  COMPCOLL_HD static int triple_byte(uint32_t sym) {
    if (sym == format::kGaussSymZero) return 0;
    const int d = static_cast<int>(sym) + format::kGaussDMin;
    return is_escape(sym) || d < -8 || d > 7 ? -1 : static_cast<int>(0x80u | static_cast<uint32_t>(d + 8));
  }
};

// entropy-exp: the exponent is the symbol.
struct DirectSymbols {
  template <class L>
  COMPCOLL_HD uint32_t symbol(uint32_t e) const { return e; }
  template <class L>
  COMPCOLL_HD int exponent(uint32_t sym) const { return static_cast<int>(sym); }
  COMPCOLL_HD static bool is_escape(uint32_t) { return false; }
  // The exponent itself (build_triple_code).
  COMPCOLL_HD static int triple_byte(uint32_t sym) { return static_cast<int>(sym); }
};

// The gauss-exp reference: the rounded mean exponent of the chunk's normal numbers
// (exponent field neither 0 nor all ones); 0 if there are none. Integer arithmetic only,
// so host and GPU agree. `sum` and `count` may come from a parallel reduction.
COMPCOLL_HD inline uint32_t gauss_reference(uint64_t sum, uint32_t count) {
  return count == 0 ? 0u : static_cast<uint32_t>((sum + count / 2) / count);
}
template <class L>
COMPCOLL_HD inline bool is_normal_exponent(uint32_t e) {
  return e != 0 && e != (1u << L::kExpBits) - 1;
}

// Per chunk: what each key (L::key of a value) writes to its lane stream — the symbol's code,
// for an escape the full exponent, then the extra bits — as one word of up to 23 bits, and its
// length, in one entry (word | length << kKeyLengthShift). Built once per chunk so that coding
// an element is one table lookup and one bit append.
constexpr uint32_t kKeyLengthShift = 27;
constexpr uint32_t kKeyWordMask = (1u << kKeyLengthShift) - 1;
static_assert(format::kMaxCodeBits + 8 + 3 < kKeyLengthShift, "a key's word fits below its length");
struct KeyCode {
  uint32_t entry[256];
  COMPCOLL_HD uint32_t word(uint32_t key) const { return entry[key] & kKeyWordMask; }
  COMPCOLL_HD uint32_t length(uint32_t key) const { return entry[key] >> kKeyLengthShift; }
};

// In parts: part `part` of `parts` builds the keys key % parts == part.
template <class L, class Symbols, class Code>
COMPCOLL_HD inline void build_key_code(const Symbols& syms, const Code& pc, KeyCode& kc, uint32_t part = 0,
                                       uint32_t parts = 1) {
  for (uint32_t key = part; key < 256; key += parts) {
    const uint32_t e = L::key_exponent(key);
    const uint32_t s = syms.template symbol<L>(e);
    uint32_t word = pc.code[s], len = pc.length[s];
    if (Symbols::is_escape(s)) {
      word |= e << len;
      len += L::kExpBits;
    }
    if (L::kExtraBits) {
      word |= L::key_extra(key) << len;
      len += L::kExtraBits;
    }
    kc.entry[key] = word | len << kKeyLengthShift;
  }
}

// Appends lane `lane`'s elements of in[0, n) (elements lane, lane+kLanes, ...) to its
// writer: a whole chunk, or a window of one that starts at a multiple of kLanes elements (the
// GPU codes a chunk window by window, the writer carried from one to the next).
template <class L, class Writer>
COMPCOLL_HD inline void put_lane(const typename L::Bits* in, uint32_t n, uint32_t lane,
                                 const KeyCode& kc, Writer& w) {
  for (uint32_t k = lane; k < n; k += format::kLanes) {
    const uint32_t e = kc.entry[L::key(in[k])];
    w.put(e & kKeyWordMask, e >> kKeyLengthShift);
  }
}

// Bits that lane `lane`'s elements of in[0, n) take (a whole chunk or a window, as put_lane):
// a lane of b bits in all takes (b + 31) / 32 words.
template <class L>
COMPCOLL_HD inline uint32_t lane_bits(const typename L::Bits* in, uint32_t n, uint32_t lane,
                                      const KeyCode& kc) {
  uint32_t bits = 0;
  for (uint32_t k = lane; k < n; k += format::kLanes) bits += kc.entry[L::key(in[k])] >> kKeyLengthShift;
  return bits;
}

// Encodes lane `lane` of a chunk (elements lane, lane+kLanes, ...) into `out` (null: count
// only). Returns the lane's word count.
template <class L>
COMPCOLL_HD inline uint32_t encode_lane(const typename L::Bits* in, uint32_t n, uint32_t lane,
                                        const KeyCode& kc, uint8_t* out) {
  BitWriter w(out);
  put_lane<L>(in, n, lane, kc, w);
  return w.finish();
}

// Per chunk: the exponent each symbol stands for, kEscapeExponent for the escape, or
// kBadExponent for a symbol that cannot occur (gauss-exp: ref + d out of range).
constexpr int16_t kEscapeExponent = -1;
constexpr int16_t kBadExponent = -2;
struct SymbolExponents {
  int16_t e[format::kMaxEntropySymbols];
};

// In parts, as build_key_code.
template <class L, class Symbols>
COMPCOLL_HD inline void build_symbol_exponents(const Symbols& syms, SymbolExponents& se, uint32_t part = 0,
                                               uint32_t parts = 1) {
  for (uint32_t s = part; s < format::kMaxEntropySymbols; s += parts) {
    if (Symbols::is_escape(s)) {
      se.e[s] = kEscapeExponent;
      continue;
    }
    const int e = syms.template exponent<L>(s);
    se.e[s] = e < 0 ? kBadExponent : static_cast<int16_t>(e);
  }
}

// 32 bits wide: a GPU lane keeps it in a register of its own (no byte inserts in the decode loop).
enum class LaneStatus : uint32_t { Ok = 0, BadCode, BadExponent, Overrun, TrailingBits };

// After a lane's last element: the stream must hold exactly the bits read plus zero padding.
template <class Reader>
COMPCOLL_HD inline LaneStatus lane_end_status(const Reader& r) {
  if (r.overrun()) return LaneStatus::Overrun;
  return r.exhausted_cleanly() ? LaneStatus::Ok : LaneStatus::TrailingBits;
}


// decode_key_bits once the element's code length l (0: no code starts the bits) and its
// symbol's exponent e (from SymbolExponents) are known.
template <class L>
COMPCOLL_HD inline uint32_t finish_key_bits(uint32_t bits, uint32_t l, int e, uint32_t* len,
                                            LaneStatus* status) {
  if (l == 0) {
    *status = LaneStatus::BadCode;
    *len = 0;
    return 0;
  }
  if (e == kEscapeExponent) {
    e = static_cast<int>((bits >> l) & ((1u << L::kExpBits) - 1));
    l += L::kExpBits;
  }
  if (e == kBadExponent) {
    *status = LaneStatus::BadExponent;
    *len = l;
    return 0;
  }
  const uint32_t extra = L::kExtraBits ? (bits >> l) & ((1u << L::kExtraBits) - 1) : 0u;
  *len = l + L::kExtraBits;
  return L::make_key(static_cast<uint32_t>(e), extra);
}

// Decodes one element's key (L::key of the value: the exponent, and for fp16 the extra bits)
// from the next 32 bits of its lane stream; *len receives the bits it occupies. Sets *status
// on a bad code or exponent. This is the per-element decode logic; the readers around it only
// deliver bits.
template <class L>
COMPCOLL_HD inline uint32_t decode_key_bits(uint32_t bits, const SymbolExponents& se,
                                            const PrefixCode& pc, uint32_t* len,
                                            LaneStatus* status) {
  const uint16_t entry = pc.lut[bits & ((1u << format::kMaxCodeBits) - 1)];
  return finish_key_bits<L>(bits, entry & 0xFu, se.e[entry >> 4], len, status);
}

// The same, reading from and advancing a lane's reader (BitReader or WordBitReader).
template <class L, class Reader>
COMPCOLL_HD inline uint32_t decode_key(Reader& r, const SymbolExponents& se,
                                       const PrefixCode& pc, LaneStatus* status) {
  uint32_t len;
  const uint32_t key = decode_key_bits<L>(r.peek32(), se, pc, &len, status);
  r.skip(len);
  return key;
}

// A value from its key and its raw-section bytes.
template <class L>
COMPCOLL_HD inline typename L::Bits join_key(uint32_t key, const uint8_t* raw_section, uint32_t k) {
  return L::join(L::key_exponent(key), load_raw<L>(raw_section + k * L::kRawBytes), L::key_extra(key));
}

// Decodes one element from a lane's reader: returns its value, or sets *status.
template <class L, class Reader>
COMPCOLL_HD inline typename L::Bits decode_element(Reader& r, const uint8_t* raw_section,
                                                   uint32_t k, const SymbolExponents& se,
                                                   const PrefixCode& pc, LaneStatus* status) {
  return join_key<L>(decode_key<L>(r, se, pc, status), raw_section, k);
}

// How take_lane puts a decoded value: stores it (decode), or, with another functor, adds it to
// what is there (the GPU's fused decode-and-add).
struct StoreElement {
  template <class Bits>
  COMPCOLL_HD void operator()(Bits* out, uint32_t k, Bits v) const {
    out[k] = v;
  }
};

// Decodes lane `lane`'s elements of out[0, n) from its reader, the raw bytes from
// raw_section[0, n * kRawBytes): a whole chunk, or a window of one that starts at a multiple
// of kLanes elements (the pointers then point at the window). Stops at the first bad code:
// returns its status and its element index (in the window) in *bad_element.
template <class L, class Reader, class Put = StoreElement>
COMPCOLL_HD inline LaneStatus take_lane(Reader& r, const uint8_t* raw_section, uint32_t n,
                                        uint32_t lane, const SymbolExponents& se,
                                        const PrefixCode& pc, typename L::Bits* out,
                                        uint32_t* bad_element, Put put = {}) {
  LaneStatus st = LaneStatus::Ok;
  for (uint32_t k = lane; k < n; k += format::kLanes) {
    put(out, k, decode_element<L>(r, raw_section, k, se, pc, &st));
    if (st != LaneStatus::Ok) {
      *bad_element = k;
      return st;
    }
  }
  return st;
}

// ---- two elements a lookup ----------------------------------------------------------------
// For each value of the next kPairBits stream bits: the code of a lane's next element when it
// lies within those bits and is not the escape (l1 | s1 << 4; else 0), and the next one's too
// when both do, the first element's extra bits between them (| l2 << 12 | s2 << 16 | 1 << 31).
// From a decode table (pc.lut) and the code's symbols (Symbols::is_escape: an escape's literal
// exponent is read by the general path, finish_key_bits); whether a symbol stands for no
// exponent is the decoder's to check (SymbolExponents). The GPU builds it for gauss-exp's
// fixed code, whose likeliest codes are 2-4 bits long, so that a lane's serial decode takes
// one table lookup for two elements where it can, and for one where it cannot (pc.lut only
// for codes longer than kPairBits, and escapes); 10 bits keep the table at 4 KB.
constexpr uint32_t kPairBits = 10;
struct PairCode {
  uint32_t entry[1u << kPairBits];
};

template <class L, class Symbols>
COMPCOLL_HD inline void build_pair_code(const PrefixCode& pc, PairCode& pairs, uint32_t part = 0,
                                        uint32_t parts = 1) {
  static_assert(kPairBits <= format::kMaxCodeBits, "a pair's bits index the decode table");
  for (uint32_t w = part; w < (1u << kPairBits); w += parts) {
    uint32_t entry = 0;
    // The bits above w's are unknown: a code counts only if it ends within them.
    const uint32_t a = pc.lut[w], l1 = a & 0xFu;
    const uint32_t at = l1 + L::kExtraBits;  // where the second code starts
    if (l1 != 0 && l1 <= kPairBits && !Symbols::is_escape(a >> 4)) {
      entry = l1 | (a >> 4) << 4;
      if (at < kPairBits) {
        const uint32_t b = pc.lut[w >> at], l2 = b & 0xFu;
        if (l2 != 0 && at + l2 <= kPairBits && !Symbols::is_escape(b >> 4))
          entry |= l2 << 12 | (b >> 4) << 16 | 1u << 31;
      }
    }
    pairs.entry[w] = entry;
  }
}

// take_lane with two elements a lookup where pairs (build_pair_code of pc) has them and both
// stand for exponents (not escapes, not bad ones); otherwise element by element, as take_lane.
// The same values, reader position, status and *bad_element as take_lane for any stream.
template <class L, class Reader, class Put = StoreElement>
COMPCOLL_HD inline LaneStatus take_lane_pairs(Reader& r, const uint8_t* raw_section, uint32_t n,
                                              uint32_t lane, const SymbolExponents& se,
                                              const PrefixCode& pc, const PairCode& pairs,
                                              typename L::Bits* out, uint32_t* bad_element,
                                              Put put = {}) {
  constexpr uint32_t kExtraMask = (1u << L::kExtraBits) - 1;
  // Each step decodes both ways, the pair and the single element, and keeps one: the lanes of
  // a warp then take the same instructions at every step (a branch between the two ways would
  // run both, one after the other, wherever any lane of 32 cannot take a pair).
  for (uint32_t k = lane; k < n;) {
    const uint32_t bits = r.peek32();
    const uint32_t entry = pairs.entry[bits & ((1u << kPairBits) - 1)];
    const uint32_t l1 = entry & 0xFu, l2 = (entry >> 12) & 0xFu;
    const int e1 = se.e[(entry >> 4) & 0xFFu], e2 = se.e[(entry >> 16) & 0xFFu];
    const bool two = (entry >> 31) != 0 && e1 >= 0 && e2 >= 0 && k + format::kLanes < n;
    // The single element: its code from the pair table where it ends within kPairBits bits,
    // else from pc.lut (a longer code, or none).
    uint32_t l = l1;
    int e = e1;
    if (l1 == 0) {
      const uint16_t le = pc.lut[bits & ((1u << format::kMaxCodeBits) - 1)];
      l = le & 0xFu;
      e = se.e[le >> 4];
    }
    LaneStatus st = LaneStatus::Ok;
    uint32_t len;
    const uint32_t key = finish_key_bits<L>(bits, l, e, &len, &st);  // Ok wherever `two`
    const uint32_t at = l1 + L::kExtraBits;  // where a pair's second code starts
    const uint32_t x1 = L::kExtraBits ? (bits >> l1) & kExtraMask : 0u;
    const uint32_t x2 = L::kExtraBits ? (bits >> (at + l2)) & kExtraMask : 0u;
    put(out, k, join_key<L>(two ? L::make_key(static_cast<uint32_t>(e1), x1) : key, raw_section, k));
    if (two)
      put(out, k + format::kLanes,
          join_key<L>(L::make_key(static_cast<uint32_t>(e2), x2), raw_section, k + format::kLanes));
    r.skip(two ? at + l2 + L::kExtraBits : len);
    if (st != LaneStatus::Ok) {
      *bad_element = k;
      return st;
    }
    k += two ? 2 * format::kLanes : format::kLanes;
  }
  return LaneStatus::Ok;
}

// Whether every symbol that a pair table of pc (build_pair_code) can hold stands for an
// exponent under se: the symbols of pc's nsyms with codes of at most kPairBits bits, but the
// escapes; take_lane_pairs_in_range's condition (longer codes take its general path, which
// checks). gauss-exp: codes of at most 10 bits stand for d = -8 .. 5 and zero, so that a
// reference at least 8 above the exponent range's bottom and 5 below its top holds, as nearly
// every chunk's does. In parts (the symbols part, part + parts, ...): the chunk's answer is
// every part's.
template <class Symbols>
COMPCOLL_HD inline bool pairs_in_range(const SymbolExponents& se, const PrefixCode& pc, uint32_t nsyms,
                                       uint32_t part = 0, uint32_t parts = 1) {
  bool ok = true;
  for (uint32_t s = part; s < nsyms; s += parts)
    ok = ok && (Symbols::is_escape(s) || pc.length[s] == 0 || pc.length[s] > kPairBits || se.e[s] >= 0);
  return ok;
}

// take_lane_pairs for a chunk whose pair table's symbols all stand for exponents
// (pairs_in_range): a pair table entry then decodes its one or two elements with no check, so
// that a lane's serial chain from one step to the next is the table lookup and the shift, and
// only an entry of 0 (a code longer than kPairBits, an escape, a bad code) takes the general
// path, element by element. The same values, reader position, status and *bad_element as
// take_lane.
template <class L, class Reader, class Put = StoreElement>
COMPCOLL_HD inline LaneStatus take_lane_pairs_in_range(Reader& r, const uint8_t* raw_section, uint32_t n,
                                                       uint32_t lane, const SymbolExponents& se,
                                                       const PrefixCode& pc, const PairCode& pairs,
                                                       typename L::Bits* out, uint32_t* bad_element,
                                                       Put put = {}) {
  constexpr uint32_t kExtraMask = (1u << L::kExtraBits) - 1;
  // A step moves the reader on and reads the next step's bits before it puts its own elements,
  // so that the next lookup's loads are in flight while this step's values are composed (the
  // GPU issues a warp's instructions in order). Peeking does not move the reader.
  uint32_t bits = r.peek32();
  for (uint32_t k = lane; k < n;) {
    const uint32_t entry = pairs.entry[bits & ((1u << kPairBits) - 1)];
    if (entry == 0) {
      LaneStatus st = LaneStatus::Ok;
      uint32_t len;
      const uint32_t key = decode_key_bits<L>(bits, se, pc, &len, &st);
      if (st != LaneStatus::Ok) {
        *bad_element = k;
        return st;
      }
      put(out, k, join_key<L>(key, raw_section, k));
      r.skip(len);
      bits = r.peek32();
      k += format::kLanes;
      continue;
    }
    const uint32_t l1 = entry & 0xFu, l2 = (entry >> 12) & 0xFu;
    const uint32_t at = l1 + L::kExtraBits;  // where a pair's second code starts
    const bool two = (entry >> 31) != 0 && k + format::kLanes < n;
    r.skip(two ? at + l2 + L::kExtraBits : at);
    const uint32_t next = r.peek32();
    const uint32_t x1 = L::kExtraBits ? (bits >> l1) & kExtraMask : 0u;
    const uint32_t e1 = static_cast<uint32_t>(se.e[(entry >> 4) & 0xFFu]);
    put(out, k, join_key<L>(L::make_key(e1, x1), raw_section, k));
    if (two) {
      const uint32_t x2 = L::kExtraBits ? (bits >> (at + l2)) & kExtraMask : 0u;
      const uint32_t e2 = static_cast<uint32_t>(se.e[(entry >> 16) & 0xFFu]);
      put(out, k + format::kLanes, join_key<L>(L::make_key(e2, x2), raw_section, k + format::kLanes));
    }
    bits = next;
    k += two ? 2 * format::kLanes : format::kLanes;
  }
  return LaneStatus::Ok;
}

// ---- three exponents a lookup (bf16) -----------------------------------------------------
// For each value of the next kPairBits stream bits: the codes of up to three of a lane's next
// elements that lie within those bits, none an escape, each given by a byte (Symbols'
// triple_byte): byte i (i < 3) element i's, bits 24..27 the codes' total length, bits 30..31
// their count (an entry of 0: no such code starts the bits). The table has the pair table's
// size, 4 KB.
//  - gauss-exp: byte 0 for zero, else 0x80 | (d + 8) for d in [-8, 7] relative to the chunk's
//    reference (a code of another d ends the entry). Its codes of at most kPairBits bits stand
//    for d = -8 .. 5 and zero, 2.8 of them a lookup on average (Gaussian bf16, against the
//    pair table's 2.0; tools/decode_lookups.py); the block builds the table once.
//  - entropy-exp: the byte is the exponent (the symbol); a warp builds the table per chunk
//    from the chunk's code.
constexpr uint32_t kTripleLengthShift = 24, kTripleCountShift = 30;
struct TripleCode {
  uint32_t entry[1u << kPairBits];
};

// In parts, as build_key_code. Symbols: GaussSymbols or DirectSymbols (bytes as above).
template <class Symbols>
COMPCOLL_HD inline void build_triple_code(const PrefixCode& pc, TripleCode& triples, uint32_t part = 0,
                                          uint32_t parts = 1) {
  for (uint32_t w = part; w < (1u << kPairBits); w += parts) {
    uint32_t entry = 0, at = 0, count = 0;
    while (count < 3) {
      // The bits above w's are unknown: a code counts only if it ends within them.
      const uint32_t a = pc.lut[w >> at], l = a & 0xFu, sym = a >> 4;
      const int byte = Symbols::triple_byte(sym);
      if (l == 0 || at + l > kPairBits || byte < 0) break;
      entry |= static_cast<uint32_t>(byte) << (8 * count);
      at += l;
      ++count;
    }
    triples.entry[w] = count == 0 ? 0u : entry | at << kTripleLengthShift | count << kTripleCountShift;
  }
}

// The exponents of a triple table entry's elements, byte i element i's (bytes past its count
// unspecified).
// gauss-exp, under ref_bytes = (ref - 8) in each byte: d + 8 + ref - 8 per byte, and zero
// where the entry says zero. No byte carries into the next for a chunk whose reference puts
// every d of the table in range (pairs_in_range: ref + d <= 254) and is at least 8.
struct GaussTripleExponents {
  uint32_t ref_bytes;
  COMPCOLL_HD uint32_t operator()(uint32_t entry) const {
    return ((entry & 0x000F0F0Fu) + ref_bytes) & (((entry >> 7) & 0x00010101u) * 0xFFu);
  }
};
// ref_bytes of a reference (>= 8).
COMPCOLL_HD inline uint32_t triple_ref_bytes(uint32_t ref) { return (ref - 8) * 0x01010101u; }
// entropy-exp: the entry's bytes.
struct DirectTripleExponents {
  COMPCOLL_HD uint32_t operator()(uint32_t entry) const { return entry; }
};

// The exponents of lane `lane`'s elements j (the element 32 j + lane of a window) from *j up to
// `stop`, into exps[32 j + lane], one byte each: three a lookup where `triples`
// (build_triple_code) has them, which may take the lane up to two elements past stop
// (exps[32 stop + lane] and on: the next window's first elements; exps holds 32 (stop + 2)
// bytes, and those of this lane past *j up to there are its to write), but never past `last` (the
// lane's elements left in the chunk, counted as j is); element by element where the table has
// no entry or the entry would pass last (decode_key_bits: a longer code, an escape, a bad
// code). exponents: GaussTripleExponents, for a chunk whose reference puts every symbol of the
// table in range (pairs_in_range, and ref >= 8), or DirectTripleExponents. *j is where the
// lane stands after it; the same exponents, reader position and status as take_lane, and on a
// bad code *bad_element is its element's index in the window.
template <class L, class Reader, class Exponents>
COMPCOLL_HD inline LaneStatus take_lane_exponents(Reader& r, uint32_t* j, uint32_t stop, uint32_t last,
                                                  uint32_t lane, Exponents exponents, const SymbolExponents& se,
                                                  const PrefixCode& pc, const TripleCode& triples,
                                                  uint8_t* exps, uint32_t* bad_element) {
  static_assert(L::kExtraBits == 0 && L::kExpBits == 8, "an exponent a byte, no extra bits");
  uint32_t at = *j;
  uint8_t* p = exps + format::kLanes * at + lane;  // element at's byte
  uint32_t bits = r.peek32();
  while (at < stop) {
    const uint32_t entry = triples.entry[bits & ((1u << kPairBits) - 1)];
    const uint32_t count = entry >> kTripleCountShift;
    if (count == 0 || at + count > last) {
      LaneStatus st = LaneStatus::Ok;
      uint32_t len;
      const uint32_t key = decode_key_bits<L>(bits, se, pc, &len, &st);
      if (st != LaneStatus::Ok) {
        *bad_element = format::kLanes * at + lane;
        *j = at;
        return st;
      }
      p[0] = static_cast<uint8_t>(L::key_exponent(key));
      r.skip(len);
      bits = r.peek32();
      ++at;
      p += format::kLanes;
      continue;
    }
    r.skip((entry >> kTripleLengthShift) & 0xFu);
    const uint32_t next = r.peek32();  // in flight while this step's bytes are stored
    const uint32_t e = exponents(entry);
    // All three bytes, with no test: a byte past the entry's count lands on an element of this
    // lane that a later step writes, or past the lane's last element (exps must hold the two
    // rows past stop).
    p[0] = static_cast<uint8_t>(e);
    p[format::kLanes] = static_cast<uint8_t>(e >> 8);
    p[2 * format::kLanes] = static_cast<uint8_t>(e >> 16);
    bits = next;
    at += count;
    p += format::kLanes * count;
  }
  *j = at;
  return LaneStatus::Ok;
}

// Four bf16 values from their raw-section bytes (raw4: element i's in byte i) and exponents
// (exps4, likewise), as the two little-endian words of elements 0, 1 and 2, 3 (Bf16Layout::join
// of each).
COMPCOLL_HD inline void join_bf16x4(uint32_t raw4, uint32_t exps4, uint32_t* first, uint32_t* second) {
  const uint32_t hi = (raw4 & 0x80808080u) | ((exps4 >> 1) & 0x7F7F7F7Fu);  // each value's high byte
  const uint32_t lo = (raw4 & 0x7F7F7F7Fu) | ((exps4 << 7) & 0x80808080u);  // and its low byte
#if defined(__CUDA_ARCH__)
  *first = __byte_perm(lo, hi, 0x5140);
  *second = __byte_perm(lo, hi, 0x7362);
#else
  *first = (lo & 0xFFu) | (hi & 0xFFu) << 8 | (lo & 0xFF00u) << 8 | (hi & 0xFF00u) << 16;
  *second = (lo >> 16 & 0xFFu) | (hi >> 16 & 0xFFu) << 8 | (lo >> 24) << 16 | (hi >> 24) << 24;
#endif
}

// Decodes lane `lane`: exponents and extra bits from the lane's words, the rest from the raw
// section. Stops at the first bad code and reports the element index in *bad_element.
template <class L>
COMPCOLL_HD inline LaneStatus decode_lane(const uint8_t* words, uint32_t nwords,
                                          const uint8_t* raw_section, uint32_t n, uint32_t lane,
                                          const SymbolExponents& se, const PrefixCode& pc,
                                          typename L::Bits* out, uint32_t* bad_element) {
  BitReader r(words, nwords);
  const LaneStatus st = take_lane<L>(r, raw_section, n, lane, se, pc, out, bad_element);
  if (st != LaneStatus::Ok) return st;
  *bad_element = n;
  return lane_end_status(r);
}

// ---- chunk layout ------------------------------------------------------------------------
// Byte sizes of the parts of an exponent-coded chunk of n elements (docs/FORMAT.md).
template <class L>
struct ChunkLayout {
  COMPCOLL_HD static constexpr uint32_t table_bytes_entropy(uint32_t nsyms) {
    return format::align_up(2 * nsyms, 4);
  }
  COMPCOLL_HD static uint32_t raw_bytes(uint32_t n) {
    return format::align_up(n * L::kRawBytes, 4);
  }
  COMPCOLL_HD static uint32_t stored_bytes(uint32_t n) {
    return format::kChunkHeaderBytes + format::align_up(n * sizeof(typename L::Bits), 4);
  }
  COMPCOLL_HD static uint32_t lane_elements(uint32_t n, uint32_t lane) {
    return n > lane ? (n - lane + format::kLanes - 1) / format::kLanes : 0;
  }
  // Longest lane stream: every element an escape with the longest code.
  COMPCOLL_HD static uint32_t max_lane_words(uint32_t n) {
    const uint32_t bits = format::kMaxCodeBits + L::kExpBits + L::kExtraBits;
    return (lane_elements(n, 0) * bits + 31) / 32;
  }
  // Offset of the lane table, given the table bytes before it (0 for gauss-exp).
  COMPCOLL_HD static uint32_t lane_table_at(uint32_t table_bytes) {
    return format::kChunkHeaderBytes + table_bytes;
  }
  COMPCOLL_HD static uint32_t raw_at(uint32_t table_bytes) {
    return lane_table_at(table_bytes) + format::kLaneTableBytes;
  }
  COMPCOLL_HD static uint32_t streams_at(uint32_t table_bytes, uint32_t n) {
    return raw_at(table_bytes) + raw_bytes(n);
  }
  COMPCOLL_HD static uint32_t max_coded_bytes(uint32_t table_bytes, uint32_t n) {
    return streams_at(table_bytes, n) + format::kLanes * 4 * max_lane_words(n);
  }
};

}  // namespace compcoll::expbits
