"""Tests of ros_dofkit.ros.bag_io: write/read round trips (sqlite3, mcap), stamp order, refusals and errors."""

import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from ros_dofkit.ros.bag_io import BagError, BagWriter, bag_topics, make_typestore, read_bag, read_raw, write_bag

STORAGES = ["sqlite3", "mcap"]


@pytest.fixture(scope="module")
def typestore():
    return make_typestore("jazzy")


def header(ts, stamp_ns, frame_id):
    Time = ts.types["builtin_interfaces/msg/Time"]
    return ts.types["std_msgs/msg/Header"](
        stamp=Time(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9), frame_id=frame_id)


def joint_state(ts, stamp_ns, positions):
    return ts.types["sensor_msgs/msg/JointState"](
        header=header(ts, stamp_ns, ""), name=[f"j{i}" for i in range(len(positions))],
        position=np.asarray(positions, dtype=float), velocity=np.zeros(0), effort=np.zeros(0))


def tf_message(ts, stamp_ns, x):
    T = ts.types
    transform = T["geometry_msgs/msg/TransformStamped"](
        header=header(ts, stamp_ns, "world"), child_frame_id="pelvis",
        transform=T["geometry_msgs/msg/Transform"](
            translation=T["geometry_msgs/msg/Vector3"](x=x, y=0.0, z=1.0),
            rotation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)))
    return T["tf2_msgs/msg/TFMessage"](transforms=[transform])


def odometry(ts, stamp_ns, vx):
    T = ts.types
    pose = T["geometry_msgs/msg/PoseWithCovariance"](
        pose=T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](x=1.0, y=2.0, z=3.0),
                                         orientation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)),
        covariance=np.arange(36, dtype=float))
    twist = T["geometry_msgs/msg/TwistWithCovariance"](
        twist=T["geometry_msgs/msg/Twist"](linear=T["geometry_msgs/msg/Vector3"](x=vx, y=0.0, z=0.0),
                                           angular=T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.5)),
        covariance=np.zeros(36))
    return T["nav_msgs/msg/Odometry"](header=header(ts, stamp_ns, "odom"), child_frame_id="pelvis", pose=pose,
                                      twist=twist)


@pytest.mark.parametrize("storage", STORAGES)
def test_round_trip_of_several_message_types_in_stamp_order(tmp_path, typestore, storage):
    # Written out of stamp order on purpose; read back sorted by stamp.
    records = [
        ("/joint_states", 3_000, joint_state(typestore, 3_000, [0.3, -0.1])),
        ("/tf", 1_000, tf_message(typestore, 1_000, 0.25)),
        ("/odom", 2_000, odometry(typestore, 2_000, 1.5)),
        ("/joint_states", 1_500, joint_state(typestore, 1_500, [0.1, 0.2])),
        ("/tf", 5_000_000_123, tf_message(typestore, 5_000_000_123, 0.5)),
    ]
    counts = write_bag(tmp_path / "bag", records, storage=storage)
    assert counts == {"/joint_states": 2, "/tf": 2, "/odom": 1}
    back = list(read_bag(tmp_path / "bag"))
    assert [r.stamp_ns for r in back] == [1_000, 1_500, 2_000, 3_000, 5_000_000_123]
    assert [r.topic for r in back] == ["/tf", "/joint_states", "/odom", "/joint_states", "/tf"]
    np.testing.assert_array_equal(back[1].message.position, [0.1, 0.2])
    assert back[1].message.name == ["j0", "j1"]
    assert back[0].message.transforms[0].transform.translation.x == 0.25
    assert back[2].msgtype == "nav_msgs/msg/Odometry"
    np.testing.assert_array_equal(back[2].message.pose.covariance, np.arange(36))
    assert back[2].message.twist.twist.angular.z == 0.5
    assert back[4].message.transforms[0].header.stamp.sec == 5
    assert back[4].message.transforms[0].header.stamp.nanosec == 123
    assert bag_topics(tmp_path / "bag") == {
        "/joint_states": ("sensor_msgs/msg/JointState", 2),
        "/tf": ("tf2_msgs/msg/TFMessage", 2),
        "/odom": ("nav_msgs/msg/Odometry", 1),
    }


