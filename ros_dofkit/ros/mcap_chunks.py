"""Bulk reading of the MCAP files rosbag2 writes: a channel selection's raw messages, chunk by chunk, in stamp order.

Where you are: ``ros_dofkit.ros`` (bag I/O; ``bag_io.iter_raw`` is the entry point). rosbags reads MCAP through a
``BytesIO`` per record and a tuple per message, ~2 us a message; offline replay reads tens of thousands of messages
per second of recording. This module handles the layout ``ros2 bag record`` writes (MCAP's default writer options):
a summary section with Schema, Channel and ChunkIndex records, chunks compressed with zstd, lz4 or not at all, whose
time ranges follow one another in file order. It walks each chunk's records with ``struct.unpack_from`` on the
decompressed bytes and sorts a chunk's messages by log time, keeping record order among equal times.

That is exactly the order of rosbags' reader, which merges the chunks by (log time, chunk offset) after sorting each
chunk stably, and keeps only the messages inside a chunk's declared time range (so does this module); messages
outside chunks are not read when a chunk index exists, by either. :func:`plain_layout` returns None for any other
file (no summary or chunk index, chunks whose time ranges overlap, another compression or profile): the caller then
uses rosbags. The record layouts are those of the MCAP specification (https://mcap.dev/spec).
"""

from __future__ import annotations

import struct
import sys
from binascii import crc32
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd
from lz4.frame import decompress as lz4_decompress

MAGIC = b"\x89MCAP0\r\n"
_HEADER, _FOOTER, _SCHEMA, _CHANNEL, _MESSAGE, _CHUNK_INDEX, _SUMMARY_OFFSET = 0x01, 0x02, 0x03, 0x04, 0x05, 0x08, 0x0E
_FOOTER_SIZE = 1 + 8 + 20  # opcode, length, (summary start, summary offset start, summary crc)
_DECOMPRESS = {"": lambda data: data, "zstd": zstd.decompress, "lz4": lz4_decompress}


class McapError(ValueError):
    """The file breaks the MCAP format (truncated, a checksum mismatch, a record beyond its bounds)."""


@dataclass(frozen=True)
class Chunk:
    """A chunk from the chunk index: its log-time range, where its record starts in the file, its compression."""

    start_time: int
    end_time: int
    offset: int
    compression: str
    compressed_size: int
    uncompressed_size: int


@dataclass(frozen=True)
class Layout:
    """What :func:`plain_layout` found: ``channels`` {channel id: (topic, message type)} and the chunks in file
    order."""

    channels: dict
    chunks: tuple


