// eventdedup's compiled dedup core: the kernels of deciding a bucket (eventdedup.dedup.bucket),
// numpy buffers in, bytes out.
//
// - decide: every row of a bucket against the committed runs it may be in: its pair (key and
//   fingerprint), the pair's preferred copy by survivor priority, where the pair and the key are
//   held (earliest and latest run), the preferred new pair of each key, and each row's outcome,
//   action and holder: eventdedup.dedup.decide.decide_key_group;
// - guard_probe, guard_unpack, guard_with_ids, guard_encode: the id guard's lookups, its Elias-Fano
//   layout both ways and a batch's ids added to it: eventdedup.cache.guard;
// - segment_encode: a cache segment's bytes, index and checks: eventdedup.cache.segment;
// - sort_order: the stable order of fixed-width byte strings: eventdedup.sorting.lex_order.
//
// Every function is held to its Python reference, which stays the definition, by
// tests/unit/dedup/test_native_dedup.py (hypothesis over random batches, caches and policies) and
// by fuzz/ (make fuzz). Built by `make venv` (eventdedup_dev.native); without it the Python runs.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <zlib.h>

#ifndef EVENTDEDUP_SOURCE_SHA256
#define EVENTDEDUP_SOURCE_SHA256 ""  // eventdedup_dev.native passes the source's digest
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Buffers
struct Buffer {
    Py_buffer view{};
    bool held = false;
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& other) noexcept : view(other.view), held(other.held) { other.held = false; }
    ~Buffer() {
        if (held) PyBuffer_Release(&view);
    }
    bool get(PyObject* object) {
        if (PyObject_GetBuffer(object, &view, PyBUF_SIMPLE) != 0) return false;
        held = true;
        return true;
    }
    const uint8_t* bytes() const { return static_cast<const uint8_t*>(view.buf); }
    size_t size() const { return static_cast<size_t>(view.len); }
    template <typename T>
    size_t count() const { return size() / sizeof(T); }
    template <typename T>
    T at(size_t i) const {
        T value;
        std::memcpy(&value, bytes() + i * sizeof(T), sizeof(T));
        return value;
    }
};

template <typename T>
PyObject* bytes_of(const std::vector<T>& values) {
    return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(values.data()),
                                     static_cast<Py_ssize_t>(values.size() * sizeof(T)));
}

PyObject* bytes_of(const std::string& text) {
    return PyBytes_FromStringAndSize(text.data(), static_cast<Py_ssize_t>(text.size()));
}

inline uint64_t load_be64(const uint8_t* at) {
    uint64_t value;
    std::memcpy(&value, at, 8);
    return __builtin_bswap64(value);
}

void put_be32(std::string& out, uint32_t value) {
    value = __builtin_bswap32(value);
    out.append(reinterpret_cast<const char*>(&value), 4);
}

void put_be64(std::string& out, uint64_t value) {
    value = __builtin_bswap64(value);
    out.append(reinterpret_cast<const char*>(&value), 8);
}

void put_be16(std::string& out, uint16_t value) {
    value = static_cast<uint16_t>((value >> 8) | (value << 8));
    out.append(reinterpret_cast<const char*>(&value), 2);
}


// ---------------------------------------------------------------------------------------------
// sort_order(values, width) -> int64 bytes: the indexes that sort `values` (count x width bytes)
// as numpy's stable argsort of an S<width> array does (bytes compared in order, ties by index).
PyObject* sort_order(PyObject*, PyObject* args) {
    PyObject* object;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "On", &object, &width)) return nullptr;
    Buffer values;
    if (!values.get(object)) return nullptr;
    if (width <= 0 || width % 8 != 0 || values.size() % static_cast<size_t>(width) != 0) {
        PyErr_SetString(PyExc_ValueError, "values must be whole strings of a width that is a multiple of 8");
        return nullptr;
    }
    size_t count = values.size() / static_cast<size_t>(width);
    std::vector<int64_t> order(count);
    const uint8_t* base = values.bytes();
    const size_t w = static_cast<size_t>(width);
    std::vector<uint64_t> first(count);
    for (size_t i = 0; i < count; ++i) {
        order[i] = static_cast<int64_t>(i);
        first[i] = load_be64(base + i * w);
    }
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        if (first[a] != first[b]) return first[a] < first[b];
        int compared = std::memcmp(base + a * w + 8, base + b * w + 8, w - 8);
        if (compared != 0) return compared < 0;
        return a < b;
    });
    return bytes_of(order);
}

// ---------------------------------------------------------------------------------------------
// decide: eventdedup.dedup.decide.decide_key_group, whole.
enum Outcome : uint8_t { KEPT = 0, IN_BATCH_NATURAL = 1, IN_BATCH_SYNTHETIC = 2, CROSS_BATCH_NATURAL = 3,
                         CROSS_BATCH_SYNTHETIC = 4 };
