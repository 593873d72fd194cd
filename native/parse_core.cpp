// eventdedup's compiled parse core: the lines of an input chunk in, the arrays the job uses out.
//
// It vouches for a line only when the line is exactly what orjson.dumps writes of its own parse
// (compact JSON, orjson's escapes and number spellings, no repeated key), within the shapes it
// knows: a key field that is a string without escapes or an integer, a time field that is ISO-8601
// close to the strict shape or epoch digits. For such a line, everything parse_event derives from
// the parsed object can be derived from the bytes: the canonical payload (keys sorted at every
// depth) is a reordering of the line's own spans. Any other line is left to the Python parsers,
// which give its row or its quarantine reason. tests/unit/parse/test_native_core.py and fuzz/ hold
// every vouched line equal to parse_event.
//
// Built by `make venv` (eventdedup_dev.native); without it the pure-Python path runs.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace {

// ---------------------------------------------------------------------------------------------
// BLAKE2b (RFC 7693), unkeyed, any digest size up to 64 bytes: Python's hashlib.blake2b.
struct Blake2b {
    uint64_t h[8];
    uint64_t t[2];
    uint8_t b[128];
    size_t c;
    size_t outlen;
};

constexpr uint64_t kBlakeIv[8] = {
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL, 0xA54FF53A5F1D36F1ULL,
    0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL, 0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL};

constexpr uint8_t kSigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

