"""The seen-ids cache on S3: its binary segments, the head segment of each (date, hour, bucket),
what a batch can see of it, the settings it is bound to, and its expiry."""
