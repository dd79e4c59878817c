"""ros_dofkit.ros.mcap_chunks (and bag_io's direct mcap path) against rosbags' MCAP reader, on MCAP files built here
record by record from the format's specification: chunks compressed with zstd, lz4 or not at all, messages out of
order inside a chunk, equal log times inside a chunk and across a chunk boundary, a message outside its chunk's
declared time range, a channel not asked for; files whose chunks overlap go to rosbags; damaged files are BagErrors.
"""

from __future__ import annotations

import struct
import sys
from binascii import crc32
from pathlib import Path

import pytest
import yaml
from lz4.frame import compress as lz4_compress
from rosbags.rosbag2.metadata import dump_qos_v8

from ros_dofkit.ros import bag_io, mcap_chunks
from ros_dofkit.ros.bag_io import BagError, BagWriter, iter_raw, offered_qos, read_raw

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

TOPICS = {1: ("/a", "std_msgs/msg/String"), 2: ("/b", "std_msgs/msg/String"), 3: ("/c", "std_msgs/msg/String")}


def record(opcode: int, content: bytes) -> bytes:
    return struct.pack("<BQ", opcode, len(content)) + content


def string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


def schema_record(schema_id: int, name: str) -> bytes:
    return record(0x03, struct.pack("<H", schema_id) + string(name) + string("ros2msg") + string("string data"))


def channel_record(channel_id: int, topic: str) -> bytes:
    # user_data: the offered QoS that BagWriter records in metadata.yaml (rosbags matches channels to it).
    user_data = string("offered_qos_profiles") + string(dump_qos_v8([offered_qos(topic)]))
    return record(0x04, struct.pack("<HH", channel_id, channel_id) + string(topic) + string("cdr") +
                  struct.pack("<I", len(user_data)) + user_data)


def message_record(channel_id: int, sequence: int, log_time: int, data: bytes) -> bytes:
    return record(0x05, struct.pack("<HIQQ", channel_id, sequence, log_time, log_time) + data)


def payload(text: str) -> bytes:
    """A std_msgs/String in CDR (the bytes are only carried here)."""
    encoded = text.encode() + b"\x00"
    return b"\x00\x01\x00\x00" + struct.pack("<I", len(encoded)) + encoded


def build_mcap(path: Path, chunks: list, compression: str) -> None:
    """An MCAP file with the given chunks, each a (start, end, [(channel, log_time, text)]) in record order, the
    declared time range as given; schemas and channels inside the first chunk and in the summary."""
    compress = {"": lambda data: data, "zstd": zstd.compress, "lz4": lz4_compress}[compression]
    out = bytearray(mcap_chunks.MAGIC) + record(0x01, string("ros2") + string("dofkit test"))
    indexes = []
    sequence = 0
    for k, (start, end, messages) in enumerate(chunks):
        records = bytearray()
        if k == 0:
            for channel_id, (topic, msgtype) in TOPICS.items():
                records += schema_record(channel_id, msgtype) + channel_record(channel_id, topic)
        entries: dict = {}  # channel -> [(log_time, offset of the message record in the chunk's records)]
        for channel_id, log_time, text in messages:
            sequence += 1
            entries.setdefault(channel_id, []).append((log_time, len(records)))
            records += message_record(channel_id, sequence, log_time, payload(text))
        compressed = compress(bytes(records))
        content = (struct.pack("<QQQI", start, end, len(records), crc32(records)) + string(compression) +
                   struct.pack("<Q", len(compressed)) + compressed)
        offset = len(out)
        out += record(0x06, content)
        # A Message Index record per channel after the chunk (the chunk index points at them).
        index_offsets = bytearray()
        index_start = len(out)
        for channel_id, pairs in sorted(entries.items()):
            index_offsets += struct.pack("<HQ", channel_id, len(out))
            body = b"".join(struct.pack("<QQ", t, at) for t, at in sorted(pairs))
            out += record(0x07, struct.pack("<HI", channel_id, len(body)) + body)
        indexes.append(struct.pack("<QQQQ", start, end, offset, 9 + len(content)) +
                       struct.pack("<I", len(index_offsets)) + bytes(index_offsets) +
                       struct.pack("<Q", len(out) - index_start) + string(compression) +
                       struct.pack("<QQ", len(compressed), len(records)))
    out += record(0x0F, struct.pack("<I", 0))
    summary_start = len(out)
    for channel_id, (topic, msgtype) in TOPICS.items():
        out += schema_record(channel_id, msgtype) + channel_record(channel_id, topic)
    for index in indexes:
        out += record(0x08, index)
    out += record(0x02, struct.pack("<QQI", summary_start, 0, 0)) + mcap_chunks.MAGIC
    path.write_bytes(bytes(out))


