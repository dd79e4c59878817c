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

Bulk path (offline replay, with the NumPy codecs of ``ros_dofkit.ros.cdr``): :func:`iter_raw` streams a bag's
serialized messages in stamp order without decoding them, in windows of bounded size (:func:`read_raw`: all at
once), and :meth:`BagWriter.write_raw` / :meth:`BagWriter.write_streams` append pre-serialized messages (multi-row
SQL statements on sqlite3).

sqlite3 bags are written here directly (:class:`_Sqlite3File`: rosbag2's schema version 4 and metadata version 9,
the layout rosbags' writer produces, checked by reading every written bag back with rosbags' Reader in the tests),
and :func:`read_raw` reads a plain sqlite3 bag (one uncompressed file) straight from metadata.yaml and the
database: rosbags parses and writes metadata.yaml with ruamel (~20 ms each way), which dominated short replays.
Every other layout (mcap, split or compressed bags, raw .db3 files) goes through rosbags.
"""

from __future__ import annotations

import difflib
import sqlite3
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import closing
from functools import cache
from itertools import chain, islice, repeat
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple, Self

import numpy as np
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import Reader, ReaderError, StoragePlugin, Writer, WriterError
from rosbags.rosbag2.metadata import dump_qos_v8, dump_qos_v9
from rosbags.serde import SerdeError
from rosbags.typesys import get_types_from_msg, get_typestore

from ros_dofkit.ros import mcap_chunks
from ros_dofkit.ros.cdr import DEFAULT_DISTRO, DISTROS, CdrLayoutError, joint_state_message
from ros_dofkit.ros.output_files import PartialFolder

#: Storage back-ends (the rosbag2 plugin names).
STORAGES = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}

# ---------------------------------------------------------------------------------------------- offered QoS
#: Topics the package publishes latched (transient local, keep last 1: tf2's StaticBroadcasterQoS,
#: robot_state_publisher's robot_description): ``ros2 bag play`` offers what a bag records, so a bag without these
#: profiles replays /tf_static volatile and a late tf2 listener never gets it.
LATCHED_TOPICS = ("/tf_static", "/robot_description")
#: rmw's "infinite" duration as rosbag2 Jazzy writes it (deadline, lifespan, liveliness lease).
_INFINITE = QosTime(sec=9223372036, nsec=854775807)


def offered_qos(topic: str) -> Qos:
    """The QoS profile the package's publisher of ``topic`` offers (ros_dofkit.ros.qos): reliable; transient local
    keep last 1 for :data:`LATCHED_TOPICS`, /tf keep last 100, the others keep last 10 (volatile)."""
    latched = topic in LATCHED_TOPICS
    return Qos(QosHistory.KEEP_LAST, 1 if latched else 100 if topic == "/tf" else 10, QosReliability.RELIABLE,
               QosDurability.TRANSIENT_LOCAL if latched else QosDurability.VOLATILE, _INFINITE, _INFINITE,
               QosLiveliness.AUTOMATIC, _INFINITE, False)


@cache
def _offered_qos_text(profile: Qos, version: int) -> str:
    """rosbags' YAML text of ``[profile]`` for a version-8 topics table or version-9 metadata.yaml. Cached: rosbags
    dumps it with ruamel in pure Python (~0.5 ms a topic, ~5% of a short replay), and the profiles are few."""
    return (dump_qos_v8 if version == 8 else dump_qos_v9)([profile])


# rosbag2 metadata version written: 9, the version Jazzy's rosbag2 writes (rosbags can write only 8 or 9).
_BAG_VERSION = 9
# metadata.yaml versions read directly (newer ones go through rosbags, which knows what it supports).
_DIRECT_READ_VERSIONS = range(4, 10)
try:  # PyYAML (ROS 2 installs it with rclpy); without it every bag goes through rosbags (ruamel), only slower.
    import yaml

    # The C YAML implementation when PyYAML was built with it (metadata.yaml is small; the pure one is also fine).
    _YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    _YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    _YAML_ERRORS: tuple = (yaml.YAMLError,)
except ImportError:
    yaml = None
    _YAML_ERRORS = ()


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
    apsw = None


#: What the database drivers raise for a damaged or unreadable sqlite3 file.
_SQLITE_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error,) + ((apsw.Error,) if apsw is not None else ())


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


def _open_for_writing(database: Path):
    """A new database file opened for writing, in autocommit mode (the writer opens its one transaction itself):
    through apsw when installed (as :func:`_open_read_only`; its bulk inserts run ~15% faster than the standard
    library's with the same statements, 6.4 vs 7.5 ms for replay_speed's 16,004 output rows, and its index build
    ~1.4 vs 1.7 ms), else the standard library's sqlite3. Used by one thread at a time, though not always the one
    that opened it (replay.overlap's writing thread): both connections allow that as opened here."""
    if apsw is not None:
        return apsw.Connection(str(database))
    return sqlite3.connect(str(database), isolation_level=None, check_same_thread=False)


def _changes(connection, cursor) -> int:
    """Rows changed by the statement just run on ``connection`` (``cursor``: what its execute() returned)."""
    changes = getattr(connection, "changes", None)  # apsw's; the standard library's cursor has a rowcount
    return changes() if callable(changes) else cursor.rowcount


class _Sqlite3File:
    """One new rosbag2 sqlite3 storage file and its metadata.yaml: rosbag2's database schema 4 (topics,
    message_definitions, messages, metadata tables) and metadata version 9, as rosbags' writer lays them out.

    ``journal=False`` turns off SQLite's rollback journal and fsync for the file's one write transaction: a crash
    then leaves a damaged file instead of a shorter one, which is fine for output the caller deletes on failure.
    """

    SCHEMA = """
    CREATE TABLE schema(schema_version INTEGER PRIMARY KEY, ros_distro TEXT NOT NULL);
    CREATE TABLE metadata(id INTEGER PRIMARY KEY, metadata_version INTEGER NOT NULL, metadata TEXT NOT NULL);
    CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
      serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL, type_description_hash TEXT NOT NULL);
    CREATE TABLE message_definitions(id INTEGER PRIMARY KEY, topic_type TEXT NOT NULL, encoding TEXT NOT NULL,
      encoded_message_definition TEXT NOT NULL, type_description_hash TEXT NOT NULL);
    CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL,
      data BLOB NOT NULL);
    """
    #: Created by close(), after the messages: building an index once is cheaper than updating it per row.
    INDEX = "CREATE INDEX timestamp_idx ON messages (timestamp ASC)"
    INSERT = "INSERT INTO messages (topic_id, timestamp, data) VALUES(?, ?, ?)"
    #: Rows per statement of a bulk insert. One multi-row INSERT costs far less than as many single-row steps
    #: (16,000 output rows: ~11 ms instead of ~24 ms, measured with sqlite 3.40); 32 rows bind 96 parameters,
    #: well under SQLite's limit (999 before 3.32).
    ROWS_PER_INSERT = 32
    #: SQLite page size of a new file: 64 KiB (SQLite's largest) pages take ~20% less time to fill than 16 KiB and
    #: ~30% less than the default 4 KiB with replay output (fewer page allocations per row; 20,000 rows of 4.7 MB
    #: through :meth:`write_packed`: 18 / 22 / 27 ms, sqlite 3.40); any page size reads the same in rosbag2 and
    #: rosbags.
    PAGE_SIZE = 65536
    INSERT_BLOCK = "INSERT INTO messages (topic_id, timestamp, data) VALUES " + ", ".join(
        ["(?, ?, ?)"] * ROWS_PER_INSERT)

    def __init__(self, directory: Path, distro: str, journal: bool = True):
        self.directory = directory
        self.distro = distro
        self.file = directory / f"{directory.name}.db3"
        self.connection = _open_for_writing(self.file)
        self.connection.execute(f"PRAGMA page_size={self.PAGE_SIZE}")
        if not journal:
            self.connection.execute("PRAGMA journal_mode=OFF")
            self.connection.execute("PRAGMA synchronous=OFF")
        self.connection.execute("BEGIN")  # one transaction for the whole file, committed by close()
        for statement in self.SCHEMA.split(";"):
            if statement.strip():
                self.connection.execute(statement)
        self.connection.execute("INSERT INTO schema(schema_version, ros_distro) VALUES (4, ?)", (distro,))
        self.topics: list[tuple[str, str, str]] = []  # (name, msgtype, rihs01 hash), id = position + 1
        self.msgtypes: set[str] = set()
        self.counts: dict[int, int] = {}
        self.min_stamp = 2**63 - 1
        self.max_stamp = 0

    def add_topic(self, topic: str, msgtype: str, msgdef: str, rihs01: str) -> int:
        if msgtype not in self.msgtypes:
            encoding = "ros2idl" if msgdef.startswith("=" * 80 + "\nIDL: ") else "ros2msg"
            self.connection.execute("INSERT INTO message_definitions (topic_type, encoding, encoded_message_definition,"
                                    " type_description_hash) VALUES(?, ?, ?, ?)", (msgtype, encoding, msgdef, rihs01))
            self.msgtypes.add(msgtype)
        self.topics.append((topic, msgtype, rihs01))
        topic_id = len(self.topics)
        self.connection.execute("INSERT INTO topics VALUES(?, ?, ?, ?, ?, ?)",
                                (topic_id, topic, msgtype, "cdr", _offered_qos_text(offered_qos(topic), 8), rihs01))
        self.counts[topic_id] = 0
        return topic_id

    def write(self, topic_id: int, stamp_ns: int, data) -> None:
        self.connection.execute(self.INSERT, (topic_id, stamp_ns, data))
        self.counts[topic_id] += 1
        self.min_stamp = min(self.min_stamp, stamp_ns)
        self.max_stamp = max(self.max_stamp, stamp_ns)

    def write_many(self, rows: list, counts: Counter, lowest: int, highest: int) -> None:
        """Insert ``rows`` ``(topic_id, stamp_ns, data)`` in order (their ids follow that order)."""
        blocks = len(rows) // self.ROWS_PER_INSERT
        whole = blocks * self.ROWS_PER_INSERT
        if blocks:
            flat = list(chain.from_iterable(rows[:whole]))
            width = 3 * self.ROWS_PER_INSERT
            self.connection.executemany(self.INSERT_BLOCK, [flat[k:k + width] for k in range(0, len(flat), width)])
        if whole < len(rows):
            self.connection.executemany(self.INSERT, rows[whole:])
        for topic_id, count in counts.items():
            self.counts[topic_id] += count
        self.min_stamp = min(self.min_stamp, lowest)
        self.max_stamp = max(self.max_stamp, highest)

    #: Stamps per statement of :meth:`write_packed` (bounds the JSON text and blobs bound at once).
    PACKED_STAMPS = 4096
    #: Whether this SQLite has the JSON functions :meth:`write_packed` uses (built in since 3.38; None: not tried).
    has_json: bool | None = None

    def write_packed(self, stamps: list, topic_ids: list, matrices: list) -> bool:
        """Insert, stamp by stamp, one message of each topic ``topic_ids[j]``: row k of the C-contiguous uint8
        matrix ``matrices[j]`` (one message per row), as :meth:`write_many` would with the rows interleaved so, and
        with the same row ids. One SQL statement per :data:`PACKED_STAMPS` stamps does it all inside SQLite: the
        stamps go in as one JSON array, each topic's messages as one blob cut with ``substr``, so no Python object is
        made per message (a replay writes ~2,000 messages per second of input; 20,000 rows: ~18 ms instead of ~24 ms of
        multi-row inserts with bound rows and their bytes, sqlite 3.40). False,
        with nothing written, when this SQLite has no ``json_each`` (the caller then writes rows)."""
        if self.has_json is False:
            return False
        sizes = [matrix.shape[1] for matrix in matrices]
        width = len(topic_ids)
        topics = ", ".join(f"({j}, {int(topic_id)}, {size})" for j, (topic_id, size) in enumerate(zip(
            topic_ids, sizes, strict=True)))
        blob = "CASE t.column1 " + " ".join(f"WHEN {j} THEN ?{j + 3}" for j in range(width)) + " END"
        # Explicit ids (the next free one + k * width + j): the rowids write_many would give, whatever order
        # SQLite walks the join in.
        statement = (f"INSERT INTO messages (id, topic_id, timestamp, data) SELECT ?1 + s.key * {width} + t.column1, "
                     f"t.column2, s.value, substr({blob}, s.key * t.column3 + 1, t.column3) FROM json_each(?2) AS s "
                     f"CROSS JOIN (VALUES {topics}) AS t")
        for start in range(0, len(stamps), self.PACKED_STAMPS):
            block = stamps[start:start + self.PACKED_STAMPS]
            first_id = sum(self.counts.values()) + 1
            arguments = [first_id, "[" + ",".join(map(str, block)) + "]"]
            # The rows themselves (C-contiguous: a buffer SQLite copies when it binds it), not a bytes copy of them.
            arguments += [matrix[start:start + len(block)] for matrix in matrices]
            try:
                inserted = _changes(self.connection, self.connection.execute(statement, arguments))
            except _SQLITE_ERRORS as error:
                if start or "json_each" not in str(error):
                    raise
                type(self).has_json = False
                return False
            type(self).has_json = True
            if inserted != len(block) * width:
                raise sqlite3.DatabaseError(f"inserted {inserted} rows, expected {len(block) * width}")
            for topic_id in topic_ids:
                self.counts[topic_id] += len(block)
        self.min_stamp = min(self.min_stamp, min(stamps))
        self.max_stamp = max(self.max_stamp, max(stamps))
        return True

    def metadata(self) -> dict:
        """metadata.yaml's ``rosbag2_bagfile_information`` (version 9)."""
        total = sum(self.counts.values())
        start = self.min_stamp if total else 2**63 - 1
        duration = max(0, self.max_stamp - self.min_stamp) if total else 0
        return {
            "version": _BAG_VERSION,
            "storage_identifier": "sqlite3",
            "relative_file_paths": [self.file.name],
            "duration": {"nanoseconds": duration},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": total,
            "topics_with_message_count": [
                {"topic_metadata": {"name": name, "type": msgtype, "serialization_format": "cdr",
                                    "offered_qos_profiles": _offered_qos_text(offered_qos(name), 9),
                                    "type_description_hash": rihs01},
                 "message_count": self.counts[k + 1]}
                for k, (name, msgtype, rihs01) in enumerate(self.topics)],
            "compression_format": "",
            "compression_mode": "",
            "files": [{"path": self.file.name, "starting_time": {"nanoseconds_since_epoch": start},
                       "duration": {"nanoseconds": duration}, "message_count": total}],
            "custom_data": None,
            "ros_distro": self.distro,
        }

    def close(self) -> None:
        """Commit, then write metadata.yaml (the folder is still the writer's partial one: BagWriter moves it into
        place after this)."""
        information = self.metadata()
        text = yaml.dump(information, Dumper=_YAML_DUMPER, default_flow_style=False, sort_keys=False).strip()
        self.connection.execute("INSERT INTO metadata(metadata_version, metadata) VALUES(?, ?)", (_BAG_VERSION, text))
        self.connection.execute(self.INDEX)
        self.connection.execute("COMMIT")
        self.connection.close()
        (self.directory / "metadata.yaml").write_text(yaml.dump(
            {"rosbag2_bagfile_information": information}, Dumper=_YAML_DUMPER, default_flow_style=False,
            sort_keys=False), encoding="utf-8")

    def abort(self) -> None:
        try:
            self.connection.execute("ROLLBACK")
        except _SQLITE_ERRORS:
            pass
        self.connection.close()


#: {(msgtype, its type tree): (message definition, RIHS01 hash)}: generating them takes ~1 ms a type, and every
#: replay makes a typestore of its own (rosbags' ``get_typestore`` returns a new one per call).
_MESSAGE_DEFINITIONS: dict[tuple[str, str], tuple[str, str]] = {}


def _type_tree(typestore, msgtype: str) -> str:
    """The field definitions of ``msgtype`` and of every type it uses, as text: two typestores that agree on it
    generate the same definition and hash for it."""
    fielddefs = typestore.fielddefs
    seen, pending = {}, [msgtype]
    while pending:
        name = pending.pop()
        if name in seen or name not in fielddefs:
            continue
        seen[name] = repr(fielddefs[name])
        stack = [fielddefs[name]]
        while stack:  # the type names nested in the field tuples (NAME fields, arrays and sequences of them)
            item = stack.pop()
            if isinstance(item, str):
                pending.append(item)
            elif isinstance(item, (tuple, list)):
                stack.extend(item)
    return "\n".join(f"{name} {text}" for name, text in sorted(seen.items()))


def _message_definition(typestore, msgtype: str) -> tuple[str, str]:
    key = (msgtype, _type_tree(typestore, msgtype))
    if key not in _MESSAGE_DEFINITIONS:
        _MESSAGE_DEFINITIONS[key] = (typestore.generate_msgdef(msgtype, ros_version=2)[0],
                                     typestore.hash_rihs01(msgtype))
    return _MESSAGE_DEFINITIONS[key]


class BagWriter:
    """Writes ``(topic, stamp_ns, message)`` records to a new bag folder; a context manager.

    A topic is created on its first record with the record's message type, or beforehand with
    :meth:`add_topic`; every later record on the topic must have that type. Refuses to touch an existing path.
    The bag is complete or absent at ``path``: it is written aside (``ros_dofkit.ros.output_files``:
    ``.<name>.partial-<pid>/<name>``) and renamed onto ``path`` by :meth:`close`; :meth:`abort` (and leaving the
    ``with`` block by an exception, KeyboardInterrupt and signals included) removes it instead. A partial bag of
    an earlier process that was killed while writing ``path`` is removed, with a one-line note on stderr.
    ``journal=False`` (sqlite3): no rollback journal and no fsync while writing, for output that the caller
    deletes when writing fails (offline replay); a crash then leaves a damaged file rather than a shorter one.
    """

    def __init__(self, path, storage: str = "sqlite3", distro: str = DEFAULT_DISTRO, typestore=None,
                 journal: bool = True):
        self.path = Path(path)
        self.storage = storage
        plugin = _storage_plugin(storage)
        self.typestore = typestore if typestore is not None else make_typestore(distro)
        self._topic_ids: dict[str, int] = {}
        self._msgtypes: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._open = False
        self._writer = None
        self._file = None
        try:
            self._output = PartialFolder(self.path)
        except FileExistsError:
            raise BagError(f"refusing to overwrite {self.path}: it exists already; choose a new output path") from None
        except OSError as error:
            raise BagError(f"cannot create the bag {self.path}: {error}") from None
        try:
            if storage == "sqlite3" and yaml is not None:
                self._output.path.mkdir(mode=0o755)
                self._file = _Sqlite3File(self._output.path, distro, journal=journal)
            else:
                self._writer = Writer(self._output.path, version=_BAG_VERSION, storage_plugin=plugin)
                self._writer.open()
        except (WriterError, OSError, *_SQLITE_ERRORS) as error:
            self._output.discard()
            raise BagError(f"cannot create the bag {self.path}: {error}") from None
        except BaseException:
            self._output.discard()
            raise
        self._connections: dict[str, object] = {}  # mcap: rosbags' connections
        self._open = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    @property
    def counts(self) -> dict[str, int]:
        """Messages written so far, per topic."""
        return dict(self._counts)

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Declare ``topic`` with message type ``msgtype`` (e.g. ``"sensor_msgs/msg/Imu"``)."""
        self._check_open()
        if not isinstance(topic, str) or not topic.startswith("/"):
            raise BagError(f"a topic name must be an absolute ROS name starting with '/', got {topic!r}")
        if topic in self._msgtypes:
            existing = self._msgtypes[topic]
            if existing != msgtype:
                raise BagError(f"topic {topic} already carries {existing}, cannot also carry {msgtype}")
            return
        if msgtype not in self.typestore.types:
            near = difflib.get_close_matches(msgtype, list(self.typestore.types), n=3)
            raise BagError(f"unknown message type {msgtype!r} (near matches: {near})")
        if self._file is not None:
            self._topic_ids[topic] = self._file.add_topic(topic, msgtype, *_message_definition(self.typestore,
                                                                                                msgtype))
        else:
            connection = self._writer.add_connection(topic, msgtype, typestore=self.typestore,
                                                     offered_qos_profiles=[offered_qos(topic)])
            self._connections[topic] = connection
            self._topic_ids[topic] = connection.id
        self._msgtypes[topic] = msgtype
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
        data = self.typestore.serialize_cdr(message, msgtype)
        if self._file is not None:
            self._file.write(self._topic_ids[topic], stamp_ns, data)
        else:
            self._writer.write(self._connections[topic], stamp_ns, data)
        self._counts[topic] += 1

    def write_raw(self, records: Iterable[tuple[str, int, bytes]]) -> None:
        """Append pre-serialized messages ``(topic, stamp_ns, CDR bytes)``, in the order given.

        Every topic must have been declared with :meth:`add_topic` (the bytes carry no type). The bytes are stored
        as given (e.g. from ``ros_dofkit.ros.cdr``); on sqlite3 the whole batch is one ``executemany``.
        """
        self._check_open()
        ids = self._topic_ids
        try:
            rows = [(ids[topic], stamp, data) for topic, stamp, data in records]
        except KeyError as error:
            raise BagError(f"write_raw: topic {error.args[0]!r} was not declared with add_topic "
                           f"(declared: {sorted(ids)})") from None
        if not rows:
            return
        stamps = [row[1] for row in rows]
        lowest, highest = min(stamps), max(stamps)
        if lowest < 0:
            raise BagError(f"write_raw: stamps must be non-negative integer nanoseconds, got {lowest}")
        per_id = Counter(row[0] for row in rows)
        if self._file is not None:
            self._file.write_many(rows, per_id, int(lowest), int(highest))
        else:
            by_id = {connection.id: connection for connection in self._connections.values()}
            for connection_id, stamp, data in rows:
                self._writer.write(by_id[connection_id], stamp, data)
        topic_of = {topic_id: topic for topic, topic_id in ids.items()}
        for topic_id, count in per_id.items():
            self._counts[topic_of[topic_id]] += count

    def write_streams(self, stamps_ns, streams) -> None:
        """Append pre-serialized messages of several topics that share their stamps: ``streams`` is a list of
        ``(topic, messages)`` with one CDR message per stamp of ``stamps_ns`` each, ``messages`` a list of bytes or
        a uint8 matrix with one message per row (``ros_dofkit.ros.cdr``'s encoders with ``packed=True``); written
        stamp by stamp, the topics in the order given (what :meth:`write_raw` does with the records interleaved
        so). On sqlite3, streams of one message size each are inserted by SQLite from one blob per topic
        (:meth:`_Sqlite3File.write_packed`), without a Python object per message."""
        self._check_open()
        stamps = [int(s) for s in np.asarray(stamps_ns, dtype=np.int64).tolist()]
        unknown = [topic for topic, _ in streams if topic not in self._topic_ids]
        if unknown:
            raise BagError(f"write_streams: topics {unknown} were not declared with add_topic "
                           f"(declared: {sorted(self._topic_ids)})")
        lengths = {topic: len(messages) for topic, messages in streams}
        if any(length != len(stamps) for length in lengths.values()):
            raise BagError(f"write_streams: expected one message per stamp ({len(stamps)}) on every topic, got "
                           f"{lengths}")
        if not stamps or not streams:
            return
        if min(stamps) < 0:
            raise BagError(f"write_streams: stamps must be non-negative integer nanoseconds, got {min(stamps)}")
        ids = [self._topic_ids[topic] for topic, _ in streams]
        if self._file is not None:
            matrices = [_message_matrix(messages) for _, messages in streams]
            if all(matrix is not None for matrix in matrices) and self._file.write_packed(stamps, ids, matrices):
                for topic, _ in streams:
                    self._counts[topic] += len(stamps)
                return
        streams = [(topic, [row.tobytes() for row in messages] if isinstance(messages, np.ndarray) else messages)
                   for topic, messages in streams]
        if self._file is None:
            self.write_raw((topic, stamp, messages[k]) for k, stamp in enumerate(stamps) for topic, messages in streams)
            return
        per_stream = [zip(repeat(topic_id), stamps, messages) for topic_id, (_, messages) in zip(ids, streams,
                                                                                                   strict=True)]
        rows = list(chain.from_iterable(zip(*per_stream, strict=True)))
        self._file.write_many(rows, Counter(dict.fromkeys(ids, len(stamps))), min(stamps), max(stamps))
        for topic, _ in streams:
            self._counts[topic] += len(stamps)

    def write_all(self, records: Iterable[tuple[str, int, object]]) -> dict[str, int]:
        """Write every ``(topic, stamp_ns, message)``; returns the counts per topic."""
        for topic, stamp_ns, message in records:
            self.write(topic, stamp_ns, message)
        return self.counts

    def close(self) -> None:
        """Finish the bag and move it onto :attr:`path` (a second call does nothing)."""
        if self._open:
            self._open = False
            try:
                if self._file is not None:
                    try:
                        self._file.close()
                    except (OSError, *_SQLITE_ERRORS) as error:
                        self._file.abort()
                        raise BagError(f"cannot finish the bag {self.path}: {error}") from None
                else:
                    self._writer.close()
                self._output.commit()
            except FileExistsError as error:
                self._output.discard()
                raise BagError(str(error)) from None
            except BaseException:
                self._output.discard()
                raise

    def abort(self) -> None:
        """Stop writing and remove the unfinished bag: nothing appears at :attr:`path` (after :meth:`close`, the
        finished bag stays)."""
        if self._open:
            self._open = False
            try:
                if self._file is not None:
                    self._file.abort()
                else:
                    self._writer.close()
            except Exception:  # noqa: BLE001 -- the files are removed next, whatever state they are in
                pass
            finally:
                self._output.discard()

    def _check_open(self) -> None:
        if not self._open:
            raise BagError(f"the bag {self.path} is closed")


def _message_matrix(messages) -> np.ndarray | None:
    """``messages`` (a uint8 matrix, one message per row, or a list of bytes) as a C-contiguous uint8 matrix, or
    None when the messages differ in size."""
    if isinstance(messages, np.ndarray):
        if messages.ndim != 2 or messages.dtype != np.uint8:
            raise BagError(f"expected messages as a uint8 matrix (one per row), got {messages.dtype} "
                           f"{messages.shape}")
        return np.ascontiguousarray(messages)
    size = len(messages[0])
    if any(len(message) != size for message in messages):
        return None
    return np.frombuffer(b"".join(messages), dtype=np.uint8).reshape(len(messages), size)


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
        connections = _select_connections(path, connections, topics)
        for connection in connections:
            if connection.msgtype not in typestore.types and connection.msgdef.data:
                typestore.register(get_types_from_msg(connection.msgdef.data, connection.msgtype))
        messages = reader.messages(connections=connections)
        previous = None
        while True:
            try:
                connection, stamp_ns, raw = next(messages)
                message = _deserialize(typestore, raw, connection.msgtype)
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


def _deserialize(typestore, raw, msgtype: str):
    """rosbags' message object of ``raw``. A JointState that rosbags rejects for its size is read by
    ``cdr.joint_state_message`` when it ends with the unwritten bytes Fast CDR leaves after empty sequences (bags
    written with rclpy's ``serialize_message`` have them); anything else raises rosbags' error."""
    try:
        return typestore.deserialize_cdr(raw, msgtype)
    except SerdeError:
        if msgtype != "sensor_msgs/msg/JointState":
            raise
        try:
            return joint_state_message(raw, typestore)
        except (CdrLayoutError, struct.error, IndexError, UnicodeDecodeError):
            pass
        raise


class RawMessages(NamedTuple):
    """A bag's serialized messages in stamp order: parallel lists of topic, bag stamp (ns) and CDR bytes, and
    ``{topic: msgtype}``. ``stamps_ns`` may be None where the reader was asked not to read them
    (``iter_raw(stamps=False)``). ``topic_index`` (optional): the topics again, as ``(index (n,) int64, names)``
    with ``topics[k] == names[index[k]]``, for a bulk reader that groups messages by topic with NumPy (None where
    the reader does not give it)."""

    topics: list
    stamps_ns: np.ndarray | None
    data: list
    msgtypes: dict
    topic_index: tuple | None = None


def _ordered_query(ids: list, stamps: bool = True) -> str:
    # (timestamp, rowid) is the order of the timestamp index: equal stamps stay in recording order, and SQLite walks
    # the index instead of sorting (a bag without the index is sorted by SQLite, on disk if need be).
    columns = "topic_id, timestamp, data" if stamps else "topic_id, data"
    return (f"SELECT {columns} FROM messages WHERE topic_id IN ({','.join('?' * len(ids))}) "
            "ORDER BY timestamp, id")


def _direct_sqlite(reader, connections) -> tuple | None:
    """``(database connection, {topic id: topic})`` of the connections, for reading straight from the database of
    a directory bag with a single uncompressed sqlite3 file; None for any other bag (the caller then iterates
    rosbags' reader)."""
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
    return dbconn, {c.id: c.topic for c in storage.connections if (c.topic, c.msgtype) in wanted}


_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)


def _rows_chunks(cursor, topic_of: dict, msgtypes: dict, window: int | None,
                 stamps: bool = True) -> Iterator[RawMessages]:
    """RawMessages of at most ``window`` rows (all at once when None) from a cursor over (topic id, stamp, bytes),
    or (topic id, bytes) when not ``stamps`` (sqlite3's or apsw's cursor: any iterable of rows), with their
    ``topic_index``."""
    ids = np.array(sorted(topic_of), dtype=np.int64)  # the database's topic ids; their index is a row's topic index
    names = tuple(topic_of[i] for i in ids.tolist())
    name_of = np.array(names, dtype=object)  # names[index] for a window's rows at once
    while True:
        rows = list(cursor if window is None else islice(cursor, window))
        if not rows:
            return
        index = np.searchsorted(ids, np.fromiter(map(_FIRST, rows), dtype=np.int64, count=len(rows)))
        yield RawMessages(name_of[index].tolist(),
                          np.fromiter(map(_SECOND, rows), dtype=np.int64, count=len(rows)) if stamps else None,
                          list(map(_THIRD if stamps else _SECOND, rows)), msgtypes, (index, names))
        if window is None:
            return


def _plain_bag(path: Path) -> tuple[str, Path, dict] | None:
    """``(storage, storage file, {topic: (msgtype, message count)})`` of a directory bag with one sqlite3 or mcap
    file, no bag-level compression and a metadata.yaml this module reads itself; None for anything else (rosbags
    then reads it and reports its problems)."""
    if yaml is None:
        return None
    metadata = path / "metadata.yaml"
    try:
        information = yaml.load(metadata.read_text(encoding="utf-8"), Loader=_YAML_LOADER)[
            "rosbag2_bagfile_information"]
        files = information["relative_file_paths"]
        storage = information["storage_identifier"]
        if (information["version"] not in _DIRECT_READ_VERSIONS or storage not in ("sqlite3", "mcap")
                or information.get("compression_mode") or len(files) != 1):
            return None
        topics = {}
        for entry in information["topics_with_message_count"]:
            topic = entry["topic_metadata"]
            if topic["name"] in topics:  # one name, several types or QoS: rosbags' reader sorts that out
                return None
            topics[topic["name"]] = (topic["type"], int(entry["message_count"]))
    except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError, *_YAML_ERRORS):
        return None
    storage_file = path / files[0]
    return (storage, storage_file, topics) if storage_file.is_file() else None


def _checked_topics(path: Path, topics, present) -> list:
    """``topics`` as a list, after checking that every one is in the bag (BagError naming the missing ones)."""
    wanted = list(topics)
    unknown = [t for t in wanted if t not in present]
    if unknown:
        raise BagError(f"topics {unknown} are not in {path}; it has {sorted(present)}")
    return wanted


def _select_connections(path: Path, connections: list, topics) -> list:
    """The connections of ``topics`` (all when None); BagError if one of them is not in the bag."""
    if topics is None:
        return connections
    wanted = _checked_topics(path, topics, {c.topic for c in connections})
    return [c for c in connections if c.topic in wanted]


def _selected_types(path: Path, available: dict, topics) -> dict:
    """``{topic: msgtype}`` of the topics :func:`iter_raw` is asked for, out of a plain bag's ``available``."""
    if callable(topics):
        topics = topics(dict(available))
    wanted = list(available) if topics is None else _checked_topics(path, topics, available)
    return {t: available[t][0] for t in available if t in wanted}


def _open_read_only(database: Path):
    """The database opened read-only: through apsw when installed (rosbags' sqlite3 extra, a runtime requirement:
    its rows come ~30% faster than the standard library's, 8 vs 12 ms for the 20,842 rows of 10 s of demo input),
    else the standard library's sqlite3. Both connections offer execute(), iterable cursors and close()."""
    if apsw is not None:
        return apsw.Connection(str(database), flags=apsw.SQLITE_OPEN_READONLY)
    return sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)


def _iter_plain_sqlite3(path: Path, database: Path, available: dict, topics, window,
                        stamps: bool = True) -> Iterator[RawMessages]:
    """:func:`iter_raw` of a sqlite3 bag :func:`_plain_bag` accepted: the database opened read-only, one query."""
    msgtypes = _selected_types(path, available, topics)
    try:
        connection = _open_read_only(database)
    except _SQLITE_ERRORS as error:
        raise BagError(f"cannot read the bag {path} (corrupt storage): {error}") from None
    try:
        # The database numbers its topics itself: match them by name and type, as rosbags' reader does.
        table = connection.execute("SELECT id, name, type FROM topics").fetchall()
        topic_of = {topic_id: name for topic_id, name, msgtype in table if msgtypes.get(name) == msgtype}
        if topic_of:
            cursor = connection.execute(_ordered_query(list(topic_of), stamps), list(topic_of))
            yield from _rows_chunks(cursor, topic_of, msgtypes, window, stamps)
    except _SQLITE_ERRORS as error:
        raise BagError(f"corrupt bag {path}: {error}") from None
    finally:
        connection.close()


def _iter_plain_mcap(path: Path, file: Path, layout, available: dict, topics, window) -> Iterator[RawMessages]:
    """:func:`iter_raw` of an mcap bag in the layout ``mcap_chunks`` reads (what ``ros2 bag record`` writes)."""
    msgtypes = _selected_types(path, available, topics)
    # The file numbers its channels itself: match them by topic and type, as rosbags' reader does.
    channels = {channel_id: topic for channel_id, (topic, msgtype) in layout.channels.items()
                if msgtypes.get(topic) == msgtype}
    if not channels:
        return
    try:
        for names, stamps, datas in mcap_chunks.iter_messages(file, layout, channels, window):
            yield RawMessages(names, stamps, datas, msgtypes)
    except (OSError, mcap_chunks.McapError) as error:
        raise BagError(f"corrupt bag {path}: {error}") from None


def _iter_rosbags(path: Path, topics, window) -> Iterator[RawMessages]:
    """:func:`iter_raw` through rosbags' reader (mcap, split or compressed bags)."""
    reader = _open_reader(path)
    try:
        connections = list(reader.connections)
        if callable(topics):
            topics = topics({c.topic: (c.msgtype, c.msgcount) for c in connections})
        connections = _select_connections(path, connections, topics)
        msgtypes = {c.topic: c.msgtype for c in connections}
        if not connections:
            return
        try:
            direct = _direct_sqlite(reader, connections)
            if direct is not None:
                dbconn, topic_of = direct
                if topic_of:
                    cursor = dbconn.execute(_ordered_query(list(topic_of)), list(topic_of))
                    yield from _rows_chunks(cursor, topic_of, msgtypes, window)
                return
            names, stamps, data = [], [], []
            previous = None
            for connection, stamp_ns, raw in reader.messages(connections=connections):
                if previous is not None and stamp_ns < previous:
                    raise BagError(f"{path}: stamp {stamp_ns} ns on {connection.topic} comes after {previous} ns; "
                                   "the bag's storage files overlap in time, so its messages cannot be streamed in "
                                   "order")
                previous = stamp_ns
                names.append(connection.topic)
                stamps.append(stamp_ns)
                data.append(raw)
                if len(names) == window:
                    yield RawMessages(names, np.asarray(stamps, dtype=np.int64), data, msgtypes)
                    names, stamps, data = [], [], []
            if names:
                yield RawMessages(names, np.asarray(stamps, dtype=np.int64), data, msgtypes)
        except _STORAGE_ERRORS as error:
            raise BagError(f"corrupt bag {path}: {error}") from None
    finally:
        reader.close()


def iter_raw(path, topics=None, window: int | None = None, stamps: bool = True) -> Iterator[RawMessages]:
    """The messages of ``topics`` in stamp order, undecoded, as consecutive :class:`RawMessages` of at most
    ``window`` messages each (``None``: all in one), streamed from storage: memory is bounded by the window, not by
    the bag. Errors are those of :func:`read_bag` (:class:`BagError` for unknown topics, damaged storage and split
    files that overlap in time), raised when reading reaches them; a selection without messages yields nothing.

    ``topics``: None (all), an iterable of topic names, or a function called with the bag's
    ``{topic: (msgtype, message count)}`` that returns them (and may raise, e.g. after checking types), so the bag
    is opened once. A plain sqlite3 bag (one uncompressed file) is read directly (:func:`_iter_plain_sqlite3`), so
    is an mcap file in the layout ``ros2 bag record`` writes (``ros_dofkit.ros.mcap_chunks``); any other through
    rosbags' reader. Order: stamp, then recording order (sqlite3: ``ORDER BY timestamp, id``).

    ``stamps=False``: the caller does not need the bag stamps (offline replay reads the header stamps), so a plain
    sqlite3 bag is read without them (~15% less time) and its windows have ``stamps_ns`` None; other bags still
    give them.
    """
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ValueError(f"window must be a positive number of messages or None, got {window!r}")
    path = Path(path)
    if not path.exists():
        raise BagError(f"bag not found: {path}")
    plain = _plain_bag(path) if path.is_dir() else None
    if plain is not None and plain[0] == "sqlite3":
        return _iter_plain_sqlite3(path, plain[1], plain[2], topics, window, stamps)
    if plain is not None:
        try:
            layout = mcap_chunks.plain_layout(plain[1])
        except (OSError, mcap_chunks.McapError) as error:
            raise BagError(f"corrupt bag {path}: {error}") from None
        if layout is not None:
            return _iter_plain_mcap(path, plain[1], layout, plain[2], topics, window)
    return _iter_rosbags(path, topics, window)


def read_raw(path, topics=None) -> RawMessages:
    """All messages of ``topics`` in stamp order, undecoded: :func:`iter_raw` in one piece, the bulk counterpart of
    :func:`read_bag` (same order, same errors)."""
    msgtypes: dict = {}

    def select(available: dict) -> list:
        chosen = topics(available) if callable(topics) else topics
        wanted = list(available) if chosen is None else _checked_topics(Path(path), chosen, available)
        msgtypes.update({t: available[t][0] for t in wanted})
        return wanted

    with closing(iter_raw(path, select)) as chunks:
        whole = next(chunks, None)
    return whole if whole is not None else RawMessages([], np.zeros(0, dtype=np.int64), [], msgtypes)
