# The compiled parse core (native/parse_core.cpp); eventdedup.parse.native_core is its only caller.
from collections.abc import Sequence

def scan(pieces: Sequence[bytes], key_fields: Sequence[bytes], time_field: bytes, min_us: int, max_us: int,
         max_line_bytes: int, fp_fields: Sequence[bytes], fp_exclude: Sequence[bytes], trim: bool, lower: bool,
         algorithm: int, /) -> tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]: ...
def digest(data: bytes, algorithm: int, /) -> bytes | int: ...
