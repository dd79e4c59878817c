"""ROS 2 bag files written and read without rclpy, on the ``rosbags`` package (sqlite3 or mcap storage).

Where you are: ``ros_dofkit.ros`` -- the edge between core arrays and ROS. This module moves messages in and out
of bags; which messages to build is the business of the converters (e.g. ``ros_dofkit.ros.imu_messages``).

Messages are rosbags' dataclasses from a typestore of ROS 2 message definitions (default: Jazzy, the same
definitions as Kilted for the sensor_msgs/geometry_msgs/nav_msgs/tf2_msgs types used here), so a bag written
here opens in ``ros2 bag`` and a bag recorded by ``ros2 bag record`` reads here. A record is
``(topic, stamp_ns, message)``: the bag's receive timestamp in nanoseconds and the message object.

    with BagWriter("out_bag", storage="mcap") as bag:
        bag.write("/imu/pelvis/data", stamp_ns, imu_message)
    for record in read_bag("out_bag"):           # BagRecord(topic, stamp_ns, msgtype, message), stamp order
        ...

Bulk path (offline replay, with the NumPy codecs of ``ros_dofkit.ros.cdr``): :func:`read_raw` returns a bag's
serialized messages in stamp order without decoding them, and :meth:`BagWriter.write_raw` appends pre-serialized
messages (one SQL statement per batch on sqlite3).
"""

from __future__ import annotations

import difflib
import sqlite3
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, Self

import numpy as np
from rosbags.rosbag2 import CompressionMode, Reader, ReaderError, StoragePlugin, Writer, WriterError
from rosbags.serde import SerdeError
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

#: Storage back-ends (the rosbag2 plugin names).
STORAGES = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}
#: ROS 2 distributions whose message definitions can be used.
DISTROS = {"humble": Stores.ROS2_HUMBLE, "jazzy": Stores.ROS2_JAZZY, "kilted": Stores.ROS2_KILTED}
DEFAULT_DISTRO = "jazzy"
# rosbag2 metadata version written: 9, the version Jazzy's rosbag2 writes (rosbags can write only 8 or 9).
_BAG_VERSION = 9


# What a damaged storage file raises inside rosbags: its own errors, the sqlite3 driver's (apsw), I/O, and the
# CDR deserializer's (SerdeError, a garbled message body) and the mcap parser's (struct/index/overflow/unicode
# errors on truncated or garbled bytes).
_STORAGE_ERRORS: tuple[type[BaseException], ...] = (ReaderError, SerdeError, OSError, ValueError, KeyError,
                                                     IndexError, ArithmeticError, struct.error,
                                                     sqlite3.DatabaseError)
try:
    import apsw

    _STORAGE_ERRORS += (apsw.Error,)
except ImportError:  # rosbags without its sqlite3 extra
    pass


class BagError(ValueError):
    """A bag cannot be written or read: it exists already, is missing, corrupt, or a record is inconsistent."""


class BagRecord(NamedTuple):
    """One message read from a bag."""

    topic: str
    stamp_ns: int
    msgtype: str
    message: object


def make_typestore(distro: str = DEFAULT_DISTRO):
    """The rosbags typestore holding the message definitions of ``distro`` (humble, jazzy, kilted)."""
    if distro not in DISTROS:
        raise BagError(f"unknown ROS 2 distribution {distro!r}; expected one of {sorted(DISTROS)}")
    return get_typestore(DISTROS[distro])


def _storage_plugin(storage: str) -> StoragePlugin:
    if storage not in STORAGES:
        raise BagError(f"unknown bag storage {storage!r}; expected one of {sorted(STORAGES)}")
    return STORAGES[storage]