@pytest.mark.parametrize("storage", STORAGES)
def test_bag_is_readable_by_rosbags_directly(tmp_path, typestore, storage):
    """An independent reader (rosbags' own Reader + CDR deserializer) sees the same data."""
    with BagWriter(tmp_path / "bag", storage=storage) as bag:
        bag.write("/joint_states", 42, joint_state(typestore, 42, [1.25]))
    with Reader(tmp_path / "bag") as reader:
        (connection, stamp, raw), = list(reader.messages())
        assert (connection.topic, connection.msgtype, stamp) == ("/joint_states", "sensor_msgs/msg/JointState", 42)
        message = typestore.deserialize_cdr(raw, connection.msgtype)
    np.testing.assert_array_equal(message.position, [1.25])
    expected_file = "bag.mcap" if storage == "mcap" else "bag.db3"
    assert (tmp_path / "bag" / expected_file).is_file()


def test_topic_filter_and_unknown_topic(tmp_path, typestore):
    records = [("/a", 1, joint_state(typestore, 1, [1.0])), ("/b", 2, joint_state(typestore, 2, [2.0]))]
    write_bag(tmp_path / "bag", records)
    assert [r.topic for r in read_bag(tmp_path / "bag", topics=["/b"])] == ["/b"]
    with pytest.raises(BagError, match=r"\['/c'\] are not in .* it has \['/a', '/b'\]"):
        list(read_bag(tmp_path / "bag", topics=["/c"]))


def test_refuses_to_overwrite(tmp_path):
    (tmp_path / "bag").mkdir()
    with pytest.raises(BagError, match="refusing to overwrite"):
        BagWriter(tmp_path / "bag")
    assert list((tmp_path / "bag").iterdir()) == []