def mcap_bag(tmp_path: Path, name: str, chunks: list, compression: str = "") -> Path:
    """A rosbag2 directory whose .mcap file is built here and whose metadata.yaml (from BagWriter) is given the
    file's counts and time span (rosbags' reader goes by them)."""
    bag = tmp_path / name
    with BagWriter(bag, storage="mcap") as writer:
        for topic, msgtype in TOPICS.values():
            writer.add_topic(topic, msgtype)
    (file,) = bag.glob("*.mcap")
    build_mcap(file, chunks, compression)
    kept = [(channel, t) for start, end, messages in chunks for channel, t, _ in messages if start <= t <= end]
    times = [t for _, t in kept]
    metadata = yaml.safe_load((bag / "metadata.yaml").read_text())
    information = metadata["rosbag2_bagfile_information"]
    span = {"starting_time": {"nanoseconds_since_epoch": min(times)},
            "duration": {"nanoseconds": max(times) - min(times)}, "message_count": len(kept)}
    information.update(span)
    information["files"][0].update(span)
    for entry in information["topics_with_message_count"]:
        entry["message_count"] = sum(TOPICS[channel][0] == entry["topic_metadata"]["name"] for channel, _ in kept)
    (bag / "metadata.yaml").write_text(yaml.safe_dump(metadata, sort_keys=False))
    return bag


CHUNKS = [
    (100, 160, [(1, 150, "a1"), (2, 100, "b1"), (1, 120, "a2"), (3, 120, "c1"), (2, 160, "b2"), (1, 160, "a3"),
                (1, 170, "outside its chunk's range")]),
    (160, 240, [(2, 160, "b3"), (1, 200, "a4"), (3, 180, "c2"), (2, 240, "b4"), (1, 200, "a5")]),
    (250, 250, [(1, 250, "a6"), (2, 250, "b5")]),
]


def rosbags_messages(bag: Path, topics) -> list:
    chunks = list(bag_io._iter_rosbags(bag, topics, None))
    return [(t, s, bytes(d)) for chunk in chunks for t, s, d in zip(chunk.topics, chunk.stamps_ns.tolist(),
                                                                     chunk.data, strict=True)]


@pytest.mark.parametrize("compression", ["", "zstd", "lz4"])
def test_chunks_read_in_rosbags_order_whatever_the_compression_and_window(tmp_path, compression):
    bag = mcap_bag(tmp_path, f"bag_{compression or 'none'}", CHUNKS, compression)
    (file,) = bag.glob("*.mcap")
    layout = mcap_chunks.plain_layout(file)
    assert layout is not None and [chunk.compression for chunk in layout.chunks] == [compression] * 3
    assert layout.channels == TOPICS
    for topics in (None, ["/a", "/b"]):
        expected = rosbags_messages(bag, topics)
        assert len(expected) == (13 if topics is None else 11)
        assert payload("outside its chunk's range") not in [data for _, _, data in expected]
        for window in (None, 1, 4, 100):
            got = [(t, s, bytes(d)) for chunk in iter_raw(bag, topics, window) for t, s, d in
                   zip(chunk.topics, chunk.stamps_ns.tolist(), chunk.data, strict=True)]
            assert got == expected
        whole = read_raw(bag, topics)
        assert list(zip(whole.topics, whole.stamps_ns.tolist(), map(bytes, whole.data), strict=True)) == expected


def test_overlapping_chunks_are_left_to_rosbags(tmp_path):
    overlapping = [(100, 200, [(1, 100, "a1"), (1, 200, "a2")]), (150, 250, [(2, 150, "b1"), (2, 250, "b2")])]
    bag = mcap_bag(tmp_path, "overlap", overlapping)
    (file,) = bag.glob("*.mcap")
    assert mcap_chunks.plain_layout(file) is None
    got = read_raw(bag)
    assert list(zip(got.topics, got.stamps_ns.tolist(), strict=True)) == [("/a", 100), ("/b", 150), ("/a", 200),
                                                                          ("/b", 250)]


def test_damaged_files_are_bag_errors(tmp_path):
    bag = mcap_bag(tmp_path, "garbled", CHUNKS, "zstd")
    (file,) = bag.glob("*.mcap")
    data = bytearray(file.read_bytes())
    layout = mcap_chunks.plain_layout(file)
    middle = layout.chunks[1].offset + 60  # inside the second chunk's compressed records
    data[middle:middle + 8] = b"\xff" * 8
    file.write_bytes(bytes(data))
    with pytest.raises(BagError, match="corrupt bag"):
        read_raw(bag)
    bag = mcap_bag(tmp_path, "crc", CHUNKS, "")
    (file,) = bag.glob("*.mcap")
    data = bytearray(file.read_bytes())
    at = data.find(payload("a4"))
    data[at + 9] ^= 0x01  # one bit of a message's bytes: only the chunk's CRC can tell
    file.write_bytes(bytes(data))
    with pytest.raises(BagError, match="checksum mismatch"):
        read_raw(bag)
    bag = mcap_bag(tmp_path, "truncated", CHUNKS, "")
    (file,) = bag.glob("*.mcap")
    file.write_bytes(file.read_bytes()[:-20])
    with pytest.raises(BagError):
        read_raw(bag)