enum Action : uint8_t { EMIT = 0, DROP = 1, RENAME = 2, KEEP = 3, UPDATE = 4 };

struct Row {
    uint64_t hi, lo, fp;  // the digest's two big-endian words, the fingerprint
    int64_t priority;
    int64_t index;
};

struct Run {
    Buffer digests, fingerprints;
    int64_t hour = 0;
    size_t size = 0;
};

struct Fate {
    std::vector<uint8_t> outcome, action;
    std::vector<int32_t> holder;
    Fate(size_t size, int32_t this_batch) : outcome(size, KEPT), action(size, EMIT), holder(size, this_batch) {}
    void set(size_t i, uint8_t o, uint8_t a, int32_t h) {
        outcome[i] = o;
        action[i] = a;
        holder[i] = h;
    }
};

inline int compare_key(const uint8_t* entry, uint64_t hi, uint64_t lo) {
    uint64_t entry_hi = load_be64(entry), entry_lo = load_be64(entry + 8);
    if (entry_hi != hi) return entry_hi < hi ? -1 : 1;
    if (entry_lo != lo) return entry_lo < lo ? -1 : 1;
    return 0;
}

// The first entry at or after `from` whose digest is not below (hi, lo): entries are sorted.
size_t lower_bound(const Run& run, size_t from, uint64_t hi, uint64_t lo) {
    const uint8_t* base = run.digests.bytes();
    size_t low = from, high = run.size;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (compare_key(base + middle * 16, hi, lo) < 0) low = middle + 1;
        else high = middle;
    }
    return low;
}

bool decide_rows(const Buffer& digests, const Buffer& fingerprints, const Buffer& priorities,
                 const std::vector<Run>& runs, bool every_hour, const std::vector<int64_t>& mask_hours,
                 const std::vector<Buffer>& mask_buffers, int synthetic, bool changelog, std::vector<uint8_t>& outcomes,
                 std::vector<uint8_t>& actions, std::vector<int32_t>& holders);

// decide(digests, fingerprints, priorities, runs, key_hours, synthetic_action, changelog)
//   digests: n x 16 bytes; fingerprints: n uint64; priorities: n int64 (0 preferred);
//   runs: [(digests, fingerprints, hour)] in the view's order (commit order), each sorted by digest;
//   key_hours: None (every run may hold every key) or [(hour, mask)] with a byte per distinct key
//     (the keys sorted), 1 where that hour may hold it;
//   synthetic_action: Action for synthetic duplicates; changelog: 0 or 1.
// -> (outcomes uint8, actions uint8, holders int32) per row, as bytes.
PyObject* decide(PyObject*, PyObject* args) {
    PyObject *digests_object, *fingerprints_object, *priorities_object, *runs_object, *key_hours_object;
    int synthetic, changelog;
    if (!PyArg_ParseTuple(args, "OOOOOii", &digests_object, &fingerprints_object, &priorities_object, &runs_object,
                          &key_hours_object, &synthetic, &changelog))
        return nullptr;
    Buffer digests, fingerprints, priorities;
    if (!digests.get(digests_object) || !fingerprints.get(fingerprints_object) || !priorities.get(priorities_object))
        return nullptr;
    const size_t n = digests.size() / 16;
    if (digests.size() != n * 16 || fingerprints.count<uint64_t>() != n || priorities.count<int64_t>() != n ||
        fingerprints.size() != n * 8 || priorities.size() != n * 8) {
        PyErr_SetString(PyExc_ValueError, "digests, fingerprints and priorities must describe the same rows");
        return nullptr;
    }
    if (synthetic != DROP && synthetic != RENAME && synthetic != KEEP) {
        PyErr_SetString(PyExc_ValueError, "unknown synthetic action");
        return nullptr;
    }
    if (!PyList_Check(runs_object)) {
        PyErr_SetString(PyExc_TypeError, "runs must be a list");
        return nullptr;
    }
    const size_t run_count = static_cast<size_t>(PyList_GET_SIZE(runs_object));
    std::vector<Run> runs(run_count);
    for (size_t r = 0; r < run_count; ++r) {
        PyObject* item = PyList_GET_ITEM(runs_object, r);
        PyObject *run_digests, *run_fingerprints;
        long long hour;
        if (!PyArg_ParseTuple(item, "OOL", &run_digests, &run_fingerprints, &hour)) return nullptr;
        if (!runs[r].digests.get(run_digests) || !runs[r].fingerprints.get(run_fingerprints)) return nullptr;
        runs[r].hour = hour;
        runs[r].size = runs[r].digests.size() / 16;
        if (runs[r].digests.size() != runs[r].size * 16 || runs[r].fingerprints.size() != runs[r].size * 8) {
            PyErr_SetString(PyExc_ValueError, "a run's digests and fingerprints differ in length");
            return nullptr;
        }
    }
    // Which hours may hold each key: parsed before the computation lets go of the GIL.
    const bool every_hour = key_hours_object == Py_None;
    std::vector<Buffer> mask_buffers;
    std::vector<int64_t> mask_hours;
    if (!every_hour) {
        if (!PyList_Check(key_hours_object)) {
            PyErr_SetString(PyExc_TypeError, "key_hours must be None or a list");
            return nullptr;
        }
        size_t hours = static_cast<size_t>(PyList_GET_SIZE(key_hours_object));
        mask_buffers.resize(hours);
        for (size_t h = 0; h < hours; ++h) {
            PyObject* mask;
            long long hour;
            if (!PyArg_ParseTuple(PyList_GET_ITEM(key_hours_object, h), "LO", &hour, &mask)) return nullptr;
            if (!mask_buffers[h].get(mask)) return nullptr;
            mask_hours.push_back(hour);
        }
    }
    std::vector<uint8_t> outcomes(n), actions(n);
    std::vector<int32_t> holders(n);
    bool masks_fit = true;
    Py_BEGIN_ALLOW_THREADS
    masks_fit = decide_rows(digests, fingerprints, priorities, runs, every_hour, mask_hours, mask_buffers, synthetic,
                            changelog != 0, outcomes, actions, holders);
    Py_END_ALLOW_THREADS
    if (!masks_fit) {
        PyErr_SetString(PyExc_ValueError, "a key-hours mask does not number these rows' keys");
        return nullptr;
    }
    PyObject* result = PyTuple_New(3);
    if (result == nullptr) return nullptr;
    PyTuple_SET_ITEM(result, 0, bytes_of(outcomes));
    PyTuple_SET_ITEM(result, 1, bytes_of(actions));
    PyTuple_SET_ITEM(result, 2, bytes_of(holders));
    return result;
}