inline uint64_t rotr64(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

inline uint64_t load64le(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;  // x86-64 and aarch64 Linux are little-endian; the build refuses others
}

void blake2b_compress(Blake2b& ctx, bool last) {
    uint64_t v[16], m[16];
    for (int i = 0; i < 8; ++i) {
        v[i] = ctx.h[i];
        v[i + 8] = kBlakeIv[i];
    }
    v[12] ^= ctx.t[0];
    v[13] ^= ctx.t[1];
    if (last) v[14] = ~v[14];
    for (int i = 0; i < 16; ++i) m[i] = load64le(ctx.b + 8 * i);
    auto g = [&](int a, int b, int c, int d, uint64_t x, uint64_t y) {
        v[a] = v[a] + v[b] + x;
        v[d] = rotr64(v[d] ^ v[a], 32);
        v[c] = v[c] + v[d];
        v[b] = rotr64(v[b] ^ v[c], 24);
        v[a] = v[a] + v[b] + y;
        v[d] = rotr64(v[d] ^ v[a], 16);
        v[c] = v[c] + v[d];
        v[b] = rotr64(v[b] ^ v[c], 63);
    };
    for (int r = 0; r < 12; ++r) {
        const uint8_t* s = kSigma[r];
        g(0, 4, 8, 12, m[s[0]], m[s[1]]);
        g(1, 5, 9, 13, m[s[2]], m[s[3]]);
        g(2, 6, 10, 14, m[s[4]], m[s[5]]);
        g(3, 7, 11, 15, m[s[6]], m[s[7]]);
        g(0, 5, 10, 15, m[s[8]], m[s[9]]);
        g(1, 6, 11, 12, m[s[10]], m[s[11]]);
        g(2, 7, 8, 13, m[s[12]], m[s[13]]);
        g(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; ++i) ctx.h[i] ^= v[i] ^ v[i + 8];
}

// The first `outlen` bytes of BLAKE2b-(outlen*8) of data (outlen <= 64).
void blake2b(const uint8_t* data, size_t size, size_t outlen, uint8_t* out) {
    Blake2b ctx;
    for (int i = 0; i < 8; ++i) ctx.h[i] = kBlakeIv[i];
    ctx.h[0] ^= 0x01010000ULL ^ outlen;
    ctx.t[0] = ctx.t[1] = 0;
    ctx.c = 0;
    ctx.outlen = outlen;
    // Every full block but the last is compressed as it fills; the last (possibly partial, or
    // empty for empty input) is compressed with the final flag.
    while (size > 128) {
        std::memcpy(ctx.b, data, 128);
        ctx.t[0] += 128;
        if (ctx.t[0] < 128) ++ctx.t[1];
        blake2b_compress(ctx, false);
        data += 128;
        size -= 128;
    }
    std::memset(ctx.b, 0, 128);
    std::memcpy(ctx.b, data, size);
    ctx.t[0] += size;
    if (ctx.t[0] < size) ++ctx.t[1];
    blake2b_compress(ctx, true);
    uint8_t full[64];
    std::memcpy(full, ctx.h, 64);
    std::memcpy(out, full, outlen);
}

// ---------------------------------------------------------------------------------------------
// The canonical-form check and the tree of the line's values.

enum class Kind : uint8_t { Object, Array, String, Integer, Float, Literal };

struct Node {
    uint32_t start, end;          // the value's bytes in the line
    uint32_t key_start, key_end;  // a member's key, inside its quotes (objects' children only)
    int32_t first_child, next_sibling;
    // An object whose members are out of key order: its members sorted, at order[order_at...]
    // (order_at < 0 for one in order).
    int32_t order_at;
    uint32_t members;
    Kind kind;
    bool escaped;  // a string holding a backslash escape
    bool sorted;   // an object or array whose canonical form is its own bytes
};

constexpr int kMaxDepth = 200;  // deeper lines go the reference way (it refuses past 254)

struct Scanner {
    const uint8_t* s;
    size_t n;
    size_t i;
    std::vector<Node>* nodes;
    std::vector<int32_t>* order;  // the sorted members of objects out of order (Node::order_at)

    bool at(char c) const { return i < n && s[i] == static_cast<uint8_t>(c); }

    // One JSON string in orjson's spelling: raw UTF-8 (strict: no surrogates, no overlong forms)
    // except '"', '\\' and controls, which are escaped as orjson escapes them.
    bool string(bool& escaped) {
        ++i;  // the opening quote
        escaped = false;
        while (i < n) {
            skip_plain();
            if (i >= n) return false;
            uint8_t c = s[i];
            if (c == '"') {
                ++i;
                return true;
            }
            if (c == '\\') {
                escaped = true;
                if (i + 1 >= n) return false;
                uint8_t e = s[i + 1];
                if (e == '"' || e == '\\' || e == 'b' || e == 't' || e == 'n' || e == 'f' || e == 'r') {
                    i += 2;
                    continue;
                }
                // \u00XX (lower-case hex) only for the controls without a short escape.
                if (e != 'u' || i + 6 > n || s[i + 2] != '0' || s[i + 3] != '0') return false;
                int hi = s[i + 4], lo = s[i + 5];
                if (hi != '0' && hi != '1') return false;
                int low;
                if (lo >= '0' && lo <= '9') low = lo - '0';
                else if (lo >= 'a' && lo <= 'f') low = lo - 'a' + 10;
                else return false;
                int code = (hi - '0') * 16 + low;
                if (code == 0x08 || code == 0x09 || code == 0x0a || code == 0x0c || code == 0x0d) return false;
                i += 6;
                continue;
            }
            if (c < 0x20) return false;
            if (c < 0x80) {
                ++i;
                continue;
            }
            if (!utf8_sequence()) return false;
        }
        return false;
    }

    // Past the bytes a string holds as they are (printable ASCII but '"' and '\\'), 16 at a time.
    void skip_plain() {
#ifdef __SSE2__
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        while (i + 16 <= n) {
            __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
            // Signed: below 0x20 catches the controls and every byte from 0x80 (non-ASCII).
            __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                           _mm_cmplt_epi8(v, space));
            int mask = _mm_movemask_epi8(special);
            if (mask != 0) {
                i += static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
                return;
            }
            i += 16;
        }
#endif
        while (i < n && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\') ++i;
    }

    bool cont(size_t k, uint8_t low = 0x80, uint8_t high = 0xBF) const {
        return i + k < n && s[i + k] >= low && s[i + k] <= high;
    }

    bool utf8_sequence() {
        uint8_t c = s[i];
        if (c >= 0xC2 && c <= 0xDF) {
            if (!cont(1)) return false;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            uint8_t low = c == 0xE0 ? 0xA0 : 0x80, high = c == 0xED ? 0x9F : 0xBF;
            if (!cont(1, low, high) || !cont(2)) return false;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            uint8_t low = c == 0xF0 ? 0x90 : 0x80, high = c == 0xF4 ? 0x8F : 0xBF;
            if (!cont(1, low, high) || !cont(2) || !cont(3)) return false;
            i += 4;
        } else {
            return false;
        }
        return true;
    }

    // A number as orjson writes it: an integer in its range (i64 to u64) without "-0", or a
    // float in its fixed notation (1e-5 <= |x| < 1e16, or zero) that is the shortest spelling
    // that reads back as the same double. Exponents, and floats orjson writes with one, are
    // left to the reference.
    bool number(Kind& kind) {
        size_t start = i;
        bool negative = at('-');
        if (negative) ++i;
        if (i >= n || s[i] < '0' || s[i] > '9') return false;
        if (s[i] == '0') {
            ++i;
            if (i < n && s[i] >= '0' && s[i] <= '9') return false;
        } else {
            while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
        }
        size_t int_end = i;
        if (at('e') || at('E')) return false;
        if (!at('.')) {
            kind = Kind::Integer;
            size_t digits = int_end - start - (negative ? 1 : 0);
            if (digits > 20) return false;
            unsigned __int128 value = 0;
            for (size_t k = start + (negative ? 1 : 0); k < int_end; ++k) value = value * 10 + (s[k] - '0');
            if (negative) return value != 0 && value <= (static_cast<unsigned __int128>(1) << 63);
            return value <= static_cast<unsigned __int128>(UINT64_MAX);
        }
        ++i;
        if (i >= n || s[i] < '0' || s[i] > '9') return false;
        while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
        if (at('e') || at('E')) return false;
        kind = Kind::Float;
        const char* first = reinterpret_cast<const char*>(s + start);
        const char* last = reinterpret_cast<const char*>(s + i);
        double value;
        auto parsed = std::from_chars(first, last, value);
        if (parsed.ec != std::errc() || parsed.ptr != last || !std::isfinite(value)) return false;
        double magnitude = std::fabs(value);
        if (magnitude != 0.0 && (magnitude < 1e-5 || magnitude >= 1e16)) return false;
        char shortest[400];
        auto written = std::to_chars(shortest, shortest + sizeof(shortest), value, std::chars_format::fixed);
        if (written.ec != std::errc()) return false;
        std::string_view spelt(shortest, written.ptr - shortest);
        std::string_view literal(first, last - first);
        if (spelt.find('.') == std::string_view::npos) {
            return literal.size() == spelt.size() + 2 && literal.substr(0, spelt.size()) == spelt &&
                   literal.substr(spelt.size()) == ".0";
        }
        return literal == spelt;
    }

    bool literal(const char* word, size_t size) {
        if (i + size > n || std::memcmp(s + i, word, size) != 0) return false;
        i += size;
        return true;
    }

    // Parse one value at i into a new node; its index, or -1 when the line is not canonical.
    int32_t value(int depth) {
        if (i >= n || depth > kMaxDepth) return -1;
        int32_t index = static_cast<int32_t>(nodes->size());
        nodes->push_back(Node{static_cast<uint32_t>(i), 0, 0, 0, -1, -1, -1, 0, Kind::Literal, false, true});
        uint8_t c = s[i];
        bool ok;
        if (c == '{') {
            ok = object(index, depth);
        } else if (c == '[') {
            ok = array(index, depth);
        } else if (c == '"') {
            bool escaped;
            ok = string(escaped);
            (*nodes)[index].kind = Kind::String;
            (*nodes)[index].escaped = escaped;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            Kind kind = Kind::Integer;
            ok = number(kind);
            (*nodes)[index].kind = kind;
        } else if (c == 't') {
            ok = literal("true", 4);
        } else if (c == 'f') {
            ok = literal("false", 5);
        } else if (c == 'n') {
            ok = literal("null", 4);
        } else {
            ok = false;
        }
        if (!ok) return -1;
        (*nodes)[index].end = static_cast<uint32_t>(i);
        return index;
    }

    bool array(int32_t index, int depth) {
        (*nodes)[index].kind = Kind::Array;
        ++i;
        if (at(']')) {
            ++i;
            return true;
        }
        int32_t previous = -1;
        bool sorted = true;
        while (true) {
            int32_t child = value(depth + 1);
            if (child < 0) return false;
            sorted = sorted && (*nodes)[child].sorted;
            if (previous < 0) (*nodes)[index].first_child = child;
            else (*nodes)[previous].next_sibling = child;
            previous = child;
            if (at(']')) {
                ++i;
                (*nodes)[index].sorted = sorted;
                return true;
            }
            if (!at(',')) return false;
            ++i;
        }
    }

    bool object(int32_t index, int depth) {
        (*nodes)[index].kind = Kind::Object;
        ++i;
        if (at('}')) {
            ++i;
            return true;
        }
        int32_t previous = -1;
        bool sorted = true, in_order = true;
        uint32_t members = 0;
        while (true) {
            ++members;
            if (!at('"')) return false;
            uint32_t key_start = static_cast<uint32_t>(i + 1);
            bool escaped;
            if (!string(escaped) || escaped) return false;  // escaped keys sort by their text: the reference's
            uint32_t key_end = static_cast<uint32_t>(i - 1);
            if (!at(':')) return false;
            ++i;
            int32_t child = value(depth + 1);
            if (child < 0) return false;
            Node& node = (*nodes)[child];
            node.key_start = key_start;
            node.key_end = key_end;
            sorted = sorted && node.sorted;
            if (previous < 0) {
                (*nodes)[index].first_child = child;
            } else {
                const Node& before = (*nodes)[previous];
                if (compare_keys(before, node) >= 0) in_order = false;  // out of order, or repeated
                (*nodes)[previous].next_sibling = child;
            }
            previous = child;
            if (at('}')) {
                ++i;
                (*nodes)[index].sorted = sorted && in_order;
                (*nodes)[index].members = members;
                return in_order || sort_members(index);
            }
            if (!at(',')) return false;
            ++i;
        }
    }

    // The members of an object out of order, sorted into `order`; false when two share a key (a
    // repeated key: the reference quarantines the line, whatever part the fingerprint covers).
    bool sort_members(int32_t index) {
        size_t base = order->size();
        for (int32_t child = (*nodes)[index].first_child; child >= 0; child = (*nodes)[child].next_sibling) {
            order->push_back(child);
        }
        auto begin = order->begin() + static_cast<std::ptrdiff_t>(base);
        std::sort(begin, order->end(),
                  [&](int32_t a, int32_t b) { return compare_keys((*nodes)[a], (*nodes)[b]) < 0; });
        for (auto it = begin + 1; it < order->end(); ++it) {
            if (compare_keys((*nodes)[*(it - 1)], (*nodes)[*it]) == 0) return false;
        }
        (*nodes)[index].order_at = static_cast<int32_t>(base);
        return true;
    }

    // orjson's OPT_SORT_KEYS order: the keys' UTF-8 bytes (code point order).
    int compare_keys(const Node& a, const Node& b) const {
        size_t la = a.key_end - a.key_start, lb = b.key_end - b.key_start;
        int c = std::memcmp(s + a.key_start, s + b.key_start, std::min(la, lb));
        if (c != 0) return c;
        return la < lb ? -1 : (la > lb ? 1 : 0);
    }
};

// ---------------------------------------------------------------------------------------------
// The canonical payload: keys sorted at every depth, written from the line's spans.

struct Canonical {
    const uint8_t* s;
    const std::vector<Node>& nodes;
    const std::vector<int32_t>& order;
    std::string& out;

    void value(int32_t index) {
        const Node& node = nodes[index];
        if (node.sorted || (node.kind != Kind::Object && node.kind != Kind::Array)) {
            out.append(reinterpret_cast<const char*>(s + node.start), node.end - node.start);
        } else if (node.kind == Kind::Array) {
            out.push_back('[');
            for (int32_t child = node.first_child; child >= 0; child = nodes[child].next_sibling) {
                if (child != node.first_child) out.push_back(',');
                value(child);
            }
            out.push_back(']');
        } else {
            object(index, [](const Node&) { return true; });
        }
    }

    // An object's members in key order (the scan sorted those out of order and refused repeated
    // keys); `keep(member)` filters the top level's for the fingerprint's fields.
    template <typename Keep>
    void object(int32_t index, const Keep& keep) {
        const Node& node = nodes[index];
        out.push_back('{');
        bool first = true;
        auto write = [&](int32_t child) {
            const Node& member = nodes[child];
            if (!keep(member)) return;
            if (!first) out.push_back(',');
            first = false;
            // The member's key with its quotes, the colon, then its value.
            out.append(reinterpret_cast<const char*>(s + member.key_start - 1), member.key_end - member.key_start + 3);
            value(child);
        };
        if (node.order_at >= 0) {
            for (uint32_t k = 0; k < node.members; ++k) write(order[static_cast<size_t>(node.order_at) + k]);
        } else {
            for (int32_t child = node.first_child; child >= 0; child = nodes[child].next_sibling) write(child);
        }
        out.push_back('}');
    }
};

// ---------------------------------------------------------------------------------------------
// The batch's rules, as ParseRules holds them.

enum Algorithm : int { kBlake2b64 = 0, kXxh3_64 = 1 };

struct Rules {
    std::vector<std::string> key_fields;
    std::string time_field;
    int64_t min_us = 0, max_us = 0;
    int64_t max_line_bytes = 0;
    std::vector<std::string> fp_fields, fp_exclude;
    bool trim = false, lower = false;
    int algorithm = kBlake2b64;
};

bool key_is(const uint8_t* s, const Node& node, const std::string& name) {
    return node.key_end - node.key_start == name.size() &&
           std::memcmp(s + node.key_start, name.data(), name.size()) == 0;
}

int32_t member(const uint8_t* s, const std::vector<Node>& nodes, const std::string& name) {
    for (int32_t child = nodes[0].first_child; child >= 0; child = nodes[child].next_sibling) {
        if (key_is(s, nodes[child], name)) return child;
    }
    return -1;
}

// normalize_event_id's text of a key field's value, appended to `text`; false for what it leaves
// to the reference (a string with escapes, non-ASCII under normalisation, one that may be blank;
// any value neither a string nor an integer).
bool id_text(const uint8_t* s, const Node& node, const Rules& rules, std::string& text) {
    if (node.kind == Kind::Integer) {
        text.append(reinterpret_cast<const char*>(s + node.start), node.end - node.start);
        return true;
    }
    if (node.kind != Kind::String || node.escaped) return false;
    const uint8_t* first = s + node.start + 1;
    const uint8_t* last = s + node.end - 1;
    bool visible = false;  // a byte str.strip() certainly keeps: printable ASCII but space
    bool ascii = true;
    for (const uint8_t* p = first; p < last; ++p) {
        visible = visible || (*p > 0x20 && *p < 0x80);
        ascii = ascii && *p < 0x80;
    }
    if (!visible) return false;
    if (rules.trim || rules.lower) {
        if (!ascii) return false;
        if (rules.trim) {  // in canonical JSON the only raw ASCII space str.strip() removes is ' '
            while (first < last && *first == ' ') ++first;
            while (last > first && *(last - 1) == ' ') --last;
        }
    }
    size_t at = text.size();
    text.append(reinterpret_cast<const char*>(first), last - first);
    if (rules.lower) {
        for (size_t k = at; k < text.size(); ++k) {
            if (text[k] >= 'A' && text[k] <= 'Z') text[k] = static_cast<char>(text[k] - 'A' + 'a');
        }
    }
    return true;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// keys.key_digest: a one-field key that is a canonical (lower-case, hyphenated) UUID is its own 16
// bytes; any other key text is its 16-byte BLAKE2b.
void key_digest(const std::string& text, bool one_field, uint8_t* out) {
    if (one_field && text.size() == 36 && text[8] == '-' && text[13] == '-' && text[18] == '-' && text[23] == '-') {
        static const int kPairs[16] = {0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34};
        uint8_t bytes[16];
        bool uuid = true;
        for (int k = 0; k < 16 && uuid; ++k) {
            int high = hex_value(text[kPairs[k]]), low = hex_value(text[kPairs[k] + 1]);
            uuid = high >= 0 && low >= 0;
            bytes[k] = static_cast<uint8_t>(high << 4 | low);
        }
        if (uuid) {
            std::memcpy(out, bytes, 16);
            return;
        }
    }
    blake2b(reinterpret_cast<const uint8_t*>(text.data()), text.size(), 16, out);
}

constexpr int64_t kEpochMillisThreshold = 100000000000LL;  // event_parser.EPOCH_MILLIS_THRESHOLD
constexpr int64_t kMaxEpochNumber = 9000000000000000LL;  // beyond it the product could leave int64

bool epoch_us(int64_t value, int64_t& micros) {
    if (value > kMaxEpochNumber || value < -kMaxEpochNumber) return false;
    bool millis = value >= kEpochMillisThreshold || value <= -kEpochMillisThreshold;
    micros = millis ? value * 1000 : value * 1000000;
    return true;
}

bool digits(const uint8_t* p, int count, int& value) {
    value = 0;
    for (int k = 0; k < count; ++k) {
        if (p[k] < '0' || p[k] > '9') return false;
        value = value * 10 + (p[k] - '0');
    }
    return true;
}

int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {  // Howard Hinnant's algorithm
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// datetime.fromisoformat of "YYYY-MM-DD(T| )HH:MM:SS[.f+](Z|+hh:mm|+hhmm|+hh)" (year from 1000; a
// fraction of any length cut to microseconds, as it cuts it), as microseconds since the epoch.
bool iso_us(const uint8_t* p, size_t size, int64_t& micros) {
    if (size < 20) return false;
    int year, month, day, hour, minute, second;
    if (!digits(p, 4, year) || p[4] != '-' || !digits(p + 5, 2, month) || p[7] != '-' || !digits(p + 8, 2, day)) {
        return false;
    }
    if (p[10] != 'T' && p[10] != ' ') return false;
    if (!digits(p + 11, 2, hour) || p[13] != ':' || !digits(p + 14, 2, minute) || p[16] != ':' ||
        !digits(p + 17, 2, second)) {
        return false;
    }
    static const int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (year < 1000 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return false;
    if (day > kDays[month - 1] + (month == 2 && leap(year) ? 1 : 0)) return false;
    size_t k = 19;
    int64_t fraction = 0;
    if (k < size && p[k] == '.') {
        ++k;
        int count = 0;
        while (k < size && p[k] >= '0' && p[k] <= '9') {
            if (count < 6) fraction = fraction * 10 + (p[k] - '0');
            ++count;
            ++k;
        }
        if (count == 0 || count > 64) return false;
        for (int pad = count; pad < 6; ++pad) fraction *= 10;
    }
    if (k >= size) return false;  // no offset: the reference refuses it
    int64_t offset = 0;
    if (p[k] == 'Z') {
        if (k + 1 != size) return false;
    } else if (p[k] == '+' || p[k] == '-') {
        int oh, om = 0;
        size_t rest = size - k - 1;
        if (rest == 5) {
            if (!digits(p + k + 1, 2, oh) || p[k + 3] != ':' || !digits(p + k + 4, 2, om)) return false;
        } else if (rest == 4) {
            if (!digits(p + k + 1, 2, oh) || !digits(p + k + 3, 2, om)) return false;
        } else if (rest == 2) {
            if (!digits(p + k + 1, 2, oh)) return false;
        } else {
            return false;
        }
        if (oh > 23 || om > 59) return false;
        offset = (oh * 3600 + om * 60) * (p[k] == '-' ? -1 : 1);
    } else {
        return false;
    }
    int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset;
    micros = seconds * 1000000 + fraction;
    return true;
}

// parse_event_time of the time field's value, for the shapes vouched here.
bool event_time_us(const uint8_t* s, const Node& node, int64_t& micros) {
    if (node.kind == Kind::Integer) {
        const uint8_t* p = s + node.start;
        size_t size = node.end - node.start;
        if (size > 17) return false;
        int64_t value = 0;
        bool negative = *p == '-';
        for (size_t k = negative ? 1 : 0; k < size; ++k) value = value * 10 + (p[k] - '0');
        return epoch_us(negative ? -value : value, micros);
    }
    if (node.kind == Kind::Float) {  // scaled in binary64 and rounded half to even, as round() does
        double value;
        const char* first = reinterpret_cast<const char*>(s + node.start);
        std::from_chars(first, reinterpret_cast<const char*>(s + node.end), value);  // checked by the scan
        double scaled = std::fabs(value) >= static_cast<double>(kEpochMillisThreshold) ? value * 1000.0 : value * 1e6;
        if (!(std::fabs(scaled) < 9.0e18)) return false;
        micros = static_cast<int64_t>(std::nearbyint(scaled));  // the default rounding mode: to nearest, even
        return true;
    }
    if (node.kind != Kind::String || node.escaped) return false;
    const uint8_t* p = s + node.start + 1;
    size_t size = node.end - node.start - 2;
    // Epoch digits as a string ("-?[0-9]{1,16}", nothing around them).
    size_t sign = size > 0 && *p == '-' ? 1 : 0;
    if (size > sign && size - sign <= 16) {
        bool all_digits = true;
        int64_t value = 0;
        for (size_t k = sign; k < size && all_digits; ++k) {
            all_digits = p[k] >= '0' && p[k] <= '9';
            value = value * 10 + (p[k] - '0');
        }
        if (all_digits) return epoch_us(sign ? -value : value, micros);
    }
    return iso_us(p, size, micros);
}

// ---------------------------------------------------------------------------------------------
// One chunk of lines.

struct Output {
    std::vector<int64_t> rows;
    std::vector<uint8_t> digests;
    std::vector<uint64_t> fingerprints;
    std::vector<int64_t> times;
    std::vector<int32_t> key_offsets{0};
    std::string key_data;
    std::vector<int32_t> raw_offsets{0};
    std::string raw_data;
};

struct LineScanner {
    const Rules& rules;
    std::vector<Node> nodes;
    std::string canonical;
    std::string text;
    std::vector<int32_t> order;

    uint64_t fingerprint(const uint8_t* s) {
        canonical.clear();
        Canonical writer{s, nodes, order, canonical};
        if (rules.fp_fields.empty() && rules.fp_exclude.empty()) {
            writer.value(0);
        } else {
            writer.object(0, [&](const Node& node) {
                bool listed = rules.fp_fields.empty();
                for (const auto& name : rules.fp_fields) listed = listed || key_is(s, node, name);
                for (const auto& name : rules.fp_exclude) listed = listed && !key_is(s, node, name);
                return listed;
            });
        }
        const auto* data = reinterpret_cast<const uint8_t*>(canonical.data());
        if (rules.algorithm == kXxh3_64) {
            return XXH3_64bits(data, canonical.size());
        }
        uint8_t digest[8];
        blake2b(data, canonical.size(), 8, digest);
        uint64_t big = 0;  // the digest read big-endian, as fingerprints.py reads it
        for (int k = 0; k < 8; ++k) big = big << 8 | digest[k];
        return big;
    }

    // The line's row, appended to `out`; false (nothing appended) when it is not vouched for.
    bool line(const uint8_t* s, size_t n, int64_t row, Output& out) {
        if (n == 0 || static_cast<int64_t>(n) > rules.max_line_bytes || n > UINT32_MAX || s[0] != '{') return false;
        nodes.clear();
        order.clear();
        Scanner scanner{s, n, 0, &nodes, &order};
        if (scanner.value(1) != 0 || scanner.i != n) return false;
        text.clear();
        bool one_field = rules.key_fields.size() == 1;
        if (!one_field) text.append("[\"");
        for (size_t k = 0; k < rules.key_fields.size(); ++k) {
            int32_t field = member(s, nodes, rules.key_fields[k]);
            if (field < 0) return false;
            if (!one_field && k > 0) text.append("\",\"");
            if (!id_text(s, nodes[field], rules, text)) return false;
        }
        if (!one_field) text.append("\"]");
        int32_t time_node = member(s, nodes, rules.time_field);
        int64_t micros;
        if (time_node < 0 || !event_time_us(s, nodes[time_node], micros)) return false;
        if (micros < rules.min_us || micros > rules.max_us) return false;
        uint64_t fp = fingerprint(s);
        if (out.raw_data.size() + n > INT32_MAX || out.key_data.size() + text.size() > INT32_MAX) return false;
        uint8_t digest[16];
        key_digest(text, one_field, digest);
        out.rows.push_back(row);
        out.digests.insert(out.digests.end(), digest, digest + 16);
        out.fingerprints.push_back(fp);
        out.times.push_back(micros);
        out.key_data.append(text);
        out.key_offsets.push_back(static_cast<int32_t>(out.key_data.size()));
        out.raw_data.append(reinterpret_cast<const char*>(s), n);
        out.raw_offsets.push_back(static_cast<int32_t>(out.raw_data.size()));
        return true;
    }
};

// ---------------------------------------------------------------------------------------------
// Python bindings.

bool utf8_of(PyObject* item, std::string& out, const char* what) {
    if (!PyBytes_Check(item)) {
        PyErr_Format(PyExc_TypeError, "%s must be bytes", what);
        return false;
    }
    out.assign(PyBytes_AS_STRING(item), static_cast<size_t>(PyBytes_GET_SIZE(item)));
    return true;
}

bool names_of(PyObject* sequence, std::vector<std::string>& out, const char* what) {
    PyObject* fast = PySequence_Fast(sequence, what);
    if (fast == nullptr) return false;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    for (Py_ssize_t k = 0; k < count; ++k) {
        std::string name;
        if (!utf8_of(PySequence_Fast_GET_ITEM(fast, k), name, what)) {
            Py_DECREF(fast);
            return false;
        }
        out.push_back(std::move(name));
    }
    Py_DECREF(fast);
    return true;
}

template <typename T>
PyObject* bytes_of(const std::vector<T>& values) {
    return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(values.data()),
                                     static_cast<Py_ssize_t>(values.size() * sizeof(T)));
}

PyObject* bytes_of(const std::string& text) {
    return PyBytes_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
}

// scan(pieces, key_fields, time_field, min_us, max_us, max_line_bytes, fp_fields, fp_exclude, trim,
//      lower, algorithm) -> (rows, digests, fingerprints, times, key_offsets, key_data, raw_offsets,
//      raw_data), each as bytes: int64 offsets of the vouched pieces, their 16-byte key digests,
//      uint64 fingerprints, int64 microseconds, and Arrow string buffers of key texts and lines.
PyObject* scan(PyObject*, PyObject* args) {
    PyObject *pieces, *key_fields, *fp_fields, *fp_exclude, *time_field;
    long long min_us, max_us, max_line_bytes;
    int trim, lower, algorithm;
    if (!PyArg_ParseTuple(args, "OOSLLLOOppi", &pieces, &key_fields, &time_field, &min_us, &max_us, &max_line_bytes,
                          &fp_fields, &fp_exclude, &trim, &lower, &algorithm)) {
        return nullptr;
    }
    Rules rules;
    if (!names_of(key_fields, rules.key_fields, "key_fields") || !utf8_of(time_field, rules.time_field, "time_field") ||
        !names_of(fp_fields, rules.fp_fields, "fp_fields") || !names_of(fp_exclude, rules.fp_exclude, "fp_exclude")) {
        return nullptr;
    }
    if (rules.key_fields.empty() || (algorithm != kBlake2b64 && algorithm != kXxh3_64)) {
        PyErr_SetString(PyExc_ValueError, "scan needs key fields and a known fingerprint algorithm");
        return nullptr;
    }
    rules.min_us = min_us;
    rules.max_us = max_us;
    rules.max_line_bytes = max_line_bytes;
    rules.trim = trim;
    rules.lower = lower;
    rules.algorithm = algorithm;
    PyObject* fast = PySequence_Fast(pieces, "pieces must be a sequence of bytes");
    if (fast == nullptr) return nullptr;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    std::vector<std::pair<const uint8_t*, size_t>> lines(static_cast<size_t>(count));
    size_t total = 0;
    for (Py_ssize_t k = 0; k < count; ++k) {
        PyObject* item = PySequence_Fast_GET_ITEM(fast, k);
        if (!PyBytes_Check(item)) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_TypeError, "pieces must be bytes");
            return nullptr;
        }
        lines[k] = {reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(item)),
                    static_cast<size_t>(PyBytes_GET_SIZE(item))};
        total += lines[k].second;
    }
    Output out;  // sized for every line vouched for: no growth while scanning
    size_t rows = static_cast<size_t>(count);
    out.rows.reserve(rows);
    out.digests.reserve(rows * 16);
    out.fingerprints.reserve(rows);
    out.times.reserve(rows);
    out.key_offsets.reserve(rows + 1);
    out.raw_offsets.reserve(rows + 1);
    out.key_data.reserve(rows * 40);
    out.raw_data.reserve(std::min<size_t>(total, INT32_MAX));
    // `fast` holds the pieces (a new tuple, or the list with a reference): bytes are immutable, and
    // a list is only read here, with the GIL held for the whole scan (lists can change without it).
    LineScanner scanner{rules, {}, {}, {}, {}};
    for (Py_ssize_t k = 0; k < count; ++k) scanner.line(lines[k].first, lines[k].second, k, out);
    Py_DECREF(fast);
    return Py_BuildValue("(NNNNNNNN)", bytes_of(out.rows), bytes_of(out.digests), bytes_of(out.fingerprints),
                         bytes_of(out.times), bytes_of(out.key_offsets), bytes_of(out.key_data),
                         bytes_of(out.raw_offsets), bytes_of(out.raw_data));
}

PyObject* digest(PyObject*, PyObject* args) {
    Py_buffer data;
    int algorithm;
    if (!PyArg_ParseTuple(args, "y*i", &data, &algorithm)) return nullptr;
    uint8_t out[16];
    PyObject* result;
    const auto* bytes = static_cast<const uint8_t*>(data.buf);
    if (algorithm == 16) {
        blake2b(bytes, static_cast<size_t>(data.len), 16, out);
        result = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(out), 16);
    } else if (algorithm == kBlake2b64) {
        blake2b(bytes, static_cast<size_t>(data.len), 8, out);
        result = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(out), 8);
    } else if (algorithm == kXxh3_64) {
        result = PyLong_FromUnsignedLongLong(XXH3_64bits(bytes, static_cast<size_t>(data.len)));
    } else {
        PyErr_SetString(PyExc_ValueError, "unknown algorithm");
        result = nullptr;
    }
    PyBuffer_Release(&data);
    return result;
}

PyMethodDef kMethods[] = {
    {"scan", scan, METH_VARARGS, "The rows the core vouches for in a chunk of lines (see parse_core.cpp)."},
    {"digest", digest, METH_VARARGS, "BLAKE2b-128 (16), BLAKE2b-64 (0) bytes or XXH3-64 (1) int of bytes: for tests."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_parse_core", "eventdedup's compiled parse core.", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the parse core reads BLAKE2b's words little-endian"
#endif

PyMODINIT_FUNC PyInit__parse_core(void) { return PyModule_Create(&kModule); }