def test_missing_and_corrupt_bags(tmp_path, typestore):
    with pytest.raises(BagError, match="bag not found"):
        list(read_bag(tmp_path / "nope"))
    with pytest.raises(BagError, match="bag not found"):
        bag_topics(tmp_path / "nope")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "metadata.yaml").write_text("rosbag2_bagfile_information: [")
    with pytest.raises(BagError, match="cannot read the bag"):
        list(read_bag(broken))
    for storage, extension in (("mcap", "mcap"), ("sqlite3", "db3")):
        path = tmp_path / f"truncated_{storage}"
        write_bag(path, [("/a", k, joint_state(typestore, k, [float(k)])) for k in range(50)], storage=storage)
        (storage_file,) = path.glob(f"*.{extension}")
        data = storage_file.read_bytes()
        storage_file.write_bytes(data[: len(data) // 3])
        with pytest.raises(BagError, match="bag"):
            list(read_bag(path))
        path = tmp_path / f"garbled_{storage}"
        write_bag(path, [("/a", k, joint_state(typestore, k, [float(k)])) for k in range(200)], storage=storage)
        (storage_file,) = path.glob(f"*.{extension}")
        data = bytearray(storage_file.read_bytes())
        # The middle half: whole storage pages / records, their structure included (garbling only message bytes or
        # a page's free space is undetectable, since neither format checksums them by default).
        data[len(data) // 4 : 3 * len(data) // 4] = b"\xab" * (3 * len(data) // 4 - len(data) // 4)
        storage_file.write_bytes(bytes(data))
        with pytest.raises(BagError, match="bag"):
            list(read_bag(path))


def test_writer_rejects_bad_records(tmp_path, typestore):
    with BagWriter(tmp_path / "bag") as bag:
        with pytest.raises(BagError, match="rosbags message object"):
            bag.write("/a", 1, {"position": [1.0]})
        with pytest.raises(BagError, match="non-negative integer"):
            bag.write("/a", -5, joint_state(typestore, 0, [1.0]))
        with pytest.raises(BagError, match="non-negative integer"):
            bag.write("/a", 1.5, joint_state(typestore, 0, [1.0]))
        with pytest.raises(BagError, match="absolute ROS name"):
            bag.write("a", 1, joint_state(typestore, 0, [1.0]))
        bag.write("/a", 1, joint_state(typestore, 1, [1.0]))
        with pytest.raises(BagError, match="already carries sensor_msgs/msg/JointState"):
            bag.write("/a", 2, tf_message(typestore, 2, 0.0))
        with pytest.raises(BagError, match=r"unknown message type 'sensor_msgs/msg/Imus'.*sensor_msgs/msg/Imu"):
            bag.add_topic("/b", "sensor_msgs/msg/Imus")
        assert bag.counts == {"/a": 1}
    with pytest.raises(BagError, match="closed"):
        bag.write("/a", 3, joint_state(typestore, 3, [1.0]))


def test_unknown_storage_and_distro(tmp_path):
    with pytest.raises(BagError, match=r"unknown bag storage 'rosbag'.*\['mcap', 'sqlite3'\]"):
        BagWriter(tmp_path / "bag", storage="rosbag")
    with pytest.raises(BagError, match="unknown ROS 2 distribution 'rolling'"):
        make_typestore("rolling")
    assert not (tmp_path / "bag").exists()


@pytest.mark.parametrize("storage", STORAGES)
def test_raw_bulk_write_and_read_round_trip(tmp_path, typestore, storage):
    """write_raw stores pre-serialized bytes as given (counts and metadata kept); read_raw returns them in the
    order read_bag decodes them, and rosbags reads the bag."""
    records = []
    for k in range(40):
        stamp = 1_000_000_000 + 5_000_000 * k
        records.append(("/joint_states", stamp, joint_state(typestore, stamp, [0.1 * k, -0.2 * k])))
        if k % 3 == 0:
            records.append(("/tf", stamp, tf_message(typestore, stamp, 0.5 * k)))
    path = tmp_path / "raw"
    with BagWriter(path, storage=storage, typestore=typestore) as bag:
        bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        bag.add_topic("/tf", "tf2_msgs/msg/TFMessage")
        raw = [(t, s, bytes(typestore.serialize_cdr(m, m.__msgtype__))) for t, s, m in records]
        bag.write_raw(raw[:10])
        bag.write_raw(iter(raw[10:]))
        bag.write_raw([])
        assert bag.counts == {"/joint_states": 40, "/tf": 14}
        with pytest.raises(BagError, match="not declared"):
            bag.write_raw([("/other", 5, b"\x00\x01\x00\x00")])
        with pytest.raises(BagError, match="non-negative"):
            bag.write_raw([("/tf", -5, raw[1][2])])
    assert bag_topics(path) == {"/joint_states": ("sensor_msgs/msg/JointState", 40),
                                "/tf": ("tf2_msgs/msg/TFMessage", 14)}
    decoded = list(read_bag(path, typestore=typestore))
    got = read_raw(path)
    assert got.topics == [r.topic for r in decoded]
    if storage == "sqlite3":  # a plain sqlite3 bag: the reader's topic index, the same topics
        index, names = got.topic_index
        assert [names[i] for i in index.tolist()] == got.topics and sorted(names) == ["/joint_states", "/tf"]
    assert got.stamps_ns.tolist() == [r.stamp_ns for r in decoded]
    assert got.msgtypes == {"/joint_states": "sensor_msgs/msg/JointState", "/tf": "tf2_msgs/msg/TFMessage"}
    by_stamp = {(t, s): d for t, s, d in raw}
    keys = zip(got.topics, got.stamps_ns.tolist(), strict=True)
    assert [bytes(d) for d in got.data] == [by_stamp[key] for key in keys]
    only_tf = read_raw(path, topics=["/tf"])
    assert set(only_tf.topics) == {"/tf"} and len(only_tf.data) == 14
    with pytest.raises(BagError, match="not in"):
        read_raw(path, topics=["/nope"])
    with Reader(path) as reader:
        assert reader.duration == 39 * 5_000_000 + 1


def test_garbled_message_body_is_a_bag_error(tmp_path, typestore):
    """A message whose bytes do not decode (rosbags' SerdeError) is reported as a BagError, not a traceback."""
    path = tmp_path / "garbled"
    with BagWriter(path, typestore=typestore) as bag:
        bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
        bag.write_raw([("/joint_states", 5, b"\x00\x01\x00\x00" + b"\xff" * 9)])
    with pytest.raises(BagError, match="corrupt bag"):
        list(read_bag(path, typestore=typestore))
    with pytest.raises(BagError, match="missing"):
        read_raw(tmp_path / "missing")


def test_read_raw_matches_topics_by_name_when_the_database_numbers_them_differently(tmp_path, typestore):
    """The sqlite3 fast path queries the database directly; its topic ids need not be metadata.yaml's order."""
    import sqlite3

    path = tmp_path / "renumbered"
    with BagWriter(path, typestore=typestore) as bag:
        for k in range(6):
            bag.write("/a", 100 + k, joint_state(typestore, 100 + k, [float(k)]))
            bag.write("/b", 100 + k, tf_message(typestore, 100 + k, float(k)))
    database = sqlite3.connect(next(path.glob("*.db3")))
    database.execute("UPDATE topics SET id = 12 - id")
    database.execute("UPDATE messages SET topic_id = 12 - topic_id")
    database.commit()
    database.close()
    decoded = list(read_bag(path, typestore=typestore))
    raw = read_raw(path, topics=["/b"])
    assert raw.topics == ["/b"] * 6
    assert [typestore.deserialize_cdr(d, "tf2_msgs/msg/TFMessage") for d in raw.data] == [
        r.message for r in decoded if r.topic == "/b"]
    selected = read_raw(path, topics=lambda info: [t for t, (msgtype, _) in info.items()
                                                   if msgtype.startswith("sensor")])
    assert selected.topics == ["/a"] * 6 and selected.msgtypes == {"/a": "sensor_msgs/msg/JointState"}


# ---------------------------------------------------------------------------------------------- sqlite3 written here
def _records(ts):
    """Records of three types, out of stamp order, with equal stamps across topics."""
    records = []
    for k in (3, 0, 2, 1, 4):
        stamp = 1_000_000 + 10_000 * k
        records += [("/joint_states", stamp, joint_state(ts, stamp, [0.1 * k, -0.2])),
                    ("/tf", stamp, tf_message(ts, stamp, 0.5 * k)),
                    ("/odom", stamp + 7, odometry(ts, stamp + 7, 1.0 + k))]
    return records


def write_with_rosbags(path, records, typestore, version: int) -> None:
    """The bag rosbags' own writer makes of ``records`` (metadata ``version``), with the offered QoS ours records."""
    from rosbags.rosbag2 import Writer

    from ros_dofkit.ros.bag_io import offered_qos

    with Writer(path, version=version) as writer:
        connections = {}
        for topic, stamp, message in records:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, message.__msgtype__, typestore=typestore,
                                                           offered_qos_profiles=[offered_qos(topic)])
            writer.write(connections[topic], stamp, typestore.serialize_cdr(message, message.__msgtype__))


def _rosbags_view(path):
    """Everything rosbags' Reader makes of a bag: connections, metadata figures, messages in order."""
    with Reader(path) as reader:
        connections = sorted((c.topic, c.msgtype, c.msgcount, c.digest, c.msgdef.data, c.ext.serialization_format,
                              tuple(c.ext.offered_qos_profiles)) for c in reader.connections)
        figures = (reader.duration, reader.start_time, reader.end_time, reader.message_count,
                   reader.compression_mode, reader.compression_format)
        messages = [(c.topic, stamp, bytes(data)) for c, stamp, data in reader.messages()]
    return connections, figures, messages


def test_sqlite3_bags_written_here_read_in_rosbags_as_rosbags_own(tmp_path, typestore):
    """The sqlite3 writer of this module (schema 4, metadata version 9) against rosbags' Writer given the same
    records: rosbags' Reader sees the same connections (types, hashes, definitions), figures and messages, and the
    databases have the same tables and index."""
    import sqlite3


    records = _records(typestore)
    ours = tmp_path / "ours"
    write_bag(ours, records, storage="sqlite3")
    theirs = tmp_path / "theirs"
    write_with_rosbags(theirs, records, typestore, version=9)
    assert _rosbags_view(ours) == _rosbags_view(theirs)

    def schema(path):
        database = sqlite3.connect(next(path.glob("*.db3")))
        try:
            entries = database.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
            return sorted((t, n, tb, " ".join(sql.split()).replace("( ", "(").replace(" )", ")")) for t, n, tb, sql
                          in entries)
        finally:
            database.close()

    assert schema(ours) == schema(theirs)


def test_each_bag_stores_the_definition_of_its_own_typestore_for_a_shared_type_name(tmp_path):
    """Message definitions and hashes are cached across typestores (every replay makes a new one) by the type's
    whole field tree: two typestores that define one type name differently each get their own definition and
    RIHS01 hash in the bag (as rosbags generates them), and a third that agrees with the first gets the first's."""
    from rosbags.typesys import get_types_from_msg

    stores = []
    for text in ("float64 x\nstd_msgs/Header header", "int32 y", "float64 x\nstd_msgs/Header header"):
        store = make_typestore("jazzy")
        store.register(get_types_from_msg(text, "dofkit_test_msgs/msg/Thing"))
        stores.append(store)
    for k, store in enumerate(stores):
        with BagWriter(tmp_path / f"bag{k}", typestore=store) as bag:
            bag.add_topic("/thing", "dofkit_test_msgs/msg/Thing")
        with Reader(tmp_path / f"bag{k}") as reader:
            (connection,) = reader.connections
            assert connection.msgdef.data == store.generate_msgdef("dofkit_test_msgs/msg/Thing", ros_version=2)[0]
            assert connection.digest == store.hash_rihs01("dofkit_test_msgs/msg/Thing")
    definitions = [store.generate_msgdef("dofkit_test_msgs/msg/Thing", ros_version=2)[0] for store in stores]
    assert definitions[0] != definitions[1] and definitions[0] == definitions[2]


@pytest.mark.parametrize("driver", ["apsw", "sqlite3"])
def test_read_raw_direct_path_equals_rosbags_reader_on_bags_of_both_writers(tmp_path, typestore, monkeypatch, driver):
    """read_raw reads plain sqlite3 bags from their metadata.yaml and database itself: same topics, stamps, bytes
    and order (ties in stamp keep the order written) as rosbags' Reader, for bags of this writer and of rosbags',
    through apsw (installed with rosbags) and through the standard library's sqlite3 when apsw is absent."""
    from ros_dofkit.ros import bag_io

    if driver == "sqlite3":
        monkeypatch.setattr(bag_io, "apsw", None)
    else:
        assert bag_io.apsw is not None, "apsw is a runtime requirement (requirements/runtime.txt)"

    records = _records(typestore)
    ours = tmp_path / "ours"
    write_bag(ours, records, storage="sqlite3")
    theirs = tmp_path / "theirs"
    write_with_rosbags(theirs, records, typestore, version=8)  # another metadata version, too
    for path in (ours, theirs):
        _, _, expected = _rosbags_view(path)
        got = read_raw(path)
        assert list(zip(got.topics, got.stamps_ns.tolist(), [bytes(d) for d in got.data], strict=True)) == expected
        assert got.msgtypes == {"/joint_states": "sensor_msgs/msg/JointState", "/tf": "tf2_msgs/msg/TFMessage",
                                "/odom": "nav_msgs/msg/Odometry"}
        some = read_raw(path, topics=["/odom", "/tf"])
        assert list(zip(some.topics, some.stamps_ns.tolist(), [bytes(d) for d in some.data], strict=True)) == [
            entry for entry in expected if entry[0] != "/joint_states"]


@pytest.mark.parametrize("layout", ["ours", "theirs", "mcap"])
def test_iter_raw_windows_concatenate_to_read_raw(tmp_path, typestore, layout):
    """iter_raw streams a bag in consecutive windows of at most `window` messages whose concatenation is read_raw's
    result (same topics, stamps, bytes, order), on each read path: this module's sqlite3 reader, a database read
    through rosbags' connection (metadata version 8), rosbags' reader (mcap)."""

    from ros_dofkit.ros.bag_io import iter_raw

    records = _records(typestore) * 3
    path = tmp_path / layout
    if layout == "theirs":
        write_with_rosbags(path, records, typestore, version=8)
    else:
        write_bag(path, records, storage="mcap" if layout == "mcap" else "sqlite3")
    whole = read_raw(path, topics=["/tf", "/odom"])
    assert len(whole.topics) == 30
    for window in (1, 7, 30, 1000, None):
        chunks = list(iter_raw(path, topics=["/tf", "/odom"], window=window))
        assert [len(c.topics) for c in chunks] == ([30] if window is None or window >= 30 else
                                                   [window] * (30 // window) + ([30 % window] if 30 % window else []))
        assert [t for c in chunks for t in c.topics] == whole.topics
        assert np.concatenate([c.stamps_ns for c in chunks]).tolist() == whole.stamps_ns.tolist()
        assert [bytes(d) for c in chunks for d in c.data] == [bytes(d) for d in whole.data]
        assert all(c.msgtypes == whole.msgtypes for c in chunks)
        unstamped = list(iter_raw(path, topics=["/tf", "/odom"], window=window, stamps=False))
        assert [t for c in unstamped for t in c.topics] == whole.topics
        assert [bytes(d) for c in unstamped for d in c.data] == [bytes(d) for d in whole.data]
        # A plain sqlite3 bag is then read without its stamps; other layouts still give them.
        assert all((c.stamps_ns is None) == (layout != "mcap") for c in unstamped)
    for window in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="window must be a positive number of messages"):
            iter_raw(path, window=window)
    with pytest.raises(BagError, match="not in"):
        next(iter_raw(path, topics=["/nope"], window=4))
    assert list(iter_raw(path, topics=lambda available: [], window=4)) == []


def test_write_streams_equals_interleaved_write_raw_and_journal_off_changes_nothing_read(tmp_path, typestore):
    stamps = [5_000, 5_000, 6_000, 9_000]
    joint_states = [typestore.serialize_cdr(joint_state(typestore, s, [float(k)]), "sensor_msgs/msg/JointState")
                    for k, s in enumerate(stamps)]
    tfs = [typestore.serialize_cdr(tf_message(typestore, s, float(k)), "tf2_msgs/msg/TFMessage")
           for k, s in enumerate(stamps)]
    views = []
    for name, journal, streams in (("raw", True, False), ("streams", False, True)):
        with BagWriter(tmp_path / name, typestore=typestore, journal=journal) as bag:
            bag.add_topic("/js", "sensor_msgs/msg/JointState")
            bag.add_topic("/tf", "tf2_msgs/msg/TFMessage")
            if streams:
                bag.write_streams(np.array(stamps), [("/js", joint_states), ("/tf", tfs)])
            else:
                bag.write_raw((topic, s, messages[k]) for k, s in enumerate(stamps)
                              for topic, messages in (("/js", joint_states), ("/tf", tfs)))
            assert bag.counts == {"/js": 4, "/tf": 4}
        views.append(_rosbags_view(tmp_path / name))
    assert views[0] == views[1]
    assert [m[0] for m in views[1][2]] == ["/js", "/tf"] * 4  # stamp by stamp, topics in the order given
    with BagWriter(tmp_path / "bad", typestore=typestore) as bag:
        bag.add_topic("/js", "sensor_msgs/msg/JointState")
        with pytest.raises(BagError, match=r"topics \['/tf'\] were not declared"):
            bag.write_streams(stamps, [("/tf", tfs)])
        with pytest.raises(BagError, match="one message per stamp"):
            bag.write_streams(stamps[:3], [("/js", joint_states)])


@pytest.mark.parametrize("mode", ["matrices", "lists", "small_statements", "without_json", "unequal_sizes"])
def test_packed_streams_give_the_rows_of_interleaved_write_raw(tmp_path, typestore, monkeypatch, mode):
    """write_streams' packed path (one SQL statement inserting from one blob per topic) stores what write_raw
    stores with the records interleaved stamp by stamp: same rows, ids, stamps and bytes, and rosbags reads the
    same bag; also when split over several statements, when SQLite lacks json_each (rows then), and when one
    topic's messages differ in size (rows then)."""
    import sqlite3

    from ros_dofkit.ros import bag_io

    stamps = [1_000 + 10 * (k // 2) for k in range(11)]  # equal stamps keep the order given
    joint_states = [typestore.serialize_cdr(joint_state(typestore, s, [float(k)] * (1 + (k % 2 if mode ==
                                                                                          "unequal_sizes" else 0))),
                                            "sensor_msgs/msg/JointState") for k, s in enumerate(stamps)]
    tfs = [typestore.serialize_cdr(tf_message(typestore, s, float(k)), "tf2_msgs/msg/TFMessage")
           for k, s in enumerate(stamps)]
    if mode == "small_statements":
        monkeypatch.setattr(bag_io._Sqlite3File, "PACKED_STAMPS", 3)
    if mode == "without_json":
        monkeypatch.setattr(bag_io._Sqlite3File, "has_json", None)
        real_open = bag_io._open_for_writing
        refusal = bag_io.apsw.SQLError if bag_io.apsw is not None else sqlite3.OperationalError

        class WithoutJson:  # what an SQLite built without its JSON functions answers, whichever driver writes
            def __init__(self, connection):
                self.connection = connection

            def __getattr__(self, name):
                return getattr(self.connection, name)

            def execute(self, statement, *arguments):
                if "json_each" in statement:
                    raise refusal("no such table: json_each")
                return self.connection.execute(statement, *arguments)

        monkeypatch.setattr(bag_io, "_open_for_writing", lambda path: WithoutJson(real_open(path)))
    tables = []
    for name in ("raw", "streams"):
        with BagWriter(tmp_path / name, typestore=typestore) as bag:
            bag.add_topic("/js", "sensor_msgs/msg/JointState")
            bag.add_topic("/tf", "tf2_msgs/msg/TFMessage")
            bag.write_raw([("/js", 500, joint_states[0])])  # ids go on after rows written before
            if name == "streams":
                streams = [("/tf", tfs), ("/js", joint_states)]
                if mode == "matrices":
                    streams = [(topic, np.frombuffer(b"".join(m), dtype=np.uint8).reshape(len(m), -1))
                               for topic, m in streams]
                bag.write_streams(np.array(stamps), streams)
            else:
                bag.write_raw((topic, s, messages[k]) for k, s in enumerate(stamps)
                              for topic, messages in (("/tf", tfs), ("/js", joint_states)))
            assert bag.counts == {"/js": 12, "/tf": 11}
        database = sqlite3.connect(next((tmp_path / name).glob("*.db3")))
        tables.append(database.execute("SELECT id, topic_id, timestamp, data FROM messages ORDER BY id").fetchall())
        database.close()
    assert tables[0] == tables[1]
    assert [row[0] for row in tables[1]] == list(range(1, 24))
    assert _rosbags_view(tmp_path / "raw") == _rosbags_view(tmp_path / "streams")
    if mode == "without_json":
        assert bag_io._Sqlite3File.has_json is False


@pytest.mark.parametrize("count", [1, 31, 32, 33, 64, 97])
def test_bulk_insert_keeps_every_row_in_the_order_given(tmp_path, count):
    """write_raw on sqlite3 inserts in multi-row statements plus single rows for the remainder: whatever the count,
    the table holds every row once, numbered in the order given (equal stamps keep that order)."""
    import sqlite3

    from ros_dofkit.ros.bag_io import _Sqlite3File

    assert _Sqlite3File.ROWS_PER_INSERT == 32  # the parametrized counts straddle this statement size
    rows = [("/a" if k % 3 else "/b", 1_000 + k // 2, bytes([0, 1, 0, 0, k % 256, k // 256])) for k in range(count)]
    path = tmp_path / "bag"
    with BagWriter(path, journal=False) as bag:
        bag.add_topic("/a", "std_msgs/msg/Empty")
        bag.add_topic("/b", "std_msgs/msg/Empty")
        bag.write_raw(rows)
    database = sqlite3.connect(path / "bag.db3")
    ids = dict(database.execute("SELECT name, id FROM topics").fetchall())
    stored = database.execute("SELECT id, topic_id, timestamp, data FROM messages ORDER BY id").fetchall()
    database.close()
    assert [row[0] for row in stored] == list(range(1, count + 1))
    assert [(topic_id, stamp, data) for _, topic_id, stamp, data in stored] == [
        (ids[topic], stamp, data) for topic, stamp, data in rows]
    assert bag_topics(path) == {topic: ("std_msgs/msg/Empty", sum(r[0] == topic for r in rows))
                                for topic in ("/a", "/b")}


def test_without_pyyaml_every_bag_goes_through_rosbags(tmp_path, typestore, monkeypatch):
    """PyYAML is optional: without it sqlite3 bags are written and read by rosbags, with the same results."""
    from ros_dofkit.ros import bag_io

    records = _records(typestore)
    write_bag(tmp_path / "direct", records)
    monkeypatch.setattr(bag_io, "yaml", None)
    write_bag(tmp_path / "rosbags", records)
    assert _rosbags_view(tmp_path / "rosbags")[2] == _rosbags_view(tmp_path / "direct")[2]
    for path in (tmp_path / "direct", tmp_path / "rosbags"):
        got = read_raw(path)
        assert list(zip(got.topics, got.stamps_ns.tolist(), [bytes(d) for d in got.data], strict=True)) == (
            _rosbags_view(path)[2])
        # In windows too: rosbags' database connection is apsw's, whose cursors have no fetchmany.
        windows = list(bag_io.iter_raw(path, window=2))
        assert [len(w.topics) for w in windows] == [2] * (len(got.topics) // 2) + [1] * (len(got.topics) % 2)
        assert [(t, s, bytes(d)) for w in windows for t, s, d in zip(w.topics, w.stamps_ns.tolist(), w.data,
                                                                       strict=True)] == _rosbags_view(path)[2]


@pytest.mark.parametrize("storage", STORAGES)
def test_bag_appears_complete_at_close_and_not_at_all_after_an_abort_or_an_exception(tmp_path, typestore, storage):
    final = tmp_path / "out"
    bag = BagWriter(final, storage=storage, typestore=typestore)
    bag.write("/joint_states", 1_000, joint_state(typestore, 1_000, [0.1]))
    assert not final.exists()  # written aside until complete
    bag.close()
    suffix = ".db3" if storage == "sqlite3" else ".mcap"
    assert sorted(p.name for p in final.iterdir()) == ["metadata.yaml", f"out{suffix}"]  # named after the bag
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert [r.stamp_ns for r in read_bag(final)] == [1_000]

    aborted = BagWriter(tmp_path / "aborted", storage=storage, typestore=typestore)
    aborted.write("/joint_states", 1_000, joint_state(typestore, 1_000, [0.1]))
    aborted.abort()
    with pytest.raises(KeyboardInterrupt), BagWriter(tmp_path / "interrupted", storage=storage) as interrupted:
        interrupted.write("/joint_states", 1_000, joint_state(interrupted.typestore, 1_000, [0.1]))
        raise KeyboardInterrupt
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("storage", STORAGES)
def test_bags_record_the_offered_qos_so_ros2_bag_play_latches_tf_static(tmp_path, typestore, storage):
    """metadata.yaml (as rosbag2 Jazzy reads it, version 9) and rosbags' reader see /tf_static offered transient
    local (keep last 1) and /tf volatile: ``ros2 bag play`` republishes with the recorded profile."""
    import yaml

    with BagWriter(tmp_path / "bag", storage=storage) as bag:
        bag.write("/tf_static", 1, tf_message(typestore, 1, 0.1))
        bag.write("/tf", 2, tf_message(typestore, 2, 0.2))
    information = yaml.safe_load((tmp_path / "bag" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    profiles = {entry["topic_metadata"]["name"]: entry["topic_metadata"]["offered_qos_profiles"]
                for entry in information["topics_with_message_count"]}
    assert [(p["durability"], p["reliability"], p["history"], p["depth"]) for p in profiles["/tf_static"]] == [
        ("transient_local", "reliable", "keep_last", 1)]
    assert [p["durability"] for p in profiles["/tf"]] == ["volatile"]
    with Reader(tmp_path / "bag") as reader:
        offered = {c.topic: c.ext.offered_qos_profiles for c in reader.connections}
    assert offered["/tf_static"][0].durability.name == "TRANSIENT_LOCAL"
    assert offered["/tf"][0].durability.name == "VOLATILE"