class BagWriter:
    """Writes ``(topic, stamp_ns, message)`` records to a new bag folder; a context manager.

    A topic is created on its first record with the record's message type, or beforehand with
    :meth:`add_topic`; every later record on the topic must have that type. Refuses to touch an existing path.
    """

    def __init__(self, path, storage: str = "sqlite3", distro: str = DEFAULT_DISTRO, typestore=None):
        self.path = Path(path)
        self.storage = storage
        plugin = _storage_plugin(storage)
        self.typestore = typestore if typestore is not None else make_typestore(distro)
        if self.path.exists():
            raise BagError(f"refusing to overwrite {self.path}: it exists already; choose a new output path")
        self._writer = Writer(self.path, version=_BAG_VERSION, storage_plugin=plugin)
        self._connections: dict[str, object] = {}
        self._counts: dict[str, int] = {}
        self._open = False
        try:
            self._writer.open()
        except WriterError as error:
            raise BagError(f"cannot create the bag {self.path}: {error}") from None
        self._open = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def counts(self) -> dict[str, int]:
        """Messages written so far, per topic."""
        return dict(self._counts)

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Declare ``topic`` with message type ``msgtype`` (e.g. ``"sensor_msgs/msg/Imu"``)."""
        self._check_open()
        if not isinstance(topic, str) or not topic.startswith("/"):
            raise BagError(f"a topic name must be an absolute ROS name starting with '/', got {topic!r}")
        if topic in self._connections:
            existing = self._connections[topic].msgtype
            if existing != msgtype:
                raise BagError(f"topic {topic} already carries {existing}, cannot also carry {msgtype}")
            return
        if msgtype not in self.typestore.types:
            near = difflib.get_close_matches(msgtype, list(self.typestore.types), n=3)
            raise BagError(f"unknown message type {msgtype!r} (near matches: {near})")
        self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=self.typestore)
        self._counts[topic] = 0

    def write(self, topic: str, stamp_ns: int, message) -> None:
        """Append one message; ``stamp_ns`` is the bag timestamp (integer nanoseconds, >= 0)."""
        self._check_open()
        msgtype = getattr(message, "__msgtype__", None)
        if msgtype is None:
            raise BagError(f"expected a rosbags message object (with __msgtype__), got {type(message).__name__}")
        if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, int) or stamp_ns < 0:
            raise BagError(f"stamp_ns must be a non-negative integer number of nanoseconds, got {stamp_ns!r}")
        self.add_topic(topic, msgtype)
        connection = self._connections[topic]
        data = self.typestore.serialize_cdr(message, msgtype)
        self._writer.write(connection, stamp_ns, data)
        self._counts[topic] += 1

    def write_raw(self, records: Iterable[tuple[str, int, bytes]]) -> None:
        """Append pre-serialized messages ``(topic, stamp_ns, CDR bytes)``, in the order given.

        Every topic must have been declared with :meth:`add_topic` (the bytes carry no type). The bytes are stored
        as given (e.g. from ``ros_dofkit.ros.cdr``); on sqlite3 the whole batch is one ``executemany``.
        """
        self._check_open()
        connections = self._connections
        ids = {topic: connection.id for topic, connection in connections.items()}
        try:
            rows = [(ids[topic], stamp, data) for topic, stamp, data in records]
        except KeyError as error:
            raise BagError(f"write_raw: topic {error.args[0]!r} was not declared with add_topic "
                           f"(declared: {sorted(connections)})") from None
        if not rows:
            return
        stamps = [row[1] for row in rows]
        lowest, highest = min(stamps), max(stamps)
        if lowest < 0:
            raise BagError(f"write_raw: stamps must be non-negative integer nanoseconds, got {lowest}")
        per_id = Counter(row[0] for row in rows)
        writer = self._writer
        storage = writer.storage
        if self.storage == "sqlite3" and hasattr(storage, "cursor") and writer.compression_mode == CompressionMode.NONE:
            storage.cursor.executemany("INSERT INTO messages (topic_id, timestamp, data) VALUES(?, ?, ?)", rows)
            for connection_id, count in per_id.items():
                writer.counts[connection_id] += count
            writer.min_timestamp = min(int(lowest), writer.min_timestamp)
            writer.max_timestamp = max(int(highest), writer.max_timestamp)
        else:
            by_id = {connection.id: connection for connection in connections.values()}
            for connection_id, stamp, data in rows:
                writer.write(by_id[connection_id], stamp, data)
        topic_of = {connection.id: topic for topic, connection in connections.items()}
        for connection_id, count in per_id.items():
            self._counts[topic_of[connection_id]] += count

    def write_all(self, records: Iterable[tuple[str, int, object]]) -> dict[str, int]:
        """Write every ``(topic, stamp_ns, message)``; returns the counts per topic."""
        for topic, stamp_ns, message in records:
            self.write(topic, stamp_ns, message)
        return self.counts

    def close(self) -> None:
        if self._open:
            self._open = False
            self._writer.close()

    def _check_open(self) -> None:
        if not self._open:
            raise BagError(f"the bag {self.path} is closed")


def write_bag(path, records: Iterable[tuple[str, int, object]], storage: str = "sqlite3",
              distro: str = DEFAULT_DISTRO) -> dict[str, int]:
    """Write all ``records`` to a new bag at ``path``; returns the message count per topic."""
    with BagWriter(path, storage=storage, distro=distro) as bag:
        return bag.write_all(records)


def _open_reader(path: Path) -> Reader:
    if not path.exists():
        raise BagError(f"bag not found: {path}")
    try:
        reader = Reader(path)
        reader.open()
    except _STORAGE_ERRORS as error:
        raise BagError(f"cannot read the bag {path} (missing metadata.yaml or corrupt storage): {error}") from None
    return reader


def bag_topics(path) -> dict[str, tuple[str, int]]:
    """``{topic: (msgtype, message count)}`` of a bag, from its metadata."""
    path = Path(path)
    reader = _open_reader(path)
    try:
        return {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
    finally:
        reader.close()


def read_bag(path, topics: Iterable[str] | None = None, distro: str = DEFAULT_DISTRO,
             typestore=None) -> Iterator[BagRecord]:
    """Yield the bag's messages in stamp order as :class:`BagRecord`, deserialized, one at a time (streaming).

    ``topics`` restricts the topics read; an unknown topic raises :class:`BagError` listing the bag's topics.
    Message types missing from the typestore are registered from the definitions stored in the bag.
    Order: each storage file is read sorted by stamp (rosbags: sqlite3 ``ORDER BY timestamp``, mcap merges its
    chunks); files of a split bag follow one another in recording order. A stamp that goes backwards (a split bag
    whose files overlap in time) raises :class:`BagError` rather than silently breaking the order.
    """
    path = Path(path)
    typestore = typestore if typestore is not None else make_typestore(distro)
    reader = _open_reader(path)
    try:
        connections = list(reader.connections)
        if topics is not None:
            wanted = list(topics)
            present = {c.topic for c in connections}
            unknown = [t for t in wanted if t not in present]
            if unknown:
                raise BagError(f"topics {unknown} are not in {path}; it has {sorted(present)}")
            connections = [c for c in connections if c.topic in wanted]
        for connection in connections:
            if connection.msgtype not in typestore.types and connection.msgdef.data:
                typestore.register(get_types_from_msg(connection.msgdef.data, connection.msgtype))
        messages = reader.messages(connections=connections)
        previous = None
        while True:
            try:
                connection, stamp_ns, raw = next(messages)
                message = typestore.deserialize_cdr(raw, connection.msgtype)
            except StopIteration:
                return
            except _STORAGE_ERRORS as error:
                raise BagError(f"corrupt bag {path}: {error}") from None
            if previous is not None and stamp_ns < previous:
                raise BagError(f"{path}: stamp {stamp_ns} ns on {connection.topic} comes after {previous} ns; the "
                               "bag's storage files overlap in time, so its messages cannot be streamed in order")
            previous = stamp_ns
            yield BagRecord(connection.topic, int(stamp_ns), connection.msgtype, message)
    finally:
        reader.close()


class RawMessages(NamedTuple):
    """A bag's serialized messages in stamp order: parallel lists of topic, bag stamp (ns) and CDR bytes, and
    ``{topic: msgtype}``."""

    topics: list
    stamps_ns: np.ndarray
    data: list
    msgtypes: dict


def _sqlite_rows(reader, connections) -> tuple | None:
    """``({topic id: topic}, rows (topic id, stamp, bytes))`` of the connections, in stamp order, straight from
    the database of a directory bag with a single uncompressed sqlite3 file (one query, no per-row Python); None
    for any other bag (the caller then iterates rosbags' reader)."""
    directory = getattr(reader, "storage", None)
    storages = getattr(directory, "storages", None)
    metadata = getattr(directory, "metadata", None)
    if not isinstance(storages, list) or len(storages) != 1 or getattr(metadata, "compression_mode", None):
        return None
    storage = storages[0]
    dbconn = getattr(storage, "dbconn", None)
    if dbconn is None or not hasattr(dbconn, "execute"):
        return None
    # The database numbers its topics itself: match them by name and type, as rosbags' reader does.
    wanted = {(c.topic, c.msgtype) for c in connections}
    topic_of = {c.id: c.topic for c in storage.connections if (c.topic, c.msgtype) in wanted}
    ids = list(topic_of)
    query = (f"SELECT topic_id, timestamp, data FROM messages WHERE topic_id IN ({','.join('?' * len(ids))}) "
             "ORDER BY timestamp")
    return topic_of, list(dbconn.execute(query, ids))


def read_raw(path, topics=None) -> RawMessages:
    """All messages of ``topics`` in stamp order, undecoded: the bulk counterpart of :func:`read_bag` (same order,
    same errors: :class:`BagError` for unknown topics, damaged storage and split files that overlap in time).

    ``topics``: None (all), an iterable of topic names, or a function called with the bag's
    ``{topic: (msgtype, message count)}`` that returns them (and may raise, e.g. after checking types), so the bag
    is opened once.
    """
    path = Path(path)
    reader = _open_reader(path)
    try:
        connections = list(reader.connections)
        if callable(topics):
            topics = topics({c.topic: (c.msgtype, c.msgcount) for c in connections})
        if topics is not None:
            wanted = list(topics)
            present = {c.topic for c in connections}
            unknown = [t for t in wanted if t not in present]
            if unknown:
                raise BagError(f"topics {unknown} are not in {path}; it has {sorted(present)}")
            connections = [c for c in connections if c.topic in wanted]
        msgtypes = {c.topic: c.msgtype for c in connections}
        names, stamps, data = [], [], []
        if connections:
            try:
                direct = _sqlite_rows(reader, connections)
                if direct is not None:
                    topic_of, rows = direct
                    if rows:
                        ids, stamps, data = (list(column) for column in zip(*rows, strict=True))
                        names = [topic_of[i] for i in ids]
                else:
                    for connection, stamp_ns, raw in reader.messages(connections=connections):
                        names.append(connection.topic)
                        stamps.append(stamp_ns)
                        data.append(raw)
            except _STORAGE_ERRORS as error:
                raise BagError(f"corrupt bag {path}: {error}") from None
        stamps = np.asarray(stamps, dtype=np.int64)
        backwards = np.flatnonzero(np.diff(stamps) < 0)
        if backwards.size:
            k = int(backwards[0]) + 1
            raise BagError(f"{path}: stamp {stamps[k]} ns on {names[k]} comes after {stamps[k - 1]} ns; the "
                           "bag's storage files overlap in time, so its messages cannot be streamed in order")
        return RawMessages(names, stamps, data, msgtypes)
    finally:
        reader.close()
