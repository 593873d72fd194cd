"""Write fuzz/corpus/parse_core/: the seed inputs of parse_core_fuzz.py, one small file per shape.

Each seed is the harness's three header bytes (the rules: parse_core_fuzz.rules_of) and a chunk
of lines: the main workload line, each key and time shape the core vouches for, and hostile
lines next to them (invalid dates, repeated keys at depth, deep nesting, float spellings at the
edges of fixed notation, escapes, invalid UTF-8). Run it again after changing the seeds; the
files are kept in the repository so every run starts from them.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

CORPUS = Path(__file__).parent / "corpus" / "parse_core"

# Header bytes (see rules_of): byte 0 the key, normalisation, fingerprint and hash; byte 1 the bounds.
DEFAULT = b"\x00\x01\x00"  # event_id, no normalisation, whole-event BLAKE2b-64, [2000, 2026-11-23]
WIDE = b"\x00\x00\x00"  # any int64 instant: conversions compared, not bounds
XXH3 = b"\x80\x01\x00"
COMPOSITE = b"\x01\x01\x00"  # (event_id, user)
COMPOSITE_REVERSED_NORMALISED = b"\x1a\x01\x00"  # (user, event_id), trim, lower
TIME_AS_KEY = b"\x03\x00\x00"
TRIM_LOWER = b"\x18\x01\x00"
LOWER = b"\x10\x01\x00"
FIELDS = b"\x20\x01\x00"  # fingerprint of event_id, n, p
EXCLUDE_XXH3 = b"\xc0\x01\x00"  # fingerprint without n and created_at, XXH3-64
FIELDS_AND_EXCLUDE = b"\x60\x00\x00"
EXACT_INSTANT = b"\x00\x02\x00"  # [2026-11-22T04:30:00Z, the same]
ONE_MICROSECOND = b"\x00\x02\x01"
TEN_SECONDS = b"\x00\x03\x0a"
SHORT_LINES = b"\x00\x04\x10"  # max_line_bytes 96, wide bounds
COLUMNS = b"\x00\x10\x00"  # wide bounds, the declared columns' check (parse_core_fuzz.check_columns)
COLUMNS_QUARANTINE = b"\x00\x18\x00"  # the same under on_mismatch = "quarantine"

UUID = "0190f3a4-5b6c-7d8e-9f01-23456789abcd"
AT = "2026-11-22T04:30:00Z"


def event(time: str = f'"{AT}"', key: str = f'"{UUID}"', rest: str = ',"user":"u-42","n":7') -> bytes:
    return f'{{"event_id":{key},"created_at":{time}{rest}}}'.encode()


def nested(depth: int, inner: str = "1") -> str:
    return '{"b":2,"a":' * depth + inner + "}" * depth


MAIN = (f'{{"event_id":"{UUID}","created_at":"{AT}","user":"u-42","type":"page_view","page":{{"url":'
        '"https://example.com/a?b=1","title":"Caf\u00e9 \\"menu\\""},"ctx":{"z":1,"a":[1.5,-0.25,null,true]},'
        '"n":7}').encode()

SEEDS: dict[str, bytes] = {
    "main": DEFAULT + MAIN,
    "main-xxh3": XXH3 + MAIN,
    "main-composite": COMPOSITE + MAIN,
    "main-composite-normalised": COMPOSITE_REVERSED_NORMALISED + MAIN,
    "main-time-as-key": TIME_AS_KEY + MAIN,
    "main-fields": FIELDS + MAIN + b'\n' + event(rest=',"p":{"y":1,"x":[2]},"n":null'),
    "main-exclude-xxh3": EXCLUDE_XXH3 + MAIN,
    "main-fields-exclude": FIELDS_AND_EXCLUDE + MAIN,
    "main-exact-instant": EXACT_INSTANT + MAIN + b"\n" + event('"2026-11-22T04:30:00.000001Z"'),
    "main-one-microsecond": ONE_MICROSECOND + event('"2026-11-22T04:29:59.999999Z"') + b"\n"
    + event('"2026-11-22T04:30:00.000001Z"') + b"\n" + event('"2026-11-22T04:30:00.000002Z"'),
    "main-ten-seconds": TEN_SECONDS + event("1795321810") + b"\n" + event("1795321811") + b"\n"
    + event("1795321789.5"),
    "short-lines": SHORT_LINES + event(rest="") + b"\n" + MAIN,
    # Time shapes: every offset form, fractions of 0 to 12 digits, a space for the T.
    "iso-offsets": WIDE + b"\n".join(event(f'"2026-11-22T04:30:00{offset}"') for offset in
                                     ("Z", "+05:30", "-05:30", "+0530", "-0530", "+05", "-00:00", "+23:59", "+24:00",
                                      "+00:60", "z", "", "+5:30", "+05:30:00", " Z")),
    "iso-fractions": WIDE + b"\n".join(event(f'"2026-11-22T04:30:00.{"123456789012"[:size]}Z"') for size in range(13)),
    "iso-separators": WIDE + b"\n".join(event(f'"2026-11-22{sep}04:30:00Z"') for sep in (" ", "t", "_", "T ")),
    "iso-calendar": WIDE + b"\n".join(event(f'"{day}T00:00:00Z"') for day in (
        "2026-02-30", "2024-02-29", "2023-02-29", "2000-02-29", "1900-02-29", "2026-04-31", "2026-13-01",
        "2026-00-10", "2026-01-00", "0999-12-31", "1000-01-01", "9999-12-31")),
    "iso-clock": WIDE + b"\n".join(event(f'"2026-11-22T{clock}Z"') for clock in (
        "24:00:00", "23:59:60", "23:60:00", "23:59:59.999999999", "4:30:00", "04:30")),
    "iso-year-edges": WIDE + event('"9999-12-31T23:59:59-05:00"') + b"\n" + event('"1000-01-01T00:00:00+05:00"'),
    "epoch-strings": WIDE + b"\n".join(event(f'"{text}"') for text in (
        "1795321800", "1795321800000", "99999999999", "100000000000", "-100000000000", "9000000000000000",
        "9000000000000001", "0000000001", "-0", " 1795321800", "+1795321800", "17953218000000000")),
    "epoch-numbers": WIDE + b"\n".join(event(text) for text in (
        "1795321800", "1795321800000", "99999999999", "100000000000", "-100000000000", "9000000000000000",
        "9000000000001", "-0", "0", "1795321800.5", "1795321800000.5", "0.0000005", "-0.0", "99999999999.9999",
        "1.7953218e9", "1795321800.0", "1e11")),
    # Key shapes.
    "key-uuids": DEFAULT + b"\n".join(event(key=f'"{key}"') for key in (
        UUID, UUID.upper(), UUID.replace("-", ""), f" {UUID} ", "01ARZ3NDEKTSV4RRFFQ69G5FAV")),
    "key-uuids-lower": LOWER + event(key=f'"{UUID.upper()}"') + b"\n" + event(key=f'"{UUID}"'),
    "key-integers": DEFAULT + b"\n".join(event(key=key) for key in (
        "0", "-1", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "-0", "007", "1.0", "1e3")),
    "key-others": DEFAULT + b"\n".join(event(key=key) for key in (
        "true", "false", "null", '""', '" "', '"   "', '"\\t"', '"\u3000"', '"\\u0020x"', "[1]", '{"a":1}',
        '"\u00e9t\u00e9"', '"a\\"b"', '"\\u00e9"', '"\x7f"')),
    "key-trim-lower": TRIM_LOWER + b"\n".join(event(key=key) for key in (
        '" ABC "', '"  Mixed-Case_9  "', '" \u00c9t\u00e9 "', '"\\tTAB"', '" \x7f "', '"\u3000A"')),
    "key-unicode-normalised": TRIM_LOWER + b"\n".join(event(key=f'"{key}"') for key in (
        "\u0391\u03a3", "a\u03a3 b", "\u3000\u00c9t\u00e9\u00a0", "\u0130x", "\u212a", "\U00010400", "\u01c5\u216b",
        "\u2028\u2029", "\u200bx\u200b", "\u1e9e", "\u0085")),
    "key-unicode-lower": LOWER + event(key='"\u03a3\u03a3"') + b"\n" + event(key='"\u00c9T\u00c9"'),
    "key-composite": COMPOSITE + b"\n".join(event(key=key, rest=f',"user":{user}') for key, user in (
        ('"a"', '"b"'), ("1", '"b"'), ('"a,b"', '"c"'), ('"a"', "null"), ('"a"', '"\u00e9"'), ('"a"', '"x\\"y"'))),
    "key-missing": DEFAULT + b'{"created_at":"2026-11-22T04:30:00Z"}\n{"event_id":"a"}\n{}',
    # Payload shapes.
    "floats": WIDE + b"\n".join(event(rest=f',"x":{x}') for x in (
        "0.00001", "1e-05", "1e-5", "0.000009999999999999999", "9999999999999998.0", "1e16", "1e+16",
        "10000000000000000.0", "0.30000000000000004", "0.3000000000000000444", "1.0", "1", "-0.0", "1.50",
        "123456789012345680.0", "5e-324", "1.7976931348623157e308")),
    "repeated-keys": WIDE + b"\n".join(event(rest=rest) for rest in (
        ',"p":{"a":1,"a":2}', ',"p":{"b":1,"a":2,"b":3}', ',"p":[{"a":1},{"a":2}]', ',"event_id":"b"',
        ',"p":' + nested(20, '{"k":1,"k":1}'), ',"p":{"a":{"x":1},"b":{"x":1}}')),
    "deep": WIDE + b"\n".join(event(rest=',"p":' + nested(depth)) for depth in (190, 198, 199, 200, 252, 253, 260)),
    "deep-arrays": WIDE + b"\n".join(event(rest=',"p":' + "[" * depth + "]" * depth) for depth in (199, 200, 253, 254)),
    "escapes": WIDE + b"\n".join(event(rest=f',"s":"{text}"') for text in (
        "\\u0000", "\\u001f", "\\u001F", "\\u007f", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\/", "\\b\\f\\n\\r\\t",
        "\\u0008", "\\u000a", "\x7f", "\u2028", "\U0001f600")),
    "escaped-keys": WIDE + event(rest=',"\\u0061":1') + b"\n" + event(rest=',"a\\"b":1') + b"\n"
    + event(rest=',"p":{"\\n":1}'),
    "sorted-payload": FIELDS_AND_EXCLUDE + event(rest=',"n":1,"p":{"\u00e9":1,"z":2,"a":3,"\U0001f600":4,"~":5}'),
    # Bytes that are not UTF-8, or not compact JSON.
    "invalid-utf8": WIDE + b"\n".join(event().replace(b',"n":7}', b',"s":"' + raw + b'"}') for raw in (
        b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
        b"\xc3", b"\xe2\x82", b"\x80", b"\xff", b"\xef\xbf\xbf", b"\xf0\x9f\x98\x80")),
    "framing": WIDE + MAIN + b"\r\n" + MAIN + b" \n \xef\xbb\xbf" + MAIN + b"\n" + MAIN.replace(b",", b", ")
    + b"\n" + MAIN + b"\t\n" + MAIN[:-1] + b"\n\n" + MAIN + b"}",
    # Declared columns (check_columns): "n" and "p" hold each kind of value, nested shapes and edges.
    "columns-scalars": COLUMNS + b"\n".join(event(rest=f',"user":{user},"n":{n},"p":{p}') for user, n, p in (
        ('"u-42"', "7", '"12.30"'), ("12345", "-2147483649", "1.5"), ("null", "9223372036854775808", "true"),
        ('"2026-02-29"', "123.45", '"a\\"b\\u0001"'), ('"1795321800"', "0.125", "-0.0"),
        ('"2026-11-22T04:30:00+05:30"', "1e16", '"99999999999999999999999999999.5"'),
        ("[1]", "18446744073709551615", "3.4028235e38"),
        ('{"a":1}', "-0.0", "340282356779733661637539395458142568448"))),
    "columns-nested": COLUMNS_QUARANTINE + b"\n".join(event(rest=f',"p":{p}') for p in (
        '[1795321800,"2026-11-22T04:30:00Z",null]', '{"a":"1.5","b":null,"c":"1.55"}',
        '{"n":5,"p":["x",null,"y"],"d":"2026-11-22","z":1}', '{"n":"5","p":[1]}', '[[1,2],[],null,[2147483648]]',
        '{"n":{"deep":1}}', '[]', '{}', '[{"a":1},"x"]', '{"p":"not an array"}')),
    "not-objects": WIDE + b'[]\n"x"\n1\nnull\n{\n}\n{"event_id":"a","created_at":1,}\n{"event_id":"a" ,"created_at":1}',
}


def main() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.iterdir():
        old.unlink()
    for name, data in SEEDS.items():
        digest = hashlib.sha1(data).hexdigest()[:8]
        (CORPUS / f"{name}-{digest}").write_bytes(data)
    print(f"{len(SEEDS)} seeds in {CORPUS}")


if __name__ == "__main__":
    main()