// The computation of `decide`, without the GIL; false if a mask does not fit the rows' keys.
bool decide_rows(const Buffer& digests, const Buffer& fingerprints, const Buffer& priorities,
                 const std::vector<Run>& runs, bool every_hour, const std::vector<int64_t>& mask_hours,
                 const std::vector<Buffer>& mask_buffers, int synthetic, bool changelog, std::vector<uint8_t>& outcomes,
                 std::vector<uint8_t>& actions, std::vector<int32_t>& holders) {
    const size_t n = outcomes.size(), run_count = runs.size();
    // Rows by (pair, priority, index): a pair's rows together, its preferred copy first.
    std::vector<Row> rows(n);
    for (size_t i = 0; i < n; ++i) {
        const uint8_t* digest = digests.bytes() + i * 16;
        rows[i] = {load_be64(digest), load_be64(digest + 8), fingerprints.at<uint64_t>(i), priorities.at<int64_t>(i),
                   static_cast<int64_t>(i)};
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        if (a.hi != b.hi) return a.hi < b.hi;
        if (a.lo != b.lo) return a.lo < b.lo;
        if (a.fp != b.fp) return a.fp < b.fp;
        if (a.priority != b.priority) return a.priority < b.priority;
        return a.index < b.index;
    });
    // Pairs (their representative rows), keys, each row's pair.
    std::vector<size_t> pair_rep;  // position in `rows` of each pair's representative
    std::vector<size_t> key_of_pair;
    std::vector<size_t> pair_of_row(n);
    size_t keys = 0;
    for (size_t s = 0; s < n; ++s) {
        const Row& row = rows[s];
        bool new_key = s == 0 || row.hi != rows[s - 1].hi || row.lo != rows[s - 1].lo;
        bool new_pair = new_key || row.fp != rows[s - 1].fp;
        if (new_key) ++keys;
        if (new_pair) {
            pair_rep.push_back(s);
            key_of_pair.push_back(keys - 1);
        }
        pair_of_row[static_cast<size_t>(row.index)] = pair_rep.size() - 1;
    }
    const size_t pairs = pair_rep.size();
    for (const Buffer& mask : mask_buffers)
        if (mask.size() != keys) return false;
    // Where each pair and key is held: the earliest run holding the pair, the earliest and the
    // latest holding the key. Queries come in pair order, so digests never decrease along a run.
    const int32_t this_batch = static_cast<int32_t>(run_count);
    std::vector<int32_t> pair_owner(pairs, -1), key_first(pairs, -1), key_last(pairs, -1);
    for (size_t r = 0; r < run_count; ++r) {
        const Run& run = runs[r];
        const Buffer* mask = nullptr;
        if (!every_hour) {
            for (size_t h = 0; h < mask_hours.size(); ++h)
                if (mask_hours[h] == run.hour) mask = &mask_buffers[h];
            if (mask == nullptr) continue;  // no key of these rows may be in this run's hour
        }
        size_t from = 0;
        for (size_t p = 0; p < pairs; ++p) {
            if (mask != nullptr && mask->bytes()[key_of_pair[p]] == 0) continue;
            const Row& query = rows[pair_rep[p]];
            size_t low = lower_bound(run, from, query.hi, query.lo);
            from = low;
            size_t high = low;
            bool pair = false;
            while (high < run.size && compare_key(run.digests.bytes() + high * 16, query.hi, query.lo) == 0) {
                if (run.fingerprints.at<uint64_t>(high) == query.fp) pair = true;
                ++high;
            }
            if (high > low) {
                if (key_first[p] < 0) key_first[p] = static_cast<int32_t>(r);
                key_last[p] = static_cast<int32_t>(r);
            }
            if (pair && pair_owner[p] < 0) pair_owner[p] = static_cast<int32_t>(r);
        }
    }
    // Per key, its preferred pair not held by any run (`_best_new_pair_per_key`): pairs of a key
    // are consecutive; the lowest representative priority, ties to the earlier pair.
    std::vector<uint8_t> best(pairs, 0);
    for (size_t p = 0; p < pairs;) {
        size_t end = p;
        while (end < pairs && key_of_pair[end] == key_of_pair[p]) ++end;
        size_t chosen = pairs;
        for (size_t q = p; q < end; ++q) {
            if (pair_owner[q] >= 0) continue;
            if (chosen == pairs || rows[pair_rep[q]].priority < rows[pair_rep[chosen]].priority) chosen = q;
        }
        if (chosen != pairs) best[chosen] = 1;
        p = end;
    }
    // The fate of each pair's representative and of its other copies (`_classify_pairs`).
    Fate rep(pairs, this_batch), rest(pairs, this_batch);
    const bool rest_natural_in_batch = synthetic != DROP;
    for (size_t p = 0; p < pairs; ++p) {
        const bool pair_hit = pair_owner[p] >= 0, key_hit = key_first[p] >= 0;
        rest.set(p, IN_BATCH_NATURAL, DROP, this_batch);
        if (pair_hit) {
            rep.set(p, CROSS_BATCH_NATURAL, DROP, pair_owner[p]);
            rest.set(p, CROSS_BATCH_NATURAL, DROP, pair_owner[p]);
            continue;
        }
        const bool new_version = key_hit;
        if (changelog) {
            if (best[p]) {
                if (new_version) rep.set(p, KEPT, UPDATE, key_last[p]);
            } else {
                rep.set(p, IN_BATCH_SYNTHETIC, DROP, this_batch);
                rest.set(p, IN_BATCH_SYNTHETIC, DROP, this_batch);
            }
            continue;
        }
        if (new_version) {
            rep.set(p, CROSS_BATCH_SYNTHETIC, static_cast<uint8_t>(synthetic), key_first[p]);
            if (!rest_natural_in_batch) rest.set(p, CROSS_BATCH_SYNTHETIC, DROP, key_first[p]);
        } else if (!best[p]) {
            rep.set(p, IN_BATCH_SYNTHETIC, static_cast<uint8_t>(synthetic), this_batch);
            if (!rest_natural_in_batch) rest.set(p, IN_BATCH_SYNTHETIC, DROP, this_batch);
        }
    }
    for (size_t i = 0; i < n; ++i) {
        size_t p = pair_of_row[i];
        const Fate& fate = static_cast<size_t>(rows[pair_rep[p]].index) == i ? rep : rest;
        outcomes[i] = fate.outcome[p];
        actions[i] = fate.action[p];
        holders[i] = fate.holder[p];
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// The id guard (eventdedup.cache.guard).
constexpr uint64_t kGuardSeed = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kMix1 = 0xBF58476D1CE4E5B9ULL;
constexpr uint64_t kMix2 = 0x94D049BB133111EBULL;
constexpr int kHashBits = 46;

inline uint64_t splitmix64_finalised(uint64_t mixed) {
    mixed ^= mixed >> 30;
    mixed *= kMix1;
    mixed ^= mixed >> 27;
    mixed *= kMix2;
    mixed ^= mixed >> 31;
    return mixed;
}

inline uint64_t guard_hash(const uint8_t* digest) {
    uint64_t first = load_be64(digest), second = load_be64(digest + 8);
    return splitmix64_finalised((first ^ kGuardSeed) ^ ((second << 29) | (second >> 35)));
}

// guard_probe(hashes, wanted, order) -> (query int64, position int64): for each wanted hash
// (sorted), every position of the guard's sorted hashes that holds it, with the probe's query
// index (order[i]): IdGuard.candidate_hours' pairs, in its order.
PyObject* guard_probe(PyObject*, PyObject* args) {
    PyObject *hashes_object, *wanted_object, *order_object;
    if (!PyArg_ParseTuple(args, "OOO", &hashes_object, &wanted_object, &order_object)) return nullptr;
    Buffer hashes, wanted, order;
    if (!hashes.get(hashes_object) || !wanted.get(wanted_object) || !order.get(order_object)) return nullptr;
    const size_t count = hashes.count<uint64_t>(), probes = wanted.count<uint64_t>();
    if (hashes.size() != count * 8 || wanted.size() != probes * 8 || order.size() != probes * 8) {
        PyErr_SetString(PyExc_ValueError, "hashes, wanted and order must be 8-byte arrays, wanted and order alike");
        return nullptr;
    }
    std::vector<int64_t> queries, positions;
    size_t j = 0;
    for (size_t i = 0; i < probes; ++i) {
        uint64_t value = wanted.at<uint64_t>(i);
        while (j < count && hashes.at<uint64_t>(j) < value) ++j;
        for (size_t k = j; k < count && hashes.at<uint64_t>(k) == value; ++k) {
            queries.push_back(order.at<int64_t>(i));
            positions.push_back(static_cast<int64_t>(k));
        }
    }
    PyObject* result = PyTuple_New(2);
    if (result == nullptr) return nullptr;
    PyTuple_SET_ITEM(result, 0, bytes_of(queries));
    PyTuple_SET_ITEM(result, 1, bytes_of(positions));
    return result;
}

// A reader of a big-endian bit stream (numpy.packbits' order: a byte's high bit first).
struct BitReader {
    const uint8_t* data;
    size_t bytes;
    uint64_t read(size_t bit, int width) const {  // `width` bits from bit `bit`, width <= 57
        if (width == 0) return 0;
        size_t byte = bit / 8;
        uint64_t word = 0;
        for (size_t k = 0; k < 8; ++k) word = (word << 8) | (byte + k < bytes ? data[byte + k] : 0);
        return (word << (bit % 8)) >> (64 - width);
    }
};

// guard_unpack(unary, lows, flags, slots, count, high_bits, low_bits, slot_bits, main)
//   -> (hashes uint64, slots uint32, ones, flagged): a format-2 guard's parts (decode_guard
// checks its header, its CRC and what comes back: the counts, the slots' range, the order).
PyObject* guard_unpack(PyObject*, PyObject* args) {
    PyObject *unary_object, *lows_object, *flags_object, *slots_object;
    Py_ssize_t count_arg;
    int high_bits, low_bits, slot_bits;
    unsigned long long main_slot;
    if (!PyArg_ParseTuple(args, "OOOOniiiK", &unary_object, &lows_object, &flags_object, &slots_object, &count_arg,
                          &high_bits, &low_bits, &slot_bits, &main_slot))
        return nullptr;
    Buffer unary, lows, flags, other_slots;
    if (!unary.get(unary_object) || !lows.get(lows_object) || !flags.get(flags_object) ||
        !other_slots.get(slots_object))
        return nullptr;
    if (count_arg < 0 || high_bits < 0 || low_bits < 0 || high_bits + low_bits > 64 || low_bits > 57 ||
        slot_bits < 1 || slot_bits > 32) {
        PyErr_SetString(PyExc_ValueError, "a guard's widths are out of range");
        return nullptr;
    }
    const size_t count = static_cast<size_t>(count_arg);
    const size_t unary_bits = count + (size_t{1} << high_bits);
    if (unary.size() * 8 < unary_bits || lows.size() * 8 < count * static_cast<size_t>(low_bits) ||
        flags.size() * 8 < count) {
        PyErr_SetString(PyExc_ValueError, "a guard's parts are shorter than its header says");
        return nullptr;
    }
    std::vector<uint64_t> hashes(count);
    std::vector<uint32_t> slots(count, static_cast<uint32_t>(main_slot));
    size_t ones = 0;
    for (size_t byte = 0; byte * 8 < unary_bits; ++byte) {
        unsigned value = unary.bytes()[byte];
        while (value) {
            int lead = __builtin_clz(value) - 24;  // the highest set bit: the earliest position
            size_t position = byte * 8 + static_cast<size_t>(lead);
            value &= ~(0x80u >> lead);
            if (position >= unary_bits) break;
            if (ones < count) hashes[ones] = static_cast<uint64_t>(position - ones) << low_bits;
            ++ones;
        }
    }
    BitReader low_reader{lows.bytes(), lows.size()};
    for (size_t i = 0; i < count && i < ones; ++i)
        hashes[i] |= low_reader.read(i * static_cast<size_t>(low_bits), low_bits);
    BitReader slot_reader{other_slots.bytes(), other_slots.size()};
    size_t flagged = 0;
    for (size_t i = 0; i < count; ++i) {
        if (flags.bytes()[i / 8] & (0x80u >> (i % 8))) {
            if ((flagged + 1) * static_cast<size_t>(slot_bits) <= other_slots.size() * 8)
                slots[i] = static_cast<uint32_t>(slot_reader.read(flagged * static_cast<size_t>(slot_bits), slot_bits));
            ++flagged;
        }
    }
    PyObject* result = PyTuple_New(4);
    if (result == nullptr) return nullptr;
    PyTuple_SET_ITEM(result, 0, bytes_of(hashes));
    PyTuple_SET_ITEM(result, 1, bytes_of(slots));
    PyTuple_SET_ITEM(result, 2, PyLong_FromSize_t(ones));
    PyTuple_SET_ITEM(result, 3, PyLong_FromSize_t(flagged));
    return result;
}

// guard_with_ids(hours, hashes, slots, hash_bits, digests, new_hours) -> (hours int64, hashes
// uint64, slots uint32): IdGuard.with_ids: the guard's entries plus each digest's top hash bits
// in its hour, sorted by (hash, slot), each once.
PyObject* guard_with_ids(PyObject*, PyObject* args) {
    PyObject *hours_object, *hashes_object, *slots_object, *digests_object, *new_hours_object;
    int hash_bits;
    if (!PyArg_ParseTuple(args, "OOOiOO", &hours_object, &hashes_object, &slots_object, &hash_bits, &digests_object,
                          &new_hours_object))
        return nullptr;
    Buffer hours, hashes, slots, digests, new_hours;
    if (!hours.get(hours_object) || !hashes.get(hashes_object) || !slots.get(slots_object) ||
        !digests.get(digests_object) || !new_hours.get(new_hours_object))
        return nullptr;
    const size_t old_count = hashes.count<uint64_t>(), new_count = digests.size() / 16;
    if (hash_bits < 1 || hash_bits > 64 || slots.count<uint32_t>() != old_count ||
        new_hours.count<int64_t>() != new_count || digests.size() != new_count * 16) {
        PyErr_SetString(PyExc_ValueError, "a guard's entries and the new ids must be consistent arrays");
        return nullptr;
    }
    std::vector<int64_t> distinct(hours.count<int64_t>());
    for (size_t i = 0; i < distinct.size(); ++i) distinct[i] = hours.at<int64_t>(i);
    for (size_t i = 0; i < new_count; ++i) distinct.push_back(new_hours.at<int64_t>(i));
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    auto slot_of = [&](int64_t hour) {
        return static_cast<uint32_t>(std::lower_bound(distinct.begin(), distinct.end(), hour) - distinct.begin());
    };
    std::vector<std::pair<uint64_t, uint32_t>> entries;
    entries.reserve(old_count + new_count);
    for (size_t i = 0; i < old_count; ++i) {
        uint32_t slot = slots.at<uint32_t>(i);
        if (slot >= hours.count<int64_t>()) {
            PyErr_SetString(PyExc_ValueError, "a guard entry names an hour the guard does not hold");
            return nullptr;
        }
        entries.emplace_back(hashes.at<uint64_t>(i), slot_of(hours.at<int64_t>(slot)));
    }
    for (size_t i = 0; i < new_count; ++i)
        entries.emplace_back(guard_hash(digests.bytes() + i * 16) >> (64 - hash_bits), slot_of(new_hours.at<int64_t>(i)));
    std::sort(entries.begin(), entries.end());
    entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
    std::vector<uint64_t> out_hashes(entries.size());
    std::vector<uint32_t> out_slots(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
        out_hashes[i] = entries[i].first;
        out_slots[i] = entries[i].second;
    }
    PyObject* result = PyTuple_New(3);
    if (result == nullptr) return nullptr;
    PyTuple_SET_ITEM(result, 0, bytes_of(distinct));
    PyTuple_SET_ITEM(result, 1, bytes_of(out_hashes));
    PyTuple_SET_ITEM(result, 2, bytes_of(out_slots));
    return result;
}

// A writer of a big-endian bit stream, padded with zeros to a whole byte.
struct BitWriter {
    std::string out;
    uint64_t pending = 0;
    int filled = 0;
    void write(uint64_t value, int width) {
        for (int bit = width - 1; bit >= 0; --bit) {
            pending = (pending << 1) | ((value >> bit) & 1);
            if (++filled == 8) {
                out.push_back(static_cast<char>(pending));
                pending = 0;
                filled = 0;
            }
        }
    }
    std::string finish() {
        if (filled) out.push_back(static_cast<char>(pending << (8 - filled)));
        filled = 0;
        return out;
    }
};

// guard_encode(hours, hashes, slots) -> bytes: encode_guard's body (format 2, 46-bit hashes),
// without its CRC; hashes sorted with slots, each below 2^46.
PyObject* guard_encode(PyObject*, PyObject* args) {
    PyObject *hours_object, *hashes_object, *slots_object;
    if (!PyArg_ParseTuple(args, "OOO", &hours_object, &hashes_object, &slots_object)) return nullptr;
    Buffer hours, hashes, slots;
    if (!hours.get(hours_object) || !hashes.get(hashes_object) || !slots.get(slots_object)) return nullptr;
    const size_t count = hashes.count<uint64_t>(), hour_count = hours.count<int64_t>();
    if (slots.count<uint32_t>() != count) {
        PyErr_SetString(PyExc_ValueError, "hashes and slots differ in length");
        return nullptr;
    }
    int high_bits = 0;
    if (count > 0) {
        int length = 64 - __builtin_clzll(static_cast<unsigned long long>(count));  // count.bit_length()
        high_bits = std::min(kHashBits, std::max(0, length - 1));
    }
    const int low_bits = kHashBits - high_bits;
    std::vector<size_t> tally(hour_count + 1, 0);
    for (size_t i = 0; i < count; ++i) {
        uint32_t slot = slots.at<uint32_t>(i);
        if (slot >= tally.size()) tally.resize(slot + 1, 0);
        ++tally[slot];
    }
    uint32_t main_slot = 0;
    for (size_t s = 0; s < tally.size(); ++s)
        if (tally[s] > tally[main_slot]) main_slot = static_cast<uint32_t>(s);
    int slot_bits = 1;
    if (hour_count > 1) slot_bits = std::max(1, 64 - __builtin_clzll(static_cast<unsigned long long>(hour_count - 1)));
    size_t others = 0;
    for (size_t i = 0; i < count; ++i) others += slots.at<uint32_t>(i) != main_slot;
    std::string body = "EDG2";
    body.push_back(2);
    body.push_back(static_cast<char>(kHashBits));
    body.push_back(static_cast<char>(high_bits));
    body.push_back(static_cast<char>(slot_bits));
    put_be32(body, static_cast<uint32_t>(hour_count));
    put_be32(body, static_cast<uint32_t>(count));
    put_be32(body, main_slot);
    put_be32(body, static_cast<uint32_t>(others));
    for (size_t h = 0; h < hour_count; ++h) put_be64(body, static_cast<uint64_t>(hours.at<int64_t>(h)));
    // The upper halves in unary: entry i's bit at (hash >> low_bits) + i.
    std::string unary((count + (size_t{1} << high_bits) + 7) / 8, '\0');
    for (size_t i = 0; i < count; ++i) {
        size_t position = static_cast<size_t>(hashes.at<uint64_t>(i) >> low_bits) + i;
        if (position / 8 >= unary.size()) {
            PyErr_SetString(PyExc_ValueError, "a hash is wider than the guard's bits, or out of order");
            return nullptr;
        }
        unary[position / 8] = static_cast<char>(unary[position / 8] | (0x80 >> (position % 8)));
    }
    body += unary;
    BitWriter lows;
    const uint64_t low_mask = low_bits == 64 ? ~uint64_t{0} : (uint64_t{1} << low_bits) - 1;
    for (size_t i = 0; i < count; ++i) lows.write(hashes.at<uint64_t>(i) & low_mask, low_bits);
    body += lows.finish();
    std::string flags((count + 7) / 8, '\0');
    BitWriter other_slots;
    for (size_t i = 0; i < count; ++i) {
        uint32_t slot = slots.at<uint32_t>(i);
        if (slot != main_slot) {
            flags[i / 8] = static_cast<char>(flags[i / 8] | (0x80 >> (i % 8)));
            other_slots.write(slot, slot_bits);
        }
    }
    body += flags;
    body += other_slots.finish();
    return bytes_of(body);
}

// ---------------------------------------------------------------------------------------------
// segment_encode([(owner, digests, fingerprints)]) -> bytes: encode_segment's format 2 (the
// layout in eventdedup.cache.segment): header, run table, each run's digests and big-endian
// fingerprints, per run its blocks' first digests then their CRCs, the footer, the trailer CRC.
constexpr size_t kBlockEntries = 256;

uint32_t crc(uint32_t running, const void* data, size_t size) {
    const auto* bytes = static_cast<const Bytef*>(data);
    while (size > 0) {  // zlib takes a uInt length
        uInt part = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
        running = static_cast<uint32_t>(crc32(running, bytes, part));
        bytes += part;
        size -= part;
    }
    return running;
}

PyObject* segment_encode(PyObject*, PyObject* args) {
    PyObject* runs_object;
    if (!PyArg_ParseTuple(args, "O", &runs_object)) return nullptr;
    if (!PyList_Check(runs_object)) {
        PyErr_SetString(PyExc_TypeError, "runs must be a list");
        return nullptr;
    }
    const size_t run_count = static_cast<size_t>(PyList_GET_SIZE(runs_object));
    std::vector<Buffer> owners(run_count), digests(run_count), fingerprints(run_count);
    for (size_t r = 0; r < run_count; ++r) {
        PyObject *owner, *run_digests, *run_fingerprints;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(runs_object, r), "OOO", &owner, &run_digests, &run_fingerprints))
            return nullptr;
        if (!owners[r].get(owner) || !digests[r].get(run_digests) || !fingerprints[r].get(run_fingerprints))
            return nullptr;
        if (digests[r].size() % 16 != 0 || fingerprints[r].size() != digests[r].size() / 2 ||
            owners[r].size() > 0xFFFF) {
            PyErr_SetString(PyExc_ValueError, "a run's owner, digests and fingerprints are inconsistent");
            return nullptr;
        }
    }
    std::string body = "EDCS";
    body.push_back(2);
    body.push_back(16);
    body.push_back(8);
    body.push_back(0);
    put_be32(body, static_cast<uint32_t>(run_count));
    for (size_t r = 0; r < run_count; ++r) {
        put_be16(body, static_cast<uint16_t>(owners[r].size()));
        body.append(reinterpret_cast<const char*>(owners[r].bytes()), owners[r].size());
        put_be32(body, static_cast<uint32_t>(digests[r].size() / 16));
    }
    const uint32_t table_length = static_cast<uint32_t>(body.size());
    const uint32_t table_crc = crc(0, body.data(), body.size());
    std::vector<std::string> big_endian(run_count);
    for (size_t r = 0; r < run_count; ++r) {
        size_t entries = digests[r].size() / 16;
        big_endian[r].reserve(entries * 8);
        for (size_t i = 0; i < entries; ++i) put_be64(big_endian[r], fingerprints[r].at<uint64_t>(i));
        body.append(reinterpret_cast<const char*>(digests[r].bytes()), digests[r].size());
        body += big_endian[r];
    }
    const uint64_t index_offset = body.size();
    std::string index;
    for (size_t r = 0; r < run_count; ++r) {
        size_t entries = digests[r].size() / 16;
        for (size_t start = 0; start < entries; start += kBlockEntries)
            index.append(reinterpret_cast<const char*>(digests[r].bytes() + start * 16), 16);
        for (size_t start = 0; start < entries; start += kBlockEntries) {
            size_t stop = std::min(entries, start + kBlockEntries);
            uint32_t block = crc(crc(0, digests[r].bytes() + start * 16, (stop - start) * 16),
                                 big_endian[r].data() + start * 8, (stop - start) * 8);
            put_be32(index, block);
        }
    }
    const uint32_t index_crc = crc(0, index.data(), index.size());
    body += index;
    std::string fields;
    put_be64(fields, index_offset);
    put_be32(fields, table_length);
    put_be32(fields, static_cast<uint32_t>(kBlockEntries));
    put_be32(fields, table_crc);
    put_be32(fields, index_crc);
    body += fields;
    put_be32(body, crc(0, fields.data(), fields.size()));
    body += "EDCX";
    put_be32(body, crc(0, body.data(), body.size()));
    return bytes_of(body);
}

