// shared/util/text.cpp — see text.h.
#include "util/text.h"

#include <cstdint>
#include <cstdio>

namespace compcoll {
namespace {

// The length of the well-formed UTF-8 sequence at s[i] (1-4) and its code point, or 0 where
// the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = 0;
  uint32_t v = 0, min = 0;
  if ((c & 0xe0) == 0xc0) n = 2, v = c & 0x1f, min = 0x80;
  else if ((c & 0xf0) == 0xe0) n = 3, v = c & 0x0f, min = 0x800;
  else if ((c & 0xf8) == 0xf0) n = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

}  // namespace

bool valid_utf8(std::string_view s, size_t* bad_at) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_sequence(s, i, &cp);
    if (n == 0) {
      if (bad_at) *bad_at = i;
      return false;
    }
    i += n;
  }
  return true;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const auto escape = [&](uint8_t byte) {
    char buf[5];
    std::snprintf(buf, sizeof buf, "\\x%02x", byte);
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_sequence(s, i, &cp);
    if (n == 0) {
      escape(static_cast<uint8_t>(s[i++]));
    } else if (cp < 0x20) {
      out += ' ';
      ++i;
    } else if (cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
      for (size_t k = 0; k < n; ++k) escape(static_cast<uint8_t>(s[i + k]));
      i += n;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace compcoll
