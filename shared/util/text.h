// shared/util/text.h — text from input files, made safe to print: a UTF-8 check for what must
// be text (YAML), and the one-line form every error message takes before it reaches a
// terminal or a results file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace compcoll {

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). Where it is not and `bad_at` is given, the offset of the first byte that is not.
bool valid_utf8(std::string_view s, size_t* bad_at = nullptr);

// `s` on one line and printable: ASCII control characters (newlines and tabs among them)
// become spaces; DEL, the C1 controls (U+0080-U+009F, which some terminals obey as escapes)
// and every byte that is not part of well-formed UTF-8 become "\xNN", one per byte; all other
// text, UTF-8 letters included, is kept as it is.
std::string printable(std::string_view s);

}  // namespace compcoll