def _string(data, offset: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<I", data, offset)
    end = offset + 4 + length
    if end > len(data):
        raise McapError("a string runs beyond its record")
    return bytes(data[offset + 4:end]).decode("utf-8"), end


def plain_layout(path: Path) -> Layout | None:
    """The channels and chunks of an MCAP file in the layout this module reads, or None (the caller uses rosbags).
    Raises :class:`McapError` for a file that is not well-formed MCAP."""
    try:
        with open(path, "rb") as file:
            if file.read(8) != MAGIC:
                return None
            opcode, length = struct.unpack("<BQ", file.read(9))
            if opcode != _HEADER:
                return None
            profile, _ = _string(file.read(length), 0)
            if profile != "ros2":
                return None
            size = file.seek(0, 2)
            if size < 8 + _FOOTER_SIZE + 8:
                raise McapError("the file ends before its footer")
            file.seek(size - _FOOTER_SIZE - 8)
            footer = file.read(_FOOTER_SIZE + 8)
            if footer[-8:] != MAGIC or footer[0] != _FOOTER:
                raise McapError("no MCAP footer at the end of the file (truncated?)")
            (summary_start,) = struct.unpack_from("<Q", footer, 9)
            if summary_start == 0:
                return None
            if not 8 < summary_start <= size - _FOOTER_SIZE - 8:
                raise McapError(f"summary offset {summary_start} outside the file")
            file.seek(summary_start)
            summary = file.read(size - _FOOTER_SIZE - 8 - summary_start)
    except struct.error:
        raise McapError("the file ends inside a record") from None
    schemas, channels, chunks = {}, {}, []
    offset = 0
    try:
        while offset < len(summary):
            opcode, length = struct.unpack_from("<BQ", summary, offset)
            body, end = offset + 9, offset + 9 + length
            if end > len(summary):
                raise McapError("a summary record runs beyond the summary")
            if opcode == _SUMMARY_OFFSET:
                break
            if opcode == _SCHEMA:
                (schema_id,) = struct.unpack_from("<H", summary, body)
                schemas[schema_id], _ = _string(summary, body + 2)
            elif opcode == _CHANNEL:
                channel_id, schema_id = struct.unpack_from("<HH", summary, body)
                topic, _ = _string(summary, body + 4)
                channels[channel_id] = (topic, schema_id)
            elif opcode == _CHUNK_INDEX:
                start_time, end_time, chunk_offset = struct.unpack_from("<QQQ", summary, body)
                (map_length,) = struct.unpack_from("<I", summary, body + 32)
                compression, at = _string(summary, body + 36 + map_length + 8)
                compressed_size, uncompressed_size = struct.unpack_from("<QQ", summary, at)
                chunks.append(Chunk(start_time, end_time, chunk_offset, compression, compressed_size,
                                    uncompressed_size))
            offset = end
    except (struct.error, UnicodeDecodeError):
        raise McapError("a malformed summary record") from None
    if not chunks or any(chunk.compression not in _DECOMPRESS for chunk in chunks):
        return None
    chunks.sort(key=lambda chunk: chunk.offset)
    if any(later.start_time < earlier.end_time for earlier, later in zip(chunks, chunks[1:], strict=False)):
        return None  # overlapping chunks: merging them is rosbags' job
    typed = {channel_id: (topic, schemas.get(schema_id, "")) for channel_id, (topic, schema_id) in channels.items()}
    return Layout(typed, tuple(chunks))


def _chunk_records(file, chunk: Chunk) -> bytes:
    """The decompressed, checksum-verified records of one chunk."""
    file.seek(chunk.offset)
    head = file.read(9 + 28)
    if len(head) < 37 or head[0] != 0x06:
        raise McapError(f"no chunk record at offset {chunk.offset} (truncated file?)")
    (uncompressed_crc,) = struct.unpack_from("<I", head, 9 + 24)
    file.seek(chunk.offset + 9 + 40 + len(chunk.compression.encode("utf-8")))
    compressed = file.read(chunk.compressed_size)
    if len(compressed) != chunk.compressed_size:
        raise McapError(f"the chunk at offset {chunk.offset} is truncated")
    try:
        records = _DECOMPRESS[chunk.compression](compressed)
    except Exception as error:  # noqa: BLE001 - each decompressor raises its own error type
        raise McapError(f"the chunk at offset {chunk.offset} does not decompress ({error})") from None
    if len(records) != chunk.uncompressed_size:
        raise McapError(f"the chunk at offset {chunk.offset} holds {len(records)} bytes, its index says "
                        f"{chunk.uncompressed_size}")
    if uncompressed_crc and crc32(records) != uncompressed_crc:
        raise McapError(f"checksum mismatch in the chunk at offset {chunk.offset}")
    return records


def iter_messages(path: Path, layout: Layout, wanted: dict, window: int | None) -> Iterator[tuple]:
    """``(topics, stamps_ns, datas)`` of the messages on the ``wanted`` channels ({channel id: topic}) in stamp
    order (see the module docstring), in consecutive pieces of at most ``window`` messages (None: one piece)."""
    topics: list = []
    stamps: list = []
    datas: list = []
    with open(path, "rb") as file:
        for chunk in layout.chunks:
            records = _chunk_records(file, chunk)
            first = len(stamps)
            offset, size = 0, len(records)
            try:
                while offset < size:
                    opcode, length = struct.unpack_from("<BQ", records, offset)
                    body = offset + 9
                    offset = body + length
                    if opcode != _MESSAGE:
                        continue
                    if length < 22 or offset > size:
                        raise McapError(f"a message record of {length} bytes in the chunk at {chunk.offset}")
                    channel, _, log_time, _ = struct.unpack_from("<HIQQ", records, body)
                    topic = wanted.get(channel)
                    if topic is not None and chunk.start_time <= log_time <= chunk.end_time:
                        topics.append(topic)
                        stamps.append(log_time)
                        datas.append(records[body + 22:offset])
            except struct.error:
                raise McapError(f"a record runs beyond the chunk at offset {chunk.offset}") from None
            if offset != size:
                raise McapError(f"the last record of the chunk at offset {chunk.offset} runs beyond it")
            added = np.asarray(stamps[first:], dtype=np.int64)
            if added.size > 1 and np.any(added[1:] < added[:-1]):
                order = np.argsort(added, kind="stable")
                topics[first:] = [topics[first + k] for k in order.tolist()]
                datas[first:] = [datas[first + k] for k in order.tolist()]
                stamps[first:] = added[order].tolist()
            while window is not None and len(stamps) >= window:
                yield topics[:window], np.asarray(stamps[:window], dtype=np.int64), datas[:window]
                del topics[:window], stamps[:window], datas[:window]
    if stamps:
        yield topics, np.asarray(stamps, dtype=np.int64), datas