PyObject* source_sha256(PyObject*, PyObject*) { return PyUnicode_FromString(EVENTDEDUP_SOURCE_SHA256); }

PyMethodDef kMethods[] = {
    {"source_sha256", source_sha256, METH_NOARGS, "The SHA-256 of the source this core was built from."},
    {"sort_order", sort_order, METH_VARARGS, "The stable order of fixed-width byte strings (int64 bytes)."},
    {"decide", decide, METH_VARARGS, "decide_key_group's outcomes, actions and holders (see dedup_core.cpp)."},
    {"guard_probe", guard_probe, METH_VARARGS, "An id guard's positions holding each wanted hash."},
    {"guard_unpack", guard_unpack, METH_VARARGS, "A format-2 id guard's hashes and slots from its parts."},
    {"guard_with_ids", guard_with_ids, METH_VARARGS, "An id guard's entries plus new ids in their hours."},
    {"guard_encode", guard_encode, METH_VARARGS, "A format-2 id guard's body (without its CRC)."},
    {"segment_encode", segment_encode, METH_VARARGS, "A format-2 cache segment's bytes."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_dedup_core", "eventdedup's compiled dedup core.", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the dedup core hands numpy its native little-endian arrays"
#endif

PyMODINIT_FUNC PyInit__dedup_core(void) { return PyModule_Create(&kModule); }
